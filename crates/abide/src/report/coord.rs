//! How the nodes share each provider's limit, for people: the `coordination` object of
//! `/v1/stats` (one node's view) and the shared view of `abide status --redis` (every
//! node's, read from Redis).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use abide_core::{CoordinationMode, CoordinationStatus};
use abide_redis::SharedLimit;
use serde_json::{json, Value};

use abide_core::rfc3339::format as rfc3339;

/// The `coordination` object of a provider in `/v1/stats`, with wall-clock times counted
/// from `now`, the instant the status was taken: mode (and since when in fallback), nodes
/// seen with their share, the shared rate and ceiling, the shared pause (until when, set
/// by which node).
pub(crate) fn live_value(
    c: &CoordinationStatus,
    now: SystemTime,
    paused_for: Option<Duration>,
) -> Value {
    let ago = |d: Duration| rfc3339(now.checked_sub(d).unwrap_or(now));
    let peers: Vec<Value> = c
        .peers
        .iter()
        .map(|p| {
            json!({
                "node": p.node,
                "last_seen": ago(p.last_seen_ago),
                "last_seen_ago_secs": p.last_seen_ago.as_secs_f64(),
                "mode": p.mode,
                "share": p.share,
                "rate_per_sec": p.rate,
            })
        })
        .collect();
    let pause = paused_for.filter(|_| c.mode != CoordinationMode::Local || c.pause_by.is_some());
    json!({
        "node": c.node,
        "mode": c.mode,
        "fallback_since": c.fallback_for.map(ago),
        "fallback_for_secs": c.fallback_for.map(|d| d.as_secs_f64()),
        "nodes": c.nodes,
        "nodes_assumed": c.nodes_assumed,
        "share": c.share,
        "shared_rate_per_sec": c.shared_rate,
        "shared_ceiling_per_sec": c.shared_ceiling,
        "pause": pause.map(|d| json!({
            "until": rfc3339(now + d),
            "remaining_secs": d.as_secs_f64(),
            "by": c.pause_by,
        })),
        "peers": peers,
    })
}

/// One line for a terminal: `redis (node …, 3 node(s) seen, share 0.33)`, or `fallback
/// (node …, for 90 s, …)`.
pub(crate) fn live_line(c: &CoordinationStatus) -> String {
    let mut s = format!("{} (node {}", c.mode.as_str(), c.node);
    if let Some(d) = c.fallback_for {
        let _ = write!(s, ", for {:.0} s", d.as_secs_f64());
    }
    let seen = if c.nodes_assumed {
        "assumed (Redis never answered)"
    } else {
        "seen"
    };
    let _ = write!(s, ", {} node(s) {seen}, share {:.2}", c.nodes, c.share);
    if let Some(r) = c.shared_rate {
        let _ = write!(s, ", shared rate {r:.1}/s");
    }
    if let Some(by) = &c.pause_by {
        let _ = write!(s, ", paused by {by}");
    }
    s.push(')');
    s
}

/// The shared view as JSON (`abide status --redis --json`).
pub(crate) fn shared_value(limits: &[SharedLimit], url: &str) -> Value {
    let keys: Vec<Value> = limits
        .iter()
        .map(|l| {
            json!({
                "key": l.key,
                "shared_rate_per_sec": l.rate,
                "shared_ceiling_per_sec": l.ceiling,
                "pause": l.paused_until.map(|t| json!({"until": rfc3339(t), "by": l.pause_by})),
                "node_count": l.node_count,
                "nodes": l.nodes.iter().map(|n| json!({
                    "node": n.node,
                    "last_seen_ago_secs": n.last_seen_ago.as_secs_f64(),
                    "mode": n.mode,
                    "share": n.share,
                    "rate_per_sec": n.rate,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"mode": "redis", "redis": url, "keys": keys})
}

/// The shared view for a terminal: per provider key, the shared rate, pause and nodes.
pub(crate) fn render_shared(limits: &[SharedLimit], url: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "  coordination     redis {url}");
    if limits.is_empty() {
        let _ = writeln!(
            s,
            "    no provider shares a limit there yet (no node has synced)"
        );
    }
    for l in limits {
        let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}/s"));
        let _ = writeln!(
            s,
            "    {}: shared rate {}, ceiling {}, {} node(s) alive",
            l.key,
            opt(l.rate),
            opt(l.ceiling),
            l.node_count
        );
        if let Some(t) = l.paused_until {
            let by = l.pause_by.as_deref().unwrap_or("an unknown node");
            let _ = writeln!(s, "      paused until {} (set by {by})", rfc3339(t));
        }
        for n in &l.nodes {
            let _ = writeln!(
                s,
                "      node {:<40} seen {:>5.1}s ago  {:<8} share {:.2}  rate {:.1}/s",
                n.node,
                n.last_seen_ago.as_secs_f64(),
                n.mode,
                n.share,
                n.rate
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use abide_core::NodeSeen;
    use std::time::UNIX_EPOCH;

    fn status() -> CoordinationStatus {
        CoordinationStatus {
            node: "n1".into(),
            mode: CoordinationMode::Fallback,
            nodes: 3,
            share: 0.33,
            pause_by: Some("n2".into()),
            fallback_for: Some(Duration::from_secs(90)),
            shared_rate: Some(96.0),
            shared_ceiling: Some(100.0),
            peers: vec![NodeSeen {
                node: "n2".into(),
                last_seen_ago: Duration::from_secs(1),
                mode: "redis".into(),
                share: 0.5,
                rate: 96.0,
            }],
            ..CoordinationStatus::default()
        }
    }

    #[test]
    fn the_live_view_gives_wall_times_the_pause_and_every_node() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let v = live_value(&status(), now, Some(Duration::from_secs(30)));
        assert_eq!(v["mode"], "fallback");
        assert_eq!(v["fallback_since"], "2027-01-15T07:58:30Z");
        assert_eq!(v["pause"]["until"], "2027-01-15T08:00:30Z");
        assert_eq!(v["pause"]["by"], "n2");
        assert_eq!(v["shared_rate_per_sec"], 96.0);
        assert_eq!(v["peers"][0]["node"], "n2");
        assert_eq!(v["peers"][0]["last_seen"], "2027-01-15T07:59:59Z");
        let line = live_line(&status());
        assert!(line.contains("fallback (node n1, for 90 s"), "{line}");
        assert!(line.contains("paused by n2"), "{line}");
        // Local and unpaused: no pause object.
        let local = CoordinationStatus {
            node: "l".into(),
            nodes: 1,
            share: 1.0,
            ..CoordinationStatus::default()
        };
        let v = live_value(&local, now, Some(Duration::from_secs(3)));
        assert!(v["pause"].is_null() && v["fallback_since"].is_null(), "{v}");
    }

    #[test]
    fn the_shared_view_names_each_key_its_pause_and_nodes() {
        let l = SharedLimit {
            key: "abide:coord:sms".into(),
            rate: Some(90.0),
            ceiling: None,
            paused_until: Some(UNIX_EPOCH + Duration::from_secs(1_800_000_030)),
            pause_by: Some("n2".into()),
            nodes: status().peers,
            node_count: 1,
        };
        let text = render_shared(std::slice::from_ref(&l), "redis://h:6379");
        assert!(
            text.contains("abide:coord:sms: shared rate 90.0/s, ceiling -, 1 node(s) alive"),
            "{text}"
        );
        assert!(
            text.contains("paused until 2027-01-15T08:00:30Z (set by n2)"),
            "{text}"
        );
        assert!(text.contains("node n2"), "{text}");
        let v = shared_value(&[l], "redis://h:6379");
        assert_eq!(v["keys"][0]["nodes"][0]["share"], 0.5);
    }
}
