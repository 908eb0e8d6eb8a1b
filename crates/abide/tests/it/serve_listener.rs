//! `abide serve`'s listener under hostile clients: idle connections beyond the cap are
//! closed and `/healthz` still answers; a loopback listener answers only its own `Host`
//! (DNS rebinding); `--metrics-auth` covers the dashboard's data and history.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const TOKEN: &str = "s3cret-listener-token";

/// `abide serve` on a free loopback port with `extra` flags; its child and base URL.
async fn serve(dir: &std::path::Path, extra: &[&str]) -> (tokio::process::Child, String) {
    let cfg = write(
        dir,
        "providers.toml",
        &provider_toml("sms", "http://127.0.0.1:9", "", ""),
    );
    let db = db_in(dir);
    let mut args = vec![
        "serve",
        "--config",
        cfg.to_str().unwrap(),
        "--db",
        &db,
        "--listen",
        "127.0.0.1:0",
        "--token-env",
        "ABIDE_TEST_API_TOKEN",
    ];
    args.extend_from_slice(extra);
    let mut cmd = abide(&args);
    cmd.env("ABIDE_TEST_API_TOKEN", TOKEN);
    let mut child = start(cmd);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = first.strip_prefix("listening on ").unwrap().to_owned();
    (child, base)
}

async fn stop(mut child: tokio::process::Child) {
    sigterm(&child);
    let status = tokio::time::timeout(RUN_BOUND, child.wait())
        .await
        .expect("serve did not stop on SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_beyond_the_cap_are_closed_and_healthz_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = serve(dir.path(), &["--max-connections", "8"]).await;
    let addr = base.strip_prefix("http://").unwrap().to_owned();
    // 40 connections that send half a request head and then nothing.
    let mut idle = Vec::new();
    for _ in 0..40 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: ")
            .await
            .unwrap();
        idle.push(s);
    }
    // Generous bound: a loaded machine, not a timing claim; without the cap the idle
    // connections are never closed, which is what is checked below.
    let r = tokio::time::timeout(
        Duration::from_secs(20),
        reqwest::Client::new().get(format!("{base}/healthz")).send(),
    )
    .await
    .expect("/healthz did not answer")
    .unwrap();
    assert_eq!(r.status(), 200);
    let mut closed = 0;
    for s in &mut idle {
        let mut buf = [0u8; 64];
        // Closed: EOF (or a reset); open: nothing to read within the wait.
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => closed += 1,
            _ => {}
        }
    }
    assert!(
        closed >= 40 - 8,
        "{closed} of 40 idle connections closed at a cap of 8"
    );
    stop(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_listener_answers_only_its_own_host() {
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = serve(dir.path(), &["--metrics-auth"]).await;
    let port = base.rsplit(':').next().unwrap().to_owned();
    let c = reqwest::Client::new();
    for (host, want) in [
        (format!("evil.example:{port}"), 421),
        ("evil.example".to_owned(), 421),
        (format!("127.0.0.2:{port}"), 421),
        (format!("127.0.0.1:{port}"), 200),
        (format!("localhost:{port}"), 200),
        (format!("LOCALHOST:{port}"), 200),
    ] {
        let r = c
            .get(format!("{base}/healthz"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), want, "Host: {host}");
        // A rebinding page cannot read the dashboard's data (nor its history) either.
        for path in ["state.json", "history.json"] {
            let r = c
                .get(format!("{base}/dashboard/{path}"))
                .header("host", &host)
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), want, "{path}, Host: {host}");
        }
    }
    // RFC 9112 §3.2: two Host lines, or none in HTTP/1.1, are a bad request; an
    // absolute-form target is the host (§3.2.2), whatever Host says.
    let addr = base.strip_prefix("http://").unwrap();
    for (head, want) in [
        (format!("Host: {addr}\r\nHost: evil.example"), 400),
        ("Accept: */*".to_owned(), 400),
        (format!("Host: {addr}"), 200),
    ] {
        let status = raw_status(addr, &format!("GET /healthz HTTP/1.1\r\n{head}")).await;
        assert_eq!(status, want, "{head}");
    }
    let absolute = format!("GET http://evil.example/healthz HTTP/1.1\r\nHost: {addr}");
    assert_eq!(raw_status(addr, &absolute).await, 421);
    let absolute = format!("GET http://{addr}/healthz HTTP/1.1\r\nHost: {addr}");
    assert_eq!(raw_status(addr, &absolute).await, 200);
    // Userinfo in the target, another scheme, a Host that is not host[:port]: 400.
    for head in [
        format!("GET http://user:pw@{addr}/healthz HTTP/1.1\r\nHost: {addr}"),
        format!("GET ftp://{addr}/healthz HTTP/1.1\r\nHost: {addr}"),
        "GET /healthz HTTP/1.1\r\nHost: a, b".to_owned(),
    ] {
        assert_eq!(raw_status(addr, &head).await, 400, "{head}");
    }
    // --metrics-auth: the dashboard's data and history need the token too.
    for path in ["state.json", "history.json"] {
        let r = c
            .get(format!("{base}/dashboard/{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }
    stop(child).await;
}

/// The status code of the answer to `head` (a request line and header lines, without the
/// final blank line) sent on a fresh connection to `addr`.
async fn raw_status(addr: &str, head: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    // Bounded by RUN_BOUND (an event: the server closes after `Connection: close`), so a
    // server that kept the connection open fails the test instead of hanging it.
    tokio::time::timeout(RUN_BOUND, s.read_to_end(&mut answer))
        .await
        .expect("the connection was not closed")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
}
