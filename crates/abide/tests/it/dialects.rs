//! Rate-limit dialects through `abide inspect`: each row of issue 10's table, then one
//! documented vector per dialect family. The built binary, a fixed `--now`, JSON on stdout.

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

/// 1767225600 in Unix epoch seconds.
const NOW: &str = "2026-01-01T00:00:00Z";

fn inspect_with(args: &[&str], stdin: Option<&[u8]>) -> Value {
    let mut all = vec!["inspect", "--now", NOW];
    all.extend_from_slice(args);
    let mut child = Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(&all)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn inspect(args: &[&str]) -> Value {
    inspect_with(args, None)
}

// --- The issue's table, row by row ---------------------------------------------------

#[test]
fn row1_hyphenated_x_rate_limit_with_an_epoch_reset_pauses_until_it() {
    let v = inspect(&[
        "--status",
        "429",
        "-H",
        "x-rate-limit-limit: 900",
        "-H",
        "x-rate-limit-remaining: 0",
        "-H",
        "x-rate-limit-reset: 1767225630",
    ]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["dialect"], "x-ratelimit");
    let rl = &v["rate_limit"];
    assert_eq!(rl["exhausted"], true);
    assert_eq!(rl["limit"], 900);
    assert_eq!(rl["reset_secs"], 30.0);
    assert_eq!(v["pause_secs"], 30.0);
}

#[test]
fn row2_retry_after_ms_alone_is_the_delay() {
    let v = inspect(&["--status", "429", "-H", "retry-after-ms: 1500"]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["delay_secs"], 1.5);
    assert_eq!(v["delay_reason"], "honoured");
    assert_eq!(v["retry_after_raw"], "1500");
    assert_eq!(v["pause_secs"], 1.5);
    assert_eq!(v["dialect"], "azure");
    // Microsoft's other spelling, and the floor still applies to a tiny value.
    let v = inspect(&["--status", "429", "-H", "x-ms-retry-after-ms: 20"]);
    assert_eq!(
        (v["delay_secs"].as_f64(), v["delay_reason"].as_str()),
        (Some(1.0), Some("floored"))
    );
}

#[test]
fn row3_older_draft_with_a_policy_keeps_remaining_and_reset() {
    let v = inspect(&[
        "--status",
        "200",
        "-H",
        "RateLimit-Policy: 5;w=60",
        "-H",
        "RateLimit-Limit: 5",
        "-H",
        "RateLimit-Remaining: 4",
        "-H",
        "RateLimit-Reset: 60",
    ]);
    let rl = &v["rate_limit"];
    assert_eq!(rl["source"], "legacy_draft");
    assert_eq!(rl["limit"], 5);
    assert_eq!(rl["remaining"], 4);
    assert_eq!(rl["reset_secs"], 60.0);
    assert_eq!(rl["window_secs"], 60.0);
    assert_eq!(v["dialect"], "ietf");
}

#[test]
fn row4_shopify_call_limit_is_a_full_leaky_bucket() {
    let v = inspect(&[
        "--status",
        "429",
        "-H",
        "X-Shopify-Shop-Api-Call-Limit: 40/40",
    ]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(
        (v["dialect"].as_str(), v["dialect_detected"].as_bool()),
        (Some("shopify"), Some(true))
    );
    let rl = &v["rate_limit"];
    assert_eq!(
        (rl["used"].as_u64(), rl["limit"].as_u64()),
        (Some(40), Some(40))
    );
    assert_eq!(rl["remaining"], 0);
    assert_eq!(rl["leaky_bucket"], true);
    // 40 leak in 20 s: 2/s advertised, one slot frees in 0.5 s.
    assert_eq!(rl["advertised_rate_per_sec"], 2.0);
    assert_eq!(rl["reset_secs"], 0.5);
}

#[test]
fn row5_exhausted_without_reset_pauses_for_the_retry_after() {
    let v = inspect(&[
        "--status",
        "200",
        "-H",
        "x-ratelimit-remaining: 0",
        "-H",
        "retry-after: 30",
    ]);
    assert_eq!(v["verdict"], "success");
    assert_eq!(v["rate_limit"]["reset_secs"], 30.0);
    assert_eq!(v["pause_secs"], 30.0);
}

const SECONDARY_BODY: &str = r#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}"#;

#[test]
fn row6_github_secondary_limit_is_a_throttle_of_at_least_a_minute() {
    let row = [
        "--status",
        "403",
        "-H",
        "x-ratelimit-remaining: 14",
        "--body",
        SECONDARY_BODY,
    ];
    // The names alone cannot tell GitHub: name the dialect.
    let v = inspect(&[&["--dialect", "github"][..], &row[..]].concat());
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["reason"], "http_403_secondary_rate_limit");
    assert_eq!(v["delay_secs"], 60.0);
    assert_eq!(v["pause_secs"], 60.0);
    assert_eq!(
        (v["dialect"].as_str(), v["dialect_detected"].as_bool()),
        (Some("github"), Some(false))
    );
    // Without it, a bare 403 stays terminal: 403 means different things per vendor.
    assert_eq!(inspect(&row)["verdict"], "terminal");
    // GitHub's own request id makes it unambiguous; the body may come after the header block.
    let block = format!(
        "HTTP/1.1 403 Forbidden\r\nx-github-request-id: 0400:1A2B:3C4D\r\nx-ratelimit-remaining: 14\r\n\r\n{SECONDARY_BODY}"
    );
    let v = inspect_with(&["--stdin"], Some(block.as_bytes()));
    assert_eq!(v["reason"], "http_403_secondary_rate_limit");
    assert_eq!(v["dialect_detected"], true);
    // A Retry-After outranks the minute.
    let v = inspect(
        &[
            &["--dialect", "github", "-H", "retry-after: 120"][..],
            &row[..],
        ]
        .concat(),
    );
    assert_eq!(v["delay_secs"], 120.0);
}

// --- One documented vector per family -----------------------------------------------

#[test]
fn ietf_current_draft_example() {
    // draft-ietf-httpapi-ratelimit-headers §4 example shape: one policy, 50 left, 30 s.
    let v = inspect(&[
        "--status",
        "200",
        "-H",
        r#"RateLimit-Policy: "default";q=100;w=60"#,
        "-H",
        r#"RateLimit: "default";r=50;t=30"#,
    ]);
    let rl = &v["rate_limit"];
    assert_eq!(
        (rl["source"].as_str(), rl["policy"].as_str()),
        (Some("ietf"), Some("default"))
    );
    assert_eq!(
        (rl["limit"].as_u64(), rl["remaining"].as_u64()),
        (Some(100), Some(50))
    );
}

#[test]
fn github_primary_limit_reads_resource_used_and_epoch_reset() {
    // GitHub Docs, "Rate limits for the REST API": the example response headers.
    let v = inspect(&[
        "--status",
        "403",
        "-H",
        "x-ratelimit-limit: 5000",
        "-H",
        "x-ratelimit-remaining: 0",
        "-H",
        "x-ratelimit-used: 5000",
        "-H",
        "x-ratelimit-reset: 1767229200",
        "-H",
        "x-ratelimit-resource: core",
    ]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["reason"], "http_403_rate_limit_exhausted");
    let rl = &v["rate_limit"];
    assert_eq!(
        (rl["source"].as_str(), rl["policy"].as_str()),
        (Some("github"), Some("core"))
    );
    assert_eq!(rl["used"], 5000);
    assert_eq!(rl["reset_secs"], 3600.0);
    assert_eq!(rl["window_secs"], 3600.0);
    assert_eq!(v["pause_secs"], 600.0, "the pause is capped at 10 min");
}

#[test]
fn discord_global_limit() {
    // Discord Developer Documentation, "Rate Limits": a global 429.
    let v = inspect(&[
        "--status",
        "429",
        "-H",
        "x-ratelimit-global: true",
        "-H",
        "x-ratelimit-scope: global",
        "-H",
        "retry-after: 65",
    ]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["dialect"], "discord");
    assert_eq!(v["delay_secs"], 65.0);
    // A per-route bucket: Reset-After (fractional) is read, the bucket is the policy.
    let v = inspect(&[
        "--status",
        "200",
        "-H",
        "X-RateLimit-Limit: 5",
        "-H",
        "X-RateLimit-Remaining: 0",
        "-H",
        "X-RateLimit-Reset: 1767225601.250",
        "-H",
        "X-RateLimit-Reset-After: 1.25",
        "-H",
        "X-RateLimit-Bucket: abcd1234",
    ]);
    let rl = &v["rate_limit"];
    assert_eq!(
        (rl["source"].as_str(), rl["policy"].as_str()),
        (Some("discord"), Some("abcd1234"))
    );
    assert_eq!(rl["reset_secs"], 1.25);
    assert_eq!(v["pause_secs"], 1.25);
}

#[test]
fn azure_resource_manager_remaining() {
    let v = inspect(&[
        "--dialect",
        "azure",
        "--status",
        "200",
        "-H",
        "x-ms-ratelimit-remaining-subscription-reads: 11999",
        "-H",
        "x-ms-ratelimit-remaining-subscription-writes: 1199",
    ]);
    let rl = &v["rate_limit"];
    assert_eq!(rl["remaining"], 1199);
    assert_eq!(rl["policy"], "subscription-writes");
}

#[test]
fn x_ratelimit_used_and_epoch_millis() {
    let v = inspect(&[
        "--status",
        "200",
        "-H",
        "X-RateLimit-Limit: 60",
        "-H",
        "X-RateLimit-Used: 60",
        "-H",
        "X-RateLimit-Reset: 1767225612000",
    ]);
    let rl = &v["rate_limit"];
    assert_eq!(
        (rl["remaining"].as_u64(), rl["used"].as_u64()),
        (Some(0), Some(60))
    );
    assert_eq!(rl["reset_secs"], 12.0);
}

#[test]
fn a_malformed_dialect_header_is_ignored_with_a_warning() {
    let v = inspect(&[
        "--status",
        "429",
        "-H",
        "X-Shopify-Shop-Api-Call-Limit: 40/0",
        "-H",
        "retry-after: 2",
    ]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["rate_limit"], Value::Null);
    assert_eq!(v["delay_secs"], 2.0);
    let w = &v["rate_limit_warnings"][0];
    assert_eq!(
        (w["header"].as_str(), w["raw"].as_str()),
        (Some("x-shopify-shop-api-call-limit"), Some("40/0"))
    );
}

#[test]
fn an_unknown_dialect_is_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(["inspect", "--status", "429", "--dialect", "twitter"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--dialect") && err.contains("twitter"),
        "{err}"
    );
}
