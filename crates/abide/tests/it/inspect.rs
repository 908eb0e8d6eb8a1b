//! `abide inspect` end to end: the built binary, a fixed `--now`, JSON on stdout.

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const NOW: &str = "2026-06-15T08:00:00Z";

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_abide"))
        .arg("inspect")
        .args(args)
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
        // inspect stops reading after the header block (or its size limit): a broken pipe
        // on a long input is expected.
        let _ = child.stdin.take().unwrap().write_all(input);
    }
    child.wait_with_output().unwrap()
}

fn inspect(args: &[&str]) -> Value {
    inspect_stdin(args, None)
}

fn inspect_stdin(args: &[&str], stdin: Option<&[u8]>) -> Value {
    let mut all = vec!["--now", NOW];
    all.extend_from_slice(args);
    let out = run(&all, stdin);
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fails(args: &[&str], stdin: Option<&[u8]>, needle: &str) {
    let out = run(args, stdin);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn http_date_retry_after_is_converted_against_now() {
    let v = inspect(&[
        "--status",
        "429",
        "--header",
        "Retry-After: Mon, 15 Jun 2026 08:02:31 GMT",
    ]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["reason"], "http_429");
    assert_eq!(v["delay_secs"], 151.0);
    assert_eq!(v["delay_reason"], "honoured");
    assert_eq!(v["retry_after_raw"], "Mon, 15 Jun 2026 08:02:31 GMT");
    assert_eq!(v["retry_after_secs"], 151.0);
    assert_eq!(v["now"], NOW);
    assert_eq!(v["status"], 429);
}

#[test]
fn zero_is_floored() {
    let v = inspect(&["--status", "429", "-H", "Retry-After: 0"]);
    assert_eq!(v["delay_secs"], 1.0);
    assert_eq!(v["delay_reason"], "floored");
    assert_eq!(v["retry_after_secs"], 0.0);
}

#[test]
fn a_day_is_capped() {
    let v = inspect(&["--status", "503", "-H", "Retry-After: 86400"]);
    assert_eq!(v["verdict"], "throttle");
    // The cap less up to a tenth of it: nodes refused together do not resume together.
    let d = v["delay_secs"].as_f64().unwrap();
    assert!((540.0..=600.0).contains(&d), "{d}");
    assert_eq!(v["delay_reason"], "capped");
    assert_eq!(v["retry_after_secs"], 86400.0);
}

#[test]
fn garbage_is_a_long_wait_with_the_raw_value() {
    let v = inspect(&["--status", "429", "-H", "Retry-After: soon-ish"]);
    assert_eq!(v["delay_reason"], "unparseable");
    let d = v["delay_secs"].as_f64().unwrap();
    assert!((300.0..=360.0).contains(&d), "{d}");
    assert_eq!(v["retry_after_raw"], "soon-ish");
    assert_eq!(v["retry_after_secs"], Value::Null);
    // Same seed, same output; another seed moves the jitter.
    let again = inspect(&["--status", "429", "-H", "Retry-After: soon-ish"]);
    assert_eq!(again["delay_secs"], v["delay_secs"]);
    let other = inspect(&[
        "--status",
        "429",
        "-H",
        "Retry-After: soon-ish",
        "--seed",
        "9",
    ]);
    assert_ne!(other["delay_secs"], v["delay_secs"]);
}

#[test]
fn two_retry_after_lines_take_the_largest() {
    let v = inspect(&[
        "--status",
        "429",
        "-H",
        "Retry-After: 30",
        "--header",
        "Retry-After: 120",
    ]);
    assert_eq!(v["delay_secs"], 120.0);
    assert_eq!(v["retry_after_raw"], "30, 120");
    assert_eq!(v["retry_after_secs"], 120.0);
}

#[test]
fn forbidden_with_retry_after_zero_is_a_throttle_not_terminal() {
    let v = inspect(&["--status", "403", "-H", "Retry-After: 0"]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["delay_secs"], 1.0);
    assert_eq!(v["delay_reason"], "floored");
}

#[test]
fn absent_retry_after_uses_the_backoff_and_success_has_no_delay() {
    let v = inspect(&["--status", "502"]);
    assert_eq!(v["verdict"], "retry");
    assert_eq!(v["delay_reason"], "absent");
    assert_eq!(v["delay_secs"], 1.0);
    assert_eq!(v["retry_after_raw"], Value::Null);
    let v = inspect(&["--status", "200"]);
    assert_eq!(v["verdict"], "success");
    assert_eq!(v["delay_secs"], Value::Null);
    assert_eq!(v["delay_reason"], Value::Null);
    let v = inspect(&["--status", "404", "-H", "Retry-After: 5"]);
    assert_eq!(
        v["verdict"], "throttle",
        "a 4xx with Retry-After is a throttle"
    );
}

#[test]
fn stdin_block_with_status_line_rate_limits_and_warnings() {
    let block = b"HTTP/1.1 429 Too Many Requests\r\n\
Retry-After: 42\r\n\
RateLimit-Policy: \"default\";q=100;w=60\r\n\
RateLimit: \"default\";r=0;t=42\r\n\
Sunset: Thu, 31 Dec 2026 23:59:59 GMT\r\n\
Authorization: Bearer secret-token\r\n\
\r\n\
{\"error\":\"rate_limited\"}\n";
    let v = inspect_stdin(&["--stdin"], Some(block));
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["status"], 429);
    assert_eq!(v["delay_secs"], 42.0);
    let rl = &v["rate_limit"];
    assert_eq!(rl["source"], "ietf");
    assert_eq!(rl["limit"], 100);
    assert_eq!(rl["remaining"], 0);
    assert_eq!(rl["exhausted"], true);
    assert_eq!(rl["reset_secs"], 42.0);
    assert_eq!(rl["window_secs"], 60.0);
    assert_eq!(v["warnings"][0]["kind"], "sunset");
    assert_eq!(v["warnings"][0]["at"], "2026-12-31T23:59:59Z");
    assert!(!v.to_string().contains("secret-token"));
    // `-` means stdin too, and --status overrides the status line.
    let v = inspect_stdin(&["--status", "200", "-"], Some(block));
    assert_eq!(v["verdict"], "success");
}

#[test]
fn stdin_invalid_utf8_retry_after_is_unparseable_and_escaped() {
    let v = inspect_stdin(&["-"], Some(b"HTTP/2 429\nRetry-After: 12\xff\n"));
    assert_eq!(v["delay_reason"], "unparseable");
    assert_eq!(v["retry_after_raw"], "12\u{fffd}");
}

#[test]
fn smpp_throttle() {
    let v = inspect(&["--smpp", "0x58"]);
    assert_eq!(v["verdict"], "throttle");
    assert_eq!(v["smpp_command_status"], 88);
    assert_eq!(v["status"], Value::Null);
    assert_eq!(v["delay_reason"], "absent");
}

#[test]
fn bad_input_exits_2_naming_the_culprit() {
    fails(&["--now", NOW], None, "--status");
    fails(&["--status", "429", "--now", "yesterday"], None, "--now");
    fails(&["--status", "42", "--now", NOW], None, "--status 42");
    fails(&["--smpp", "xyz", "--now", NOW], None, "--smpp");
    fails(
        &["--status", "429", "-H", "Retry-After 5", "--now", NOW],
        None,
        "--header #1",
    );
    fails(
        &["-", "--now", NOW],
        Some(b"HTTP/1.1 429 Too Many\nRetry-After: 5\nnot a header\n"),
        "stdin line 3",
    );
    // A malformed secret header is named but its value is not echoed.
    let out = run(
        &["--status", "429", "-H", "Authorization Bearer hunter2"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("<redacted>") && !err.contains("hunter2"),
        "{err}"
    );
}

#[test]
fn huge_header_block_is_refused_not_a_panic() {
    // 40 000 distinct headers used to overflow `HeaderMap` and panic.
    let mut block = b"HTTP/1.1 429 Too Many Requests\r\n".to_vec();
    for i in 0..40_000 {
        block.extend_from_slice(format!("X-Pad-{i}: a\r\n").as_bytes());
    }
    block.extend_from_slice(b"Retry-After: 7\r\n\r\n");
    fails(
        &["-", "--now", NOW],
        Some(&block),
        "more than 10000 header lines",
    );

    // A block that never ends within the size limit is refused by size.
    let mut endless = b"HTTP/1.1 429 Too Many Requests\r\nX-Big: ".to_vec();
    endless.resize(3 << 20, b'a');
    fails(
        &["-", "--now", NOW],
        Some(&endless),
        "larger than 1048576 bytes",
    );
}

#[test]
fn a_large_body_after_the_header_block_is_ignored() {
    let mut block = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\n\r\n".to_vec();
    block.resize(3 << 20, b'x');
    let v = inspect_stdin(&["-"], Some(&block));
    assert_eq!(v["delay_secs"], 7.0);
}

#[test]
fn bare_cr_line_endings_do_not_hide_retry_after_in_the_status_line() {
    // Split on LF only, this whole input was one status line and Retry-After vanished.
    fails(
        &["-", "--now", NOW],
        Some(b"HTTP/1.1 429 Too Many Requests\rRetry-After: 30\r\r"),
        "control character in the status line",
    );
}

#[test]
fn an_exhausted_rate_limit_reset_shows_as_a_pause() {
    // No Retry-After: the item's own delay is the backoff, but the host pauses until the
    // advertised reset, and that is what the next attempt really waits.
    let v = inspect(&[
        "--status",
        "429",
        "-H",
        "RateLimit-Policy: \"default\";q=100;w=60",
        "-H",
        "RateLimit: \"default\";r=0;t=30",
    ]);
    assert_eq!(v["delay_secs"], 1.0);
    assert_eq!(v["delay_reason"], "absent");
    assert_eq!(v["pause_secs"], 30.0);
    // A throttle's Retry-After pauses the host for its (capped) delay.
    let v = inspect(&["--status", "429", "-H", "Retry-After: 86400"]);
    let p = v["pause_secs"].as_f64().unwrap();
    assert!((540.0..=600.0).contains(&p), "{p}");
    // Nothing to pause for.
    assert_eq!(inspect(&["--status", "502"])["pause_secs"], Value::Null);
    assert_eq!(inspect(&["--status", "200"])["pause_secs"], Value::Null);
}

#[test]
fn a_saturated_retry_after_says_so_and_a_bad_now_says_it_once() {
    let v = inspect(&[
        "--status",
        "429",
        "-H",
        "Retry-After: 99999999999999999999999",
    ]);
    assert_eq!(v["retry_after_saturated"], true, "{v}");
    assert_eq!(v["retry_after_raw"], "99999999999999999999999", "{v}");
    let v = inspect(&["--status", "429", "-H", "Retry-After: 120"]);
    assert_eq!(v["retry_after_saturated"], false, "{v}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(["inspect", "--status", "429", "--now", "yesterday"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("could not be parsed").count(), 1, "{err}");
}

#[test]
fn a_redirect_is_the_answer_not_a_reason_to_resend() {
    // Redirects are not followed; resending the same request would get the same answer (a
    // 304 to a conditional GET is the answer itself), so none is retried.
    for status in ["301", "304", "307", "308"] {
        let v = inspect(&["--status", status]);
        assert_eq!(v["verdict"], "terminal", "{status}: {v}");
        assert_eq!(v["reason"], format!("http_{status}"), "{v}");
    }
}
