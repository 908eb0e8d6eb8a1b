//! `/_abide/metrics`: Prometheus text, per provider. What the upstream said
//! (`abide_proxy_upstream_responses_total`) is counted apart from what the proxy answered
//! its clients (`abide_proxy_answers_total`).
//!
//! Labels are provider names and status codes only: never a path, a header or a
//! credential.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use abide_core::Clock;

use crate::provider::Provider;

/// Upper bounds of the wait histogram, in seconds.
const WAIT_BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0];

/// One provider's counters.
#[derive(Debug, Default)]
pub(crate) struct ProviderMetrics {
    answers: Mutex<BTreeMap<u16, u64>>,
    upstream: Mutex<BTreeMap<u16, u64>>,
    /// Cumulative bucket counts, then the count of all observations.
    wait_buckets: [AtomicU64; WAIT_BUCKETS.len()],
    wait_count: AtomicU64,
    /// Sum of waits, in microseconds.
    wait_sum_us: AtomicU64,
}

impl ProviderMetrics {
    /// The proxy answered a client with `status`.
    pub(crate) fn answered(&self, status: u16) {
        *self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(status)
            .or_default() += 1;
    }

    /// The upstream answered an attempt with `status`.
    pub(crate) fn upstream(&self, status: u16) {
        *self
            .upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(status)
            .or_default() += 1;
    }

    /// A request was held for `wait` in the proxy (its time inside minus its time on the
    /// wire).
    pub(crate) fn waited(&self, wait: Duration) {
        let s = wait.as_secs_f64();
        for (i, b) in WAIT_BUCKETS.iter().enumerate() {
            if s <= *b {
                self.wait_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.wait_count.fetch_add(1, Ordering::Relaxed);
        self.wait_sum_us
            .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Every provider's metrics, in the Prometheus text format (version 0.0.4).
pub(crate) fn render(providers: &[std::sync::Arc<Provider>]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# HELP abide_proxy_requests_inside Client requests inside the proxy (held or on the wire).\n# TYPE abide_proxy_requests_inside gauge"
    );
    for p in providers {
        let n = p.inside.load(Ordering::Relaxed);
        let _ = writeln!(
            o,
            "abide_proxy_requests_inside{{provider=\"{}\"}} {n}",
            p.name
        );
    }
    let _ = writeln!(
        o,
        "# HELP abide_proxy_answers_total Answers the proxy gave its clients, by status.\n# TYPE abide_proxy_answers_total counter"
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
    let _ = writeln!(
        o,
        "# HELP abide_proxy_upstream_responses_total Answers the upstream gave, by status.\n# TYPE abide_proxy_upstream_responses_total counter"
    );
    for p in providers {
        let a = p
            .metrics
            .upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (s, n) in a.iter() {
            let _ = writeln!(
                o,
                "abide_proxy_upstream_responses_total{{provider=\"{}\",status=\"{s}\"}} {n}",
                p.name
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP abide_proxy_wait_seconds Time a request was held by the proxy (pace, pause, retry delays).\n# TYPE abide_proxy_wait_seconds histogram"
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
    let _ = writeln!(
        o,
        "# HELP abide_provider_pace_requests_per_second The pace the provider's session aims at.\n# TYPE abide_provider_pace_requests_per_second gauge\n# HELP abide_provider_pause_remaining_seconds Time left in the provider's pause.\n# TYPE abide_provider_pause_remaining_seconds gauge"
    );
    for p in providers {
        let now = p.clock.monotonic();
        if let Some(s) = p.policy.pacer_snapshot(&p.name) {
            let pause = s
                .paused_until
                .map_or(0.0, |u| u.saturating_duration_since(now).as_secs_f64());
            let _ = writeln!(
                o,
                "abide_provider_pace_requests_per_second{{provider=\"{0}\"}} {1}\nabide_provider_pause_remaining_seconds{{provider=\"{0}\"}} {pause}",
                p.name, s.rate
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP abide_provider_coordination_nodes Nodes sharing the provider's limit (1: this one alone).\n# TYPE abide_provider_coordination_nodes gauge"
    );
    for p in providers {
        if let Some(c) = p.policy.coordination_status(&p.name) {
            let _ = writeln!(
                o,
                "abide_provider_coordination_nodes{{provider=\"{}\",mode=\"{}\"}} {}",
                p.name,
                c.mode.as_str(),
                c.nodes
            );
        }
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
