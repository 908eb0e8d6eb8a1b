//! `--log-format json`: log lines on stderr are JSON objects a log shipper can read.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// The first stderr line of `abide provider` with an SMPP listener (which logs at info
/// that it listens) and `format`, killed after.
async fn first_log_line(format: &str) -> String {
    let mut cmd = abide(&[
        "provider",
        "--listen",
        "off",
        "--smpp",
        "127.0.0.1:0",
        "--log-format",
        format,
    ]);
    cmd.env("RUST_LOG", "info");
    let mut child = start(cmd);
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .expect("no log line in time")
        .unwrap()
        .expect("stderr closed without a log line");
    child.kill().await.unwrap();
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_log_line_has_a_level_and_fields() {
    let line = first_log_line("json").await;
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: not JSON: {line}"));
    assert_eq!(v["level"], "INFO", "{line}");
    assert!(v["fields"]["message"].is_string(), "{line}");
    assert!(v["timestamp"].is_string(), "{line}");
    // The default stays text.
    let text = first_log_line("text").await;
    assert!(
        serde_json::from_str::<serde_json::Value>(&text).is_err(),
        "{text}"
    );
    assert!(text.contains("INFO"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_log_format_is_refused() {
    let out = run(abide(&[
        "send",
        "--config",
        "p.toml",
        "--log-format",
        "xml",
    ]))
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--log-format") && err.contains("json"),
        "{err}"
    );
}
