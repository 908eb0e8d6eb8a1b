//! `abide send` against providers that throttle in vendors' shapes, most not a 429
//! (`abide provider --throttle-style`): every item delivered once, none stored
//! `SUBMITTED` before the provider accepted it, none `FAILED`. The real binary, a fake
//! provider on loopback, SQLite files in temp dirs; counts from the provider's own stats.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use abide_fake::ThrottleStyle;

/// A provider whose concurrency limit (2 in flight, 20 ms per message) is not advertised,
/// so a sender that over-estimates it meets throttles, each in `style`.
fn throttling(style: ThrottleStyle) -> abide_fake::ProviderConfig {
    let mut pc = provider_config(1000, 100);
    pc.limits.key_concurrency = Some(2);
    pc.latency_ms = 20;
    pc.behaviour.throttle = style;
    pc
}

/// The provider's own counts: accepted, duplicates, throttled (every refusal by status).
struct Seen {
    accepted: u64,
    duplicates: u64,
    throttled: u64,
}

impl From<&abide_fake::StatsSnapshot> for Seen {
    fn from(s: &abide_fake::StatsSnapshot) -> Self {
        Self {
            accepted: s.accepted,
            duplicates: s.duplicates,
            throttled: s.rejected_by_status.values().sum(),
        }
    }
}

/// What a run must show whatever the style: every item accepted exactly once and
/// `SUBMITTED`, none `FAILED` or `DEFERRED`, and the throttles seen (or the style was not
/// exercised) and counted by abide as throttles.
fn check(style: &str, n: usize, s: &Seen, out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(0), "{style}: {}", show(out));
    let r = report(out);
    let counts = &r["outbox"]["counts"];
    assert_eq!(s.accepted, n as u64, "{style}: {r}");
    assert_eq!(s.duplicates, 0, "{style}: {r}");
    assert_eq!(counts["submitted"], n as u64, "{style}: {r}");
    assert_eq!(counts["failed"], 0, "{style}: {r}");
    assert_eq!(counts["deferred"], 0, "{style}: {r}");
    assert!(s.throttled > 0, "{style}: no throttle at all {r}");
    assert_eq!(r["run"]["throttled"], s.throttled, "{style}: {r}");
    eprintln!("{style}: {} throttles for {n} items", s.throttled);
    // The whole run, learning included (a converged pace sees far fewer).
    assert!(s.throttled as f64 / n as f64 <= 0.1, "{style}: {r}");
}

/// `abide provider --throttle-style graphql-200` as a process: the throttles are 200s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_against_a_graphql_200_provider_delivers_every_item_once() {
    const N: usize = 150;
    let provider = provider_process(&[
        "--key-rate",
        "1000/s",
        "--key-burst",
        "100",
        "--key-concurrency",
        "2",
        "--latency",
        "20ms",
        "--account-rate",
        "off",
        "--throttle-style",
        "graphql-200",
    ]);
    let url = provider.url.clone();
    let f = Files::new(
        &provider_toml("sms", &url, "rate_hint = 400.0\nconcurrency = 8", ""),
        N,
    );
    let out = run(f.send()).await;
    let stats: serde_json::Value = reqwest::get(format!("{url}/_stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    drop(provider);
    let by_status = stats["rejected_by_status"].as_object().unwrap();
    let seen = Seen {
        accepted: stats["accepted"].as_u64().unwrap(),
        duplicates: stats["duplicates"].as_u64().unwrap(),
        throttled: by_status.values().map(|v| v.as_u64().unwrap()).sum(),
    };
    check("graphql-200", N, &seen, &out);
    let throttled_200 = by_status["200"].as_u64().unwrap();
    assert_eq!(throttled_200, seen.throttled, "{stats}");
    // Counted apart: the 200s that were throttles, the 202s that were acceptances.
    let remote = &report(&out)["outbox"]["remote_counts"];
    assert_eq!(remote["http_200"], throttled_200, "{remote}");
    assert_eq!(remote["http_202"], N as u64, "{remote}");
}

/// Each other vendor style, against the in-process provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_against_each_vendor_throttle_style_delivers_every_item_once() {
    const N: usize = 80;
    for style in [
        ThrottleStyle::Salesforce403,
        ThrottleStyle::Google403,
        ThrottleStyle::Slack200,
        ThrottleStyle::Meta400,
        ThrottleStyle::Aws400,
        ThrottleStyle::S3503,
        ThrottleStyle::Azure503,
        ThrottleStyle::Discord429,
    ] {
        let p = start_provider(throttling(style)).await;
        let f = Files::new(
            &provider_toml("sms", &p.url(), "rate_hint = 400.0\nconcurrency = 8", ""),
            N,
        );
        let out = run(f.send()).await;
        check(style.as_str(), N, &Seen::from(&p.stats()), &out);
        p.shutdown().await.unwrap();
    }
}

/// Over its limit (1/s, burst 1) the provider says the account is out of credit: each item
/// it refused that way is `DEFERRED` after its one request, never `FAILED`, never retried
/// on a timer; the others are accepted once. abide ignores the advertised limit here
/// (`use_rate_limit_headers = false`), so the second item goes within the second and is
/// refused; the host pause that follows (10 s) lets the gate refill for the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_against_an_out_of_quota_provider_defers_what_it_refused() {
    let mut pc = provider_config(1, 1);
    pc.latency_ms = 50;
    pc.behaviour.throttle = ThrottleStyle::Quota429;
    let p = start_provider(pc).await;
    let tables = "[provider.pacer]\nuse_rate_limit_headers = false";
    let f = Files::new(
        &provider_toml(
            "sms",
            &p.url(),
            "rate_hint = 400.0\nconcurrency = 8",
            tables,
        ),
        3,
    );
    let out = run(f.send()).await;
    let s = p.stats();
    let r = report(&out);
    let counts = &r["outbox"]["counts"];
    let refused = s.rejected_by_status.get(&429).copied().unwrap_or(0);
    assert_eq!(s.requests, 3, "one request per item: {s:?}\n{r}");
    assert!(refused >= 1, "{s:?}");
    assert_eq!(counts["deferred"], refused, "{r}");
    assert_eq!(counts["submitted"], s.accepted, "{r}");
    assert_eq!(counts["failed"], 0, "{r}");
    assert_eq!(s.duplicates, 0, "{s:?}");
}

/// A style that does not exist is refused, naming the flag and the choices.
#[test]
fn an_unknown_throttle_style_is_refused_with_the_choices() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_abide"))
        .args([
            "provider",
            "--listen",
            "127.0.0.1:0",
            "--throttle-style",
            "graphql-201",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--throttle-style \"graphql-201\""), "{err}");
    assert!(
        err.contains("graphql-200") && err.contains("s3-503"),
        "{err}"
    );
}
