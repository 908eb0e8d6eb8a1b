//! Inputs that must never be sent, stored whole or echoed (issue 11): paths that leave the
//! provider's base path (refused by `send` with exit 2 and by `serve` with 422, nothing on
//! the wire), passwords in URLs (never shown by any error), oversized fields (bounded
//! errors), and the start-up write failure named for what it is, each cause once.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Every spelling from the issue and more; each one alone is refused.
const ESCAPING_PATHS: &[&str] = &[
    "/%2e%2e/v1/messages",
    "/%2E%2E/v1/messages",
    "/%2E./v1/messages",
    "/.%2e/v1/messages",
    "/../v1/messages",
    "/v1/../../v1/messages",
    "/%252e%252e/v1/messages",
    "/..;/v1/messages",
    "/%2e%2e;x=1/v1/messages",
    "/\u{FF0E}\u{FF0E}/v1/messages",
    "/%EF%BC%8E%EF%BC%8E/v1/messages",
    "/\u{2025}/v1/messages",
    "/\u{FE30}/v1/messages",
    "/\u{2026}/v1/messages",
    "/\u{FE19}/v1/messages",
    "/%2525252e%2525252e/v1/messages",
    "/..%2fv1%2fmessages",
    "/a%2f..%2f..%2fv1/messages",
    "/..\\v1\\messages",
    "/%5c..%5cv1/messages",
    "/..\u{FF0F}v1/messages",
    "//127.0.0.1/v1/messages",
    "http://127.0.0.1/v1/messages",
    "v1/messages",
    "/v1//messages",
    "/v1/m#/../../x",
    "/.%09./v1/messages",
    "/..%00/v1/messages",
    "/%c0%ae%c0%ae/v1/messages",
    "/%zz/v1/messages",
    "/.../v1/messages",
];

fn line(path: &str) -> String {
    json!({"provider": "sms", "path": path, "body": {"to": "+1"}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_refuses_every_path_that_leaves_the_base_path() {
    let p = start_provider(provider_config(100, 10)).await;
    let base = format!("{}/api", p.url());
    let f = Files::new(&provider_toml("sms", &base, "", ""), 0);
    for path in ESCAPING_PATHS {
        std::fs::write(&f.input, line(path) + "\n").unwrap();
        let out = run(f.send_with(&[])).await;
        assert_eq!(out.status.code(), Some(2), "{path:?}: {}", show(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("line 1: "), "{path:?}: {err}");
        assert!(err.contains("refused by rule "), "{path:?}: {err}");
    }
    assert!(!f.db_exists(), "database created");
    assert_eq!(p.stats().requests, 0, "a refused path reached the provider");

    // A path below the base that merely looks like the refused ones is accepted and sent,
    // below /api, where the fake provider (serving /v1/messages) answers 404.
    std::fs::write(&f.input, line("/v1/%2e%2e-x") + "\n").unwrap();
    let out = run(f.send_with(&["--json", "--quiet"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_eq!(report(&out)["outbox"]["remote_counts"]["http_404"], 1);
    assert_eq!(p.stats().requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_every_path_that_leaves_the_base_path_with_422() {
    let p = start_provider(provider_config(100, 10)).await;
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{}/api", p.url());
    let cfg = write(dir.path(), "p.toml", &provider_toml("sms", &base, "", ""));
    let db = db_in(dir.path());
    let mut cmd = abide(&[
        "serve",
        "--config",
        cfg.to_str().unwrap(),
        "--db",
        &db,
        "--listen",
        "127.0.0.1:0",
        "--token-env",
        "ABIDE_TEST_API_TOKEN",
    ]);
    cmd.env(
        "ABIDE_TEST_API_TOKEN",
        "a-long-enough-test-token-0123456789",
    );
    let mut child = start(cmd);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let api = first.strip_prefix("listening on ").unwrap().to_owned();
    let c = reqwest::Client::new();
    for path in ESCAPING_PATHS {
        let r = c
            .post(format!("{api}/v1/items"))
            .bearer_auth("a-long-enough-test-token-0123456789")
            .json(&json!({"provider": "sms", "path": path, "body": {"to": "+1"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{path:?}");
        let v: Value = r.json().await.unwrap();
        let msg = v["errors"][0]["message"].as_str().unwrap_or_default();
        assert_eq!(v["errors"][0]["index"], 0, "{path:?}: {v}");
        assert!(msg.contains("refused by rule "), "{path:?}: {v}");
    }
    sigterm(&child);
    let _ = tokio::time::timeout(RUN_BOUND, child.wait()).await;
    assert_eq!(p.stats().requests, 0, "a refused path reached the provider");
}

/// A password that must never appear on stdout or stderr.
const PASSWORD: &str = "Pw9kq7ZsEcret";

async fn assert_never_shown(what: &str, cmd: tokio::process::Command) {
    let out = run(cmd).await;
    assert_ne!(out.status.code(), Some(0), "{what}: {}", show(&out));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Any 6-byte piece of the password counts as a leak.
    for i in 0..=PASSWORD.len() - 6 {
        let piece = &PASSWORD[i..i + 6];
        assert!(!all.contains(piece), "{what}: {piece:?} shown in\n{all}");
    }
    assert!(all.contains("error"), "{what}: no error in\n{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_error_path_shows_a_password_from_a_url() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = write(d, "in.jsonl", &(line("/v1/m") + "\n"));
    let good = write(
        d,
        "good.toml",
        &provider_toml("sms", "http://127.0.0.1:9/api", "", ""),
    );
    let pw = PASSWORD;
    let half = &PASSWORD[..7];
    let rest = &PASSWORD[7..];
    // base_url spellings: unparseable (port, host, '/' '#' '?' '@' in the password),
    // parseable but refused, and a TOML syntax error on the URL's line.
    let urls = [
        format!("http://user:{pw}@127.0.0.1:99999"),
        format!("http://user:{pw}@127.0.0.1:9/api"),
        format!("http://user:{half}/{rest}@127.0.0.1:9/api"),
        format!("http://user:{half}#{rest}@127.0.0.1:9/api"),
        format!("http://user:{half}?{rest}@127.0.0.1:9/api"),
        format!("http://user:{half}@{rest}@127.0.0.1:9/api"),
        format!("https://[::1:{pw}@h/api"),
        format!("http://127.0.0.1:99999/api?token={pw}"),
    ];
    for (i, url) in urls.iter().enumerate() {
        let cfg = write(
            d,
            &format!("bad{i}.toml"),
            &provider_toml("sms", url, "", ""),
        );
        let args = ["send", "--config", cfg.to_str().unwrap(), "--db", "x.db"];
        assert_never_shown(
            url,
            abide(&[&args[..], &[input.to_str().unwrap()]].concat()),
        )
        .await;
        let serve = ["serve", "--config", cfg.to_str().unwrap(), "--db", "x.db"];
        assert_never_shown(url, abide(&serve)).await;
    }
    let broken =
        format!("[[provider]]\nname = \"sms\"\nbase_url = \"http://user:{pw}@127.0.0.1:9\" oops\n");
    let cfg = write(d, "syntax.toml", &broken);
    assert_never_shown(
        "toml syntax",
        abide(&["send", "--config", cfg.to_str().unwrap()]),
    )
    .await;

    // Database URLs: unparseable, unreachable (port 1 on loopback refuses at once),
    // password in the query, in every command that opens a database.
    let dbs = [
        format!("postgres://abide:{pw}@127.0.0.1:99999/outbox"),
        format!("postgres://abide:{pw}@127.0.0.1:1/outbox"),
        format!("postgresql://abide:{half}/{rest}@127.0.0.1:1/outbox"),
        format!("postgres://abide@127.0.0.1:99999/outbox?password={pw}"),
        format!("postgres://abide:{half}#{rest}@[::1/outbox"),
    ];
    let good = good.to_str().unwrap();
    for db in &dbs {
        let commands: [Vec<&str>; 4] = [
            vec![
                "send",
                "--config",
                good,
                "--db",
                db,
                input.to_str().unwrap(),
            ],
            vec![
                "serve",
                "--config",
                good,
                "--db",
                db,
                "--listen",
                "127.0.0.1:0",
            ],
            vec!["status", "--db", db],
            vec!["requeue", "--db", db, "--failed"],
        ];
        for args in commands {
            let mut cmd = abide(&args);
            cmd.env("ABIDE_TOKEN", "a-long-enough-test-token-0123456789");
            assert_never_shown(&format!("{} {db}", args[0]), cmd).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_fields_get_bounded_errors_naming_the_field() {
    let big = "X".repeat(5_000_000);
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9/api", "", ""), 0);
    let cases = [
        (
            json!({"provider": "sms", "path": "/m", "method": big}),
            "method",
        ),
        (json!({"provider": big, "path": "/m"}), "provider"),
        (
            json!({"provider": "sms", "path": "/m", "headers": {big.clone(): "v"}}),
            "header name",
        ),
        (
            json!({"provider": "sms", "path": "/m", "headers": {"X-Big": big}}),
            "limit is 8192",
        ),
        (
            json!({"provider": "sms", "path": format!("/{big}")}),
            "too-long",
        ),
        (
            json!({"provider": "sms", "path": "/m", big.clone(): 1}),
            "unknown field",
        ),
        (
            json!({"provider": "sms", "path": "/m", "headers": big.clone()}),
            "invalid type",
        ),
    ];
    for (item, field) in cases {
        std::fs::write(&f.input, format!("{item}\n")).unwrap();
        let out = run(f.send_with(&[])).await;
        assert_eq!(out.status.code(), Some(2), "{field}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.len() < 4_000, "{field}: {} bytes on stderr", err.len());
        assert!(err.contains(field), "{field}: {err}");
    }
    assert!(!f.db_exists());

    // The same in the providers file (under its 1 MiB cap).
    let cfg = write(
        f.dir.path(),
        "big.toml",
        &provider_toml(&big[..500_000], "http://127.0.0.1:9", "", ""),
    );
    let out = run(abide(&["send", "--config", cfg.to_str().unwrap()])).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.len() < 4_000 && err.contains("name"),
        "{} bytes",
        err.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_database_at_start_names_the_operation_and_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    let store = abide_outbox::SqliteStore::open(&db).await.unwrap();
    store.close().await.unwrap();
    let cfg = write(
        dir.path(),
        "p.toml",
        &provider_toml("sms", "http://127.0.0.1:9/api", "", ""),
    );
    let ro = format!("sqlite:{db}?mode=ro");
    let out = run(abide(&[
        "send",
        "--config",
        cfg.to_str().unwrap(),
        "--db",
        &ro,
    ]))
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("dead run"), "{err}");
    assert!(err.contains("preparing the outbox database"), "{err}");
    assert_eq!(err.matches("readonly database").count(), 1, "{err}");
}
