//! `/_abide/metrics`: Prometheus text, per provider. What the upstream said
//! (`abide_remote_responses_total`, the name `abide serve` gives it) is counted apart from
//! what the proxy answered its clients (`abide_proxy_answers_total`). The session's gauges
//! carry `abide serve`'s names and labels ([`names`]), so one dashboard reads both.
//!
//! Labels are provider names and status codes only: never a path, a header or a
//! credential.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use abide_core::Clock;

use crate::counters::WAIT_BUCKETS;
use crate::provider::Provider;

/// Names shared with `abide serve`'s `/metrics`: one meaning, one name, whichever
/// process exports it (the proxy labels them by `provider`, and `node` where serve does).
pub mod names {
    /// Attempts per remote answer: `remote="http_<status>"` or `"no_response"`.
    pub const REMOTE_RESPONSES: &str = "abide_remote_responses_total";
    /// The pacer's rate.
    pub const PACE: &str = "abide_provider_pace_requests_per_second";
    /// Advertised × headroom.
    pub const TARGET: &str = "abide_provider_target_requests_per_second";
    /// The limit learned from throttles.
    pub const CEILING: &str = "abide_provider_ceiling_requests_per_second";
    /// The limit the rate-limit fields advertise.
    pub const ADVERTISED: &str = "abide_provider_advertised_requests_per_second";
    /// Throttled fraction of answers over the pacer's window.
    pub const THROTTLE_RATIO: &str = "abide_provider_throttle_ratio";
    /// Pause left.
    pub const PAUSE_REMAINING: &str = "abide_provider_pause_remaining_seconds";
    /// 1 for the current way of sharing the limit, 0 for the others.
    pub const COORD_MODE: &str = "abide_coordination_mode";
    /// Nodes sharing the limit.
    pub const COORD_NODES: &str = "abide_coordination_nodes";
    /// This node's share of the granted slots.
    pub const COORD_SHARE: &str = "abide_coordination_share_ratio";
    /// Every shared name with its Prometheus type.
    pub const SHARED: &[(&str, &str)] = &[
        (REMOTE_RESPONSES, "counter"),
        (PACE, "gauge"),
        (TARGET, "gauge"),
        (CEILING, "gauge"),
        (ADVERTISED, "gauge"),
        (THROTTLE_RATIO, "gauge"),
        (PAUSE_REMAINING, "gauge"),
        (COORD_MODE, "gauge"),
        (COORD_NODES, "gauge"),
        (COORD_SHARE, "gauge"),
    ];
}

fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A session gauge's value for a provider, its pacer snapshot and the pause left (`None`:
/// unknown, the series is left out).
type Gauge = fn(&Provider, &abide_core::pacer::PacerSnapshot, Duration) -> Option<f64>;

/// Every provider's metrics, in the Prometheus text format (version 0.0.4).
pub(crate) fn render(providers: &[std::sync::Arc<Provider>]) -> String {
    use names::*;
    let mut o = String::new();
    header(
        &mut o,
        "abide_proxy_requests_inside",
        "gauge",
        "Client requests inside the proxy (held or on the wire).",
    );
    for p in providers {
        let n = p.inside.load(Ordering::Relaxed);
        let _ = writeln!(
            o,
            "abide_proxy_requests_inside{{provider=\"{}\"}} {n}",
            p.name
        );
    }
    header(
        &mut o,
        "abide_proxy_answers_total",
        "counter",
        "Answers the proxy gave its clients, by status.",
    );
    for p in providers {
        let a = p
            .metrics
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (s, n) in a.iter() {
            let _ = writeln!(
                o,
                "abide_proxy_answers_total{{provider=\"{}\",status=\"{s}\"}} {n}",
                p.name
            );
        }
    }
    header(
        &mut o,
        REMOTE_RESPONSES,
        "counter",
        "Attempts per remote answer (http_429, ..., no_response): what the upstream said.",
    );
    for p in providers {
        let a = p
            .metrics
            .upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The 429 series exists from the start, so the first 429 is an increase from 0.
        let t429 = a.get(&429).copied().unwrap_or(0);
        let others = a.iter().filter(|(s, _)| **s != 429);
        for (s, n) in std::iter::once((&429, &t429)).chain(others) {
            let _ = writeln!(
                o,
                "{REMOTE_RESPONSES}{{provider=\"{}\",remote=\"http_{s}\"}} {n}",
                p.name
            );
        }
        let _ = writeln!(
            o,
            "{REMOTE_RESPONSES}{{provider=\"{}\",remote=\"no_response\"}} {}",
            p.name,
            p.metrics.no_response.load(Ordering::Relaxed)
        );
    }
    header(
        &mut o,
        "abide_proxy_wait_seconds",
        "histogram",
        "Time a request was held by the proxy (pace, pause, retry delays).",
    );
    for p in providers {
        let m = &p.metrics;
        for (i, b) in WAIT_BUCKETS.iter().enumerate() {
            let n = m.wait_buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(
                o,
                "abide_proxy_wait_seconds_bucket{{provider=\"{}\",le=\"{b}\"}} {n}",
                p.name
            );
        }
        let count = m.wait_count.load(Ordering::Relaxed);
        let sum = m.wait_sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(
            o,
            "abide_proxy_wait_seconds_bucket{{provider=\"{0}\",le=\"+Inf\"}} {count}\nabide_proxy_wait_seconds_sum{{provider=\"{0}\"}} {sum}\nabide_proxy_wait_seconds_count{{provider=\"{0}\"}} {count}",
            p.name
        );
    }
    // What the session decides and sees, labelled by provider and node as serve labels it.
    let live: Vec<_> = providers
        .iter()
        .filter_map(|p| {
            let s = p.policy.pacer_snapshot(&p.name)?;
            let c = p.policy.coordination_status(&p.name)?;
            Some((p, s, c))
        })
        .collect();
    let gauges: [(&str, &str, Gauge); 6] = [
        (PACE, "Current pace of the provider's pacer.", |_, s, _| {
            Some(s.rate)
        }),
        (
            TARGET,
            "Pace aimed at from advertised rate-limit headers (limit x headroom).",
            |_, s, _| s.target,
        ),
        (
            CEILING,
            "Limit the pacer learned from throttles (set after the first throttle).",
            |_, s, _| s.ceiling,
        ),
        (
            ADVERTISED,
            "Rate the provider's rate-limit headers advertise (limit / window).",
            |p, s, _| s.target.map(|t| t / p.headroom),
        ),
        (
            THROTTLE_RATIO,
            "Fraction of responses over the pacer's window that were throttles.",
            |_, s, _| Some(s.throttle_rate),
        ),
        (
            PAUSE_REMAINING,
            "Pause the provider imposed (Retry-After) still to wait, 0 when not paused.",
            |_, s, left| Some(s.paused_until.map_or(0.0, |_| left.as_secs_f64())),
        ),
    ];
    for (name, help, value) in gauges {
        header(&mut o, name, "gauge", help);
        for (p, s, c) in &live {
            let now = p.clock.monotonic();
            let left = s
                .paused_until
                .map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
            // Unknown stays absent (not 0): "no limit advertised" is not "a limit of 0".
            if let Some(v) = value(p, s, left) {
                let _ = writeln!(
                    o,
                    "{name}{{provider=\"{}\",node=\"{}\"}} {v}",
                    p.name, c.node
                );
            }
        }
    }
    header(
        &mut o,
        COORD_MODE,
        "gauge",
        "1 for how this node shares the provider's limit now (mode = local, redis, fallback), 0 for the others.",
    );
    for (p, _, c) in &live {
        for mode in [
            abide_core::CoordinationMode::Local,
            abide_core::CoordinationMode::Redis,
            abide_core::CoordinationMode::Fallback,
        ] {
            let on = u8::from(c.mode == mode);
            let _ = writeln!(
                o,
                "{COORD_MODE}{{provider=\"{}\",node=\"{}\",mode=\"{}\"}} {on}",
                p.name,
                c.node,
                mode.as_str()
            );
        }
    }
    header(
        &mut o,
        COORD_NODES,
        "gauge",
        "Nodes sharing the provider's limit, alive by their heartbeats (1 when local).",
    );
    header(
        &mut o,
        COORD_SHARE,
        "gauge",
        "This node's fraction of the shared send slots over the last 3 s.",
    );
    for (p, _, c) in &live {
        let _ = writeln!(
            o,
            "{COORD_NODES}{{provider=\"{0}\",node=\"{1}\"}} {2}\n{COORD_SHARE}{{provider=\"{0}\",node=\"{1}\"}} {3}",
            p.name, c.node, c.nodes, c.share
        );
    }
    o
}

/// `/_abide/stats`: per provider, the requests inside, the pace, the pause left (seconds),
/// how the limit is shared, and the answers to clients and from the upstream by status.
pub(crate) fn stats(providers: &[std::sync::Arc<Provider>]) -> serde_json::Value {
    let by_status = |m: &Mutex<BTreeMap<u16, u64>>| {
        let m = m.lock().unwrap_or_else(PoisonError::into_inner);
        serde_json::Value::Object(
            m.iter()
                .map(|(s, n)| (s.to_string(), serde_json::Value::from(*n)))
                .collect(),
        )
    };
    let list: Vec<serde_json::Value> = providers
        .iter()
        .map(|p| {
            let now = p.clock.monotonic();
            let pacer = p.policy.pacer_snapshot(&p.name);
            let coord = p.policy.coordination_status(&p.name);
            serde_json::json!({
                "provider": p.name,
                "inside": p.inside.load(Ordering::Relaxed),
                "pace_per_second": pacer.as_ref().map(|s| s.rate),
                "pause_remaining_seconds": pacer
                    .and_then(|s| s.paused_until)
                    .map_or(0.0, |u| u.saturating_duration_since(now).as_secs_f64()),
                "coordination": coord.map(|c| serde_json::json!({
                    "mode": c.mode.as_str(),
                    "nodes": c.nodes,
                })),
                "answers": by_status(&p.metrics.answers),
                "upstream": by_status(&p.metrics.upstream),
                "waits": p.metrics.wait_count.load(Ordering::Relaxed),
            })
        })
        .collect();
    serde_json::json!({ "providers": list })
}
