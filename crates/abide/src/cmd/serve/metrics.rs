//! What `abide serve` exports on `/metrics`: every metric name in one table, and the
//! handler that refreshes them on a scrape.
//!
//! Names follow the Prometheus conventions (<https://prometheus.io/docs/practices/naming/>):
//! the unit in the name (`_seconds`, `_requests_per_second`, `_ratio`, `_timestamp_seconds`),
//! `_total` on counters, one meaning per metric (a sum over its labels means something).
//! The alert rules in `deploy/prometheus/abide-rules.yml` and the Grafana board in
//! `deploy/grafana/abide.json` use only names from [`METRICS`]; tests below check both.
//!
//! Renamed (issue 14), old name → new name:
//! - `abide_provider_pace_per_second` → `abide_provider_pace_requests_per_second`
//! - `abide_provider_throttle_rate` → `abide_provider_throttle_ratio`
//! - `abide_provider_paused_seconds` → `abide_provider_pause_remaining_seconds`
//! - `abide_dispatcher_total{what="X"}` → `abide_dispatcher_X_total` (one counter per
//!   decision: a sum of attempts and deliveries meant nothing), with `budget_denied` →
//!   `retry_budget_denied` and `terminal_failures` → `failed`.

use abide_outbox::{Progress, State as ItemState};

use crate::report::Snapshot;

/// Kind of a metric, as Prometheus types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Gauge,
    Counter,
}

/// One exported metric: name, kind, help line (its labels are in the help of `abide serve`).
#[derive(Debug)]
pub(crate) struct Metric {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) help: &'static str,
}

const fn gauge(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Gauge,
        help,
    }
}

const fn counter(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Counter,
        help,
    }
}

pub(crate) const ITEMS: &str = "abide_items";
pub(crate) const OLDEST_PENDING_AGE: &str = "abide_oldest_pending_age_seconds";
pub(crate) const REMOTE_RESPONSES: &str = "abide_remote_responses_total";
pub(crate) const PACE: &str = "abide_provider_pace_requests_per_second";
pub(crate) const TARGET: &str = "abide_provider_target_requests_per_second";
pub(crate) const CEILING: &str = "abide_provider_ceiling_requests_per_second";
pub(crate) const ADVERTISED: &str = "abide_provider_advertised_requests_per_second";
pub(crate) const THROTTLE_RATIO: &str = "abide_provider_throttle_ratio";
pub(crate) const PAUSE_REMAINING: &str = "abide_provider_pause_remaining_seconds";
/// The `remote` label of an HTTP 429 answer.
const HTTP_429: &str = "http_429";
pub(crate) const SUNSET: &str = "abide_provider_sunset_timestamp_seconds";
pub(crate) const STORE_FAULT: &str = "abide_store_fault_seconds";
pub(crate) const COORD_MODE: &str = "abide_coordination_mode";
pub(crate) const COORD_NODES: &str = "abide_coordination_nodes";
pub(crate) const COORD_SHARE: &str = "abide_coordination_share_ratio";
pub(crate) const RECEIPTS: &str = "abide_receipts";
pub(crate) const SUSPENDED: &str = "abide_provider_suspended";

/// Every metric `abide serve` exports.
pub(crate) const METRICS: &[Metric] = &[
    gauge(ITEMS, "Items in the outbox per state (what abide decided)."),
    gauge(
        RECEIPTS,
        "Delivery receipts (SMPP) per state; state=\"unmatched\" counts receipts naming no item.",
    ),
    gauge(
        STORE_FAULT,
        "How long results have failed to be written to the database (0 when healthy); nothing is sent meanwhile.",
    ),
    gauge(
        OLDEST_PENDING_AGE,
        "Age of the oldest QUEUED or PENDING item, 0 when none waits.",
    ),
    counter(
        REMOTE_RESPONSES,
        "Attempts per remote answer (http_429, smpp_0x58, no_response), from the outbox database.",
    ),
    gauge(PACE, "Current pace of the provider's pacer."),
    gauge(
        SUSPENDED,
        "1 while the provider sends nothing this run (an SMPP bind refused for good; /v1/stats says why), else 0.",
    ),
    gauge(
        TARGET,
        "Pace aimed at from advertised rate-limit headers (limit x headroom).",
    ),
    gauge(
        CEILING,
        "Limit the pacer learned from throttles (set after the first throttle).",
    ),
    gauge(
        ADVERTISED,
        "Rate the provider's rate-limit headers advertise (limit / window).",
    ),
    gauge(
        THROTTLE_RATIO,
        "Fraction of responses over the pacer's window that were throttles.",
    ),
    gauge(
        PAUSE_REMAINING,
        "Pause the provider imposed (Retry-After, suspension) still to wait, 0 when not paused.",
    ),
    gauge(
        COORD_MODE,
        "1 for how this node shares the provider's limit now (mode = local, redis, fallback), 0 for the others; labelled by node id.",
    ),
    gauge(
        COORD_NODES,
        "Nodes sharing the provider's limit, alive by their heartbeats (1 when local).",
    ),
    gauge(
        COORD_SHARE,
        "This node's fraction of the shared send slots over the last 3 s.",
    ),
    gauge(
        SUNSET,
        "Sunset date (RFC 8594) the provider announced, Unix time.",
    ),
    counter(
        "abide_dispatcher_attempts_total",
        "Requests this process sent.",
    ),
    counter(
        "abide_dispatcher_delivered_total",
        "Items the provider accepted.",
    ),
    counter(
        "abide_dispatcher_throttled_total",
        "Attempts the provider throttled (429, SMPP throttle, ...).",
    ),
    counter(
        "abide_dispatcher_retries_scheduled_total",
        "Items put back to PENDING for another attempt.",
    ),
    counter(
        "abide_dispatcher_retry_budget_denied_total",
        "Retries the retry budget refused (the item waited longer).",
    ),
    counter("abide_dispatcher_failed_total", "Items that ended FAILED."),
    counter(
        "abide_dispatcher_deferred_total",
        "Items that ended DEFERRED.",
    ),
    counter(
        "abide_dispatcher_transport_failures_total",
        "Requests that got no answer (connection refused or reset, timeout).",
    ),
];

/// Register the help lines (once, after the recorder is installed).
pub(crate) fn describe() {
    for m in METRICS {
        match m.kind {
            Kind::Gauge => metrics::describe_gauge!(m.name, m.help),
            Kind::Counter => metrics::describe_counter!(m.name, m.help),
        }
    }
}

/// Set every metric from the database `snap`, the dispatcher's `live` snapshot and how
/// long results have been failing to be written (`store_fault`).
pub(crate) fn record(
    snap: Option<&Snapshot>,
    live: Option<&Progress>,
    store_fault: Option<std::time::Duration>,
) {
    metrics::gauge!(STORE_FAULT).set(store_fault.map_or(0.0, |d| d.as_secs_f64()));
    if let Some(s) = snap {
        for st in ItemState::ALL {
            metrics::gauge!(ITEMS, "state" => st.as_str()).set(s.counts.get(st) as f64);
        }
        metrics::gauge!(OLDEST_PENDING_AGE).set(s.oldest_pending_age_secs.unwrap_or(0.0));
        for st in abide_outbox::ReceiptState::ALL {
            metrics::gauge!(RECEIPTS, "state" => st.as_str()).set(s.receipts.get(st) as f64);
        }
        metrics::gauge!(RECEIPTS, "state" => "unmatched").set(s.receipts.unmatched as f64);
        for (code, n) in &s.remote_counts {
            metrics::counter!(REMOTE_RESPONSES, "remote" => code.clone()).absolute(*n);
        }
        // The 429 series exists from the first scrape, so the first 429 is an increase
        // from 0 that `increase()` sees (a series born at 1 would hide it).
        if !s.remote_counts.contains_key(HTTP_429) {
            metrics::counter!(REMOTE_RESPONSES, "remote" => HTTP_429).absolute(0);
        }
    }
    let Some(p) = live else { return };
    for x in &p.providers {
        // What this process decided and sees is labelled by its node id (one value per
        // process: bounded); the database's gauges above are the same on every node.
        let node_id = x.coordination.node.clone();
        let g = |name: &'static str| metrics::gauge!(name, "provider" => x.name.clone(), "node" => node_id.clone());
        g(PACE).set(x.rate);
        g(SUSPENDED).set(if x.suspended.is_some() { 1.0 } else { 0.0 });
        g(THROTTLE_RATIO).set(x.throttle_rate);
        g(PAUSE_REMAINING).set(x.paused_for.map_or(0.0, |d| d.as_secs_f64()));
        // Unknown stays absent (not 0): "no limit advertised" is not "a limit of 0".
        for (name, v) in [
            (TARGET, x.target_rate),
            (CEILING, x.ceiling),
            (ADVERTISED, x.advertised_rate),
        ] {
            if let Some(v) = v {
                g(name).set(v);
            }
        }
        if let Some(at) = x.sunset {
            let unix = at
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            g(SUNSET).set(unix);
        }
        let c = &x.coordination;
        for mode in [
            abide_core::CoordinationMode::Local,
            abide_core::CoordinationMode::Redis,
            abide_core::CoordinationMode::Fallback,
        ] {
            let on = if c.mode == mode { 1.0 } else { 0.0 };
            metrics::gauge!(COORD_MODE, "provider" => x.name.clone(), "node" => c.node.clone(),
                "mode" => mode.as_str())
            .set(on);
        }
        let node = |name: &'static str| metrics::gauge!(name, "provider" => x.name.clone(), "node" => c.node.clone());
        node(COORD_NODES).set(f64::from(c.nodes));
        node(COORD_SHARE).set(c.share);
        let t = &x.totals;
        for (name, n) in [
            ("abide_dispatcher_attempts_total", t.attempts),
            ("abide_dispatcher_delivered_total", t.delivered),
            ("abide_dispatcher_throttled_total", t.throttled),
            (
                "abide_dispatcher_retries_scheduled_total",
                t.retries_scheduled,
            ),
            (
                "abide_dispatcher_retry_budget_denied_total",
                t.budget_denied,
            ),
            ("abide_dispatcher_failed_total", t.terminal_failures),
            ("abide_dispatcher_deferred_total", t.deferred),
            (
                "abide_dispatcher_transport_failures_total",
                t.transport_failures,
            ),
        ] {
            metrics::counter!(name, "provider" => x.name.clone(), "node" => node_id.clone())
                .absolute(n);
        }
    }
}

/// Names of metrics (`abide_…`) a PromQL expression mentions.
#[cfg(test)]
fn names_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(off) = expr[i..].find("abide_") {
        let start = i + off;
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let mut end = start;
        while end < b.len() && ident(b[end]) {
            end += 1;
        }
        // Part of a longer identifier (a label or rule name): not a metric reference.
        if start == 0 || !ident(b[start - 1]) {
            out.push(expr[start..end].to_owned());
        }
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn known(name: &str) -> bool {
        METRICS.iter().any(|m| m.name == name)
    }

    #[test]
    fn names_follow_prometheus_conventions() {
        for m in METRICS {
            assert!(m.name.starts_with("abide_"), "{}", m.name);
            match m.kind {
                Kind::Counter => assert!(m.name.ends_with("_total"), "{}", m.name),
                Kind::Gauge => assert!(!m.name.ends_with("_total"), "{}", m.name),
            }
            let unitless_ok =
                [ITEMS, RECEIPTS, COORD_MODE, COORD_NODES, SUSPENDED].contains(&m.name);
            assert!(
                unitless_ok
                    || m.name.ends_with("_total")
                    || m.name.ends_with("_seconds")
                    || m.name.ends_with("_requests_per_second")
                    || m.name.ends_with("_ratio"),
                "{} has no unit suffix",
                m.name
            );
        }
        let mut names: Vec<_> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len(), "a metric listed twice");
    }

    #[test]
    fn metric_names_are_found_in_expressions() {
        assert_eq!(
            names_in("rate(abide_dispatcher_attempts_total{provider=\"x\"}[5m]) / abide_items"),
            ["abide_dispatcher_attempts_total", "abide_items"]
        );
        assert!(names_in("alert: Myabide_x").is_empty());
    }

    /// Every expression of every panel (rows included) of a Grafana dashboard.
    fn grafana_exprs(board: &Value) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut panels: Vec<&Value> = board["panels"].as_array().into_iter().flatten().collect();
        while let Some(p) = panels.pop() {
            panels.extend(p["panels"].as_array().into_iter().flatten());
            let title = p["title"].as_str().unwrap_or("?").to_owned();
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap_or_default().to_owned();
                out.push((title.clone(), expr));
            }
        }
        out
    }

    #[test]
    fn grafana_board_queries_only_exported_metrics() {
        let text = include_str!("../../../../../deploy/grafana/abide.json");
        let board: Value = serde_json::from_str(text).expect("deploy/grafana/abide.json parses");
        assert!(board["title"].is_string(), "a dashboard has a title");
        assert!(board["uid"].is_string(), "a dashboard has a uid");
        let exprs = grafana_exprs(&board);
        assert!(exprs.len() >= 8, "only {} queries", exprs.len());
        for (title, expr) in &exprs {
            let names = names_in(expr);
            assert!(
                !names.is_empty(),
                "panel {title:?}: {expr:?} names no abide metric"
            );
            for n in names {
                assert!(
                    known(&n),
                    "panel {title:?} queries {n}, which abide does not export"
                );
            }
        }
    }

    #[test]
    fn alert_rules_use_only_exported_metrics() {
        let text = include_str!("../../../../../deploy/prometheus/abide-rules.yml");
        let mut exprs = 0;
        for line in text.lines() {
            let Some(expr) = line.trim().strip_prefix("expr:") else {
                continue;
            };
            exprs += 1;
            for n in names_in(expr) {
                assert!(
                    known(&n),
                    "rule expression uses {n}, which abide does not export"
                );
            }
        }
        assert!(exprs >= 8, "only {exprs} rule expressions");
    }
}
