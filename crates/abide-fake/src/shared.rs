//! `--redis URL`: the provider's gates kept in Redis ([`abide_gate::RedisGates`]), so
//! several provider instances behind one key enforce one limit.
//!
//! The shared gates are asked before the provider's own checks (suspension, duplicates,
//! injected 503s), because the handler's state lock cannot be held across a network round
//! trip: with Redis, every authenticated request counts against the shared rate, as many
//! real gateways count. When Redis cannot decide, the request gets `503` with
//! `Retry-After: 1`, never an unlimited pass.

use abide_gate::{LeaseGuard, Rejection, SharedLeaseGuard};
use axum::http::HeaderMap;
use std::time::Duration;

use crate::app::App;
use crate::idempotency::idempotency_key;

/// What the shared gates said, decided before the handler takes its lock.
pub(crate) enum Shared {
    /// Admitted: the headers to send, the leases to give back and how long to hold the
    /// request first.
    Admitted(Box<(HeaderMap, SharedLeaseGuard, Duration)>),
    Refused(Rejection),
    /// Redis could not decide.
    Unavailable,
}

/// Leases of an accepted message, local or shared (boxed: a shared guard is three times
/// the size of a local one, and the shared path pays a Redis round trip anyway).
pub(crate) enum Guard {
    Local(LeaseGuard),
    Shared(Box<SharedLeaseGuard>),
}

impl Guard {
    /// The request's delay is over: its reserved slots are spent, not given back.
    pub(crate) fn arrived(&mut self) {
        match self {
            Guard::Local(g) => g.arrived(),
            Guard::Shared(g) => g.arrived(),
        }
    }

    /// Give the leases back before the answer leaves, so the caller's next request finds its
    /// slot free (a dropped shared guard would release in the background, a little later).
    pub(crate) async fn release(self) {
        match self {
            Guard::Local(g) => drop(g),
            Guard::Shared(g) => {
                if let Err(e) = g.release().await {
                    tracing::warn!(error = %e, "shared lease not released; it will expire");
                }
            }
        }
    }
}

/// Ask the shared gates, when the provider has them and the request names a known key.
pub(crate) async fn ask(app: &App, headers: &HeaderMap) -> Option<Shared> {
    let store = app.redis.as_ref()?;
    let id = app.keys.lookup(headers)?;
    // A malformed Idempotency-Key is refused later, before the gate point.
    let trace = idempotency_key(headers).ok()?;
    let (account, trace) = (id.account.as_deref(), trace.as_deref());
    Some(ask_for(store, &id.key, account, trace, true).await)
}

/// Ask the shared gates for `key` of `account` (the SMPP listener passes its system_id);
/// with `delay`, a delaying gate may hold the request (HTTP), else it refuses (SMPP, whose
/// window of outstanding PDUs is the client's own backpressure).
pub(crate) async fn ask_for(
    store: &abide_gate::RedisGates,
    key: &str,
    account: Option<&str>,
    trace: Option<&str>,
    delay: bool,
) -> Shared {
    let verdict = if delay {
        store.check_delayed(key, account, trace).await
    } else {
        store.check_traced(key, account, trace).await
    };
    match verdict {
        Ok(Ok(a)) => {
            let (h, d) = (a.headers(), a.delay());
            Shared::Admitted(Box::new((h, a.into_guard(store.clone()), d)))
        }
        Ok(Err(r)) => Shared::Refused(r),
        Err(e) => {
            tracing::warn!(error = %e, "shared gates unavailable; refusing");
            Shared::Unavailable
        }
    }
}
