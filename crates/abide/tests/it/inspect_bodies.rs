//! `abide inspect` on throttles told by the body, and with a providers file's rules
//! (`--config FILE --provider NAME`). The built binary, a fixed `--now`, JSON on stdout.

#![allow(clippy::unwrap_used, missing_docs)]

use std::process::{Command, Output};

use serde_json::Value;

const NOW: &str = "2026-06-15T08:00:00Z";

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(["inspect", "--now", NOW])
        .args(args)
        .output()
        .unwrap()
}

fn inspect(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The three answers of the issue: each a throttle, Shopify's waiting ≈ 1.2 s.
#[test]
fn shopify_salesforce_and_google_examples_read_as_throttles() {
    let shopify = r#"{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":101,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":40,"restoreRate":50.0}}}}"#;
    let v = inspect(&["--status", "200", "--body", shopify]);
    assert_eq!(v["verdict"], "throttle", "{v}");
    assert_eq!(v["reason"], "http_200_graphql_throttled");
    let delay = v["delay_secs"].as_f64().unwrap();
    assert!((delay - 1.22).abs() < 0.001, "{v}");
    assert_eq!(v["delay_reason"], "honoured");

    let salesforce =
        r#"[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#;
    let v = inspect(&["--status", "403", "--body", salesforce]);
    assert_eq!(v["verdict"], "throttle", "{v}");
    assert_eq!(v["reason"], "http_403_salesforce_request_limit_exceeded");
    assert!(v["delay_secs"].as_f64().unwrap() >= 1.0, "{v}");

    let google = r#"{"error":{"code":403,"errors":[{"domain":"usageLimits","reason":"rateLimitExceeded"}]}}"#;
    let v = inspect(&["--status", "403", "--body", google]);
    assert_eq!(v["verdict"], "throttle", "{v}");
    assert_eq!(v["reason"], "http_403_google_rate_limit_exceeded");
}

#[test]
fn out_of_quota_has_no_delay_and_a_storage_quota_stays_terminal() {
    let openai = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    let v = inspect(&["--status", "429", "--body", openai]);
    assert_eq!(v["verdict"], "out_of_quota", "{v}");
    assert_eq!(v["delay_secs"], Value::Null, "{v}");
    let storage = r#"{"error":{"errors":[{"domain":"global","reason":"storageQuotaExceeded","message":"The user's Drive storage quota has been exceeded."}],"code":403}}"#;
    let v = inspect(&["--status", "403", "--body", storage]);
    assert_eq!(
        (v["verdict"].as_str(), v["reason"].as_str()),
        (Some("terminal"), Some("http_403"))
    );
}

const PROVIDERS: &str = r#"
[[provider]]
name = "gql"
base_url = "http://127.0.0.1:9"

[[provider.classify.body]]
name = "busy"
json = "/errors/0/extensions/code"
equals = "BUSY"
verdict = "throttle"
delay_json = "/retry_after"

[[provider.classify.header]]
header = "x-error-kind"
equals = "quota-spent"
verdict = "out_of_quota"

[[provider]]
name = "other"
base_url = "http://127.0.0.1:9"
"#;

#[test]
fn a_providers_file_rules_apply_to_the_named_provider() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("providers.toml");
    std::fs::write(&cfg, PROVIDERS).unwrap();
    let cfg = cfg.to_str().unwrap();
    let body = r#"{"errors":[{"extensions":{"code":"BUSY"}}],"retry_after":"6m0s"}"#;
    let v = inspect(&[
        "--status",
        "200",
        "--body",
        body,
        "--config",
        cfg,
        "--provider",
        "gql",
    ]);
    assert_eq!(
        (v["verdict"].as_str(), v["reason"].as_str()),
        (Some("throttle"), Some("http_200_rule_busy"))
    );
    assert_eq!(v["delay_secs"], 360.0, "{v}");
    let v = inspect(&[
        "--status",
        "403",
        "-H",
        "x-error-kind: quota-spent",
        "--config",
        cfg,
        "--provider",
        "gql",
    ]);
    assert_eq!(v["verdict"], "out_of_quota", "{v}");
    // Another provider of the file, or no file: the rule is not theirs.
    let v = inspect(&[
        "--status",
        "200",
        "--body",
        body,
        "--config",
        cfg,
        "--provider",
        "other",
    ]);
    assert_eq!(v["verdict"], "success", "{v}");
    let v = inspect(&["--status", "200", "--body", body]);
    assert_eq!(v["verdict"], "success", "{v}");
    // A provider the file does not have is named, with those it has.
    let out = run(&["--status", "200", "--config", cfg, "--provider", "nope"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("\"nope\"") && err.contains("gql, other"),
        "{err}"
    );
    // A bad rule is refused at load, naming the provider and the rule.
    std::fs::write(
        dir.path().join("bad.toml"),
        PROVIDERS.replace("\"/retry_after\"", "\"retry_after\""),
    )
    .unwrap();
    let bad = dir.path().join("bad.toml");
    let out = run(&[
        "--status",
        "200",
        "--config",
        bad.to_str().unwrap(),
        "--provider",
        "gql",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("gql") && err.contains("classify.body.busy.delay_json"),
        "{err}"
    );
}
