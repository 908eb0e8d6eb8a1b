//! A scripted replay: one item, one worker, no network latency, and the provider's answers
//! given in order. What it is for: feeding the same answers to the outbox (through its
//! scripted transport) and to the simulator's `abide` policy, and checking that both make
//! the same decisions at the same times, since both drive one `abide_core::Session`.

use std::time::{Duration, SystemTime};

use abide_core::PacerConfig;
use http::StatusCode;

use crate::engine::{run_with, Remote, RunConfig, Traced};
use crate::policy::PolicyKind;
use crate::provider::{Outcome, ProviderConfig, Response};

/// Replay `script` (the answer to request `n` at wall time `wall`) to the `abide` policy
/// delivering one item, and return every send and decision. `pacer` is the outbox's pacer
/// configuration (`abide send`'s default: [`PacerConfig::default`]).
pub fn replay_abide(
    script: impl FnMut(usize, SystemTime) -> Response + Send + 'static,
    pacer: PacerConfig,
) -> Vec<Traced> {
    let cfg = RunConfig {
        provider: ProviderConfig {
            limits: vec![(Duration::ZERO, f64::INFINITY)],
            burst: 1.0,
            window: None,
            retry_after: Vec::new(),
            throttle_status: 429,
            graphql_throttle: false,
            abuse: None,
            outages: Vec::new(),
            bad_every: None,
            forbidden_every: None,
            rate_limit_headers: false,
            delay: None,
        },
        workers: 1,
        latency: Duration::ZERO,
        items: 1,
        arrivals: vec![(Duration::ZERO, 1.0)],
        horizon: Duration::from_secs(86_400),
        bucket: Duration::from_secs(1),
        pacer,
    };
    let remote = Remote::Script(Box::new(script), 0);
    run_with(&cfg, PolicyKind::Abide, 0, remote, true).1
}

/// An HTTP answer with these headers (invalid ones are skipped).
pub fn answer(status: StatusCode, headers: &[(&str, &str)]) -> Response {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(v),
        ) {
            map.append(k, v);
        }
    }
    Response {
        status,
        headers: map,
        body: Vec::new(),
        outcome: if status.is_success() {
            Outcome::Accepted
        } else {
            Outcome::Throttled
        },
        transport: None,
        held: Duration::ZERO,
    }
}

/// No answer: the transport failed.
pub fn no_answer(failure: abide_core::TransportFailure) -> Response {
    Response {
        status: StatusCode::GATEWAY_TIMEOUT,
        headers: http::HeaderMap::new(),
        body: Vec::new(),
        outcome: Outcome::Outage,
        transport: Some(failure),
        held: Duration::ZERO,
    }
}
