//! Scale out with services (short): three `abide serve` processes on
//! one PostgreSQL outbox and one Redis take messages through their HTTP APIs and deliver
//! them to one provider limited per key; one node is killed with `kill -9` mid-run.
//! Accepted exactly N, duplicates only as repeats of one idempotency key, 429s per message
//! ≤ 0.01, the busiest second and delivered ÷ (time × limit) above their floors, and
//! `/v1/stats` of a survivor shows the nodes sharing through Redis.
//!
//! Needs PostgreSQL and Redis on loopback: skipped (printing `SKIPPED:`) when either is
//! absent, a failure under `ABIDE_REQUIRE_SERVICES=1`. 1,500 messages at 150/s.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use abide_core::{Clock, SystemClock};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Child;

use crate::support::services::{assert_one_shared_limit, redis_here, Db, REDIS};
use crate::support::*;

const TOKEN_VAR: &str = "ABIDE_TEST_API_TOKEN";
const TOKEN: &str = "scale-out-serve-token-0123456789";

/// One `abide serve` node: its process, API base URL and everything it wrote to stderr.
struct Node {
    child: Child,
    base: String,
    stderr: Arc<Mutex<String>>,
}

async fn serve(cfg: &str, db: &str, prefix: &str) -> Node {
    let mut c = abide(&[
        "serve",
        "--config",
        cfg,
        "--db",
        db,
        "--listen",
        "127.0.0.1:0",
        "--token-env",
        TOKEN_VAR,
        "--lease",
        "4s",
        "--redis-prefix",
        prefix,
    ]);
    c.env(TOKEN_VAR, TOKEN).env("ABIDE_REDIS_URL", REDIS);
    let mut child = start(c);
    // Drain stderr so a chatty node never blocks on a full pipe.
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err = child.stderr.take().unwrap();
    let sink = Arc::clone(&stderr);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .expect("serve did not start in time")
        .unwrap()
        .unwrap_or_else(|| panic!("serve exited: {}", stderr.lock().unwrap()));
    let base = first.strip_prefix("listening on ").unwrap().to_owned();
    Node {
        child,
        base,
        stderr,
    }
}

async fn stats(c: &reqwest::Client, n: &Node) -> Value {
    c.get(format!("{}/v1/stats", n.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_serve_nodes_share_one_limit_take_items_by_http_and_survive_a_kill_9() {
    let _alone = crate::ONE_AT_A_TIME.lock().await;
    const TEST: &str = "three_serve_nodes_share_one_limit_take_items_by_http_and_survive_a_kill_9";
    const N: usize = 1500;
    const LIMIT: u32 = 150;
    if !redis_here(TEST) {
        return;
    }
    let Some(db) = Db::create(TEST, "serve").await else {
        return;
    };
    let mut pc = provider_config(LIMIT, LIMIT / 5);
    pc.latency_ms = 5;
    let p = start_provider(pc).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "providers.toml",
        &provider_toml(
            "sms",
            &p.url(),
            &format!(
                "rate_hint = {}.0\nconcurrency = 16\ntimeout_secs = 1.0",
                LIMIT - 10
            ),
            "",
        ),
    );
    let cfg = cfg.to_str().unwrap().to_owned();
    let prefix = format!("abide-test:scale-serve:{}", db.name);
    let url = db.url();
    // One node first: it creates the schema the others find.
    let a = serve(&cfg, &url, &prefix).await;
    let (b, mut c) = (
        serve(&cfg, &url, &prefix).await,
        serve(&cfg, &url, &prefix).await,
    );
    let http = reqwest::Client::new();
    // Each node takes a third of the items, in batches; every item has its own key.
    let nodes = [&a, &b, &c];
    for (batch, chunk) in (0..N).collect::<Vec<_>>().chunks(250).enumerate() {
        let items: Vec<Value> = chunk
            .iter()
            .map(|i| {
                json!({"provider": "sms", "path": "/v1/messages",
                    "idempotency_key": format!("so-{i}"),
                    "body": {"to": format!("+1555{i:07}"), "text": "hello"}})
            })
            .collect();
        let node = nodes[batch % nodes.len()];
        let r = http
            .post(format!("{}/v1/items", node.base))
            .bearer_auth(TOKEN)
            .json(&items)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{:?}", r.text().await);
    }
    wait_until("the first delivery", || p.stats().accepted > 0).await;
    let clock = SystemClock;
    let first_accept = clock.monotonic();
    wait_until("a third delivered", || p.stats().accepted >= (N / 3) as u64).await;
    c.child.start_kill().unwrap(); // SIGKILL: its leases are left behind
    assert!(!c.child.wait().await.unwrap().success());
    wait_until("every message accepted", || p.stats().accepted >= N as u64).await;
    let elapsed = clock.monotonic() - first_accept;
    // Drained: nothing waits in the database (the killed node's leases were reclaimed).
    let mut drained = Value::Null;
    for _ in 0..(RUN_BOUND.as_millis() / 100) {
        drained = stats(&http, &a).await;
        if drained["counts"]["submitted"] == N as u64 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(drained["counts"]["submitted"], N as u64, "{drained}");
    // A survivor's view: sharing through Redis, the other survivor seen by its heartbeat.
    let sb = stats(&http, &b).await;
    let co = &sb["providers"][0]["coordination"];
    assert_eq!(co["mode"], "redis", "{sb}");
    assert_eq!(co["nodes_assumed"], false, "{sb}");
    let peers: Vec<&str> = co["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node"].as_str().unwrap())
        .collect();
    let na = stats(&http, &a).await["providers"][0]["coordination"]["node"].clone();
    assert!(peers.contains(&na.as_str().unwrap()), "{sb}");
    assert!(peers.contains(&co["node"].as_str().unwrap()), "{sb}");
    let mut logs = String::new();
    for mut n in [a, b] {
        sigterm(&n.child);
        let status = tokio::time::timeout(RUN_BOUND, n.child.wait())
            .await
            .expect("a node did not stop in time")
            .unwrap();
        logs.push_str(&n.stderr.lock().unwrap());
        assert_eq!(status.code(), Some(0), "{logs}");
    }
    logs.push_str(&c.stderr.lock().unwrap());
    let st = run({
        let mut c = abide(&["status", "--db", &url, "--json", "--redis-prefix", &prefix]);
        c.env("ABIDE_REDIS_URL", REDIS);
        c
    })
    .await;
    db.drop_now().await;
    let st: Value = serde_json::from_slice(&st.stdout).unwrap();
    // The shared view from outside the nodes: one key, the provider's name and a digest
    // of its credential (never the credential), the rate the nodes learned.
    let keys = st["coordination"]["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "{st}");
    let key = keys[0]["key"].as_str().unwrap();
    assert!(key.starts_with(&format!("{prefix}:coord:sms:")), "{key}");
    assert!(!key.contains(abide_fake::DEMO_KEY), "{key}");
    assert!(keys[0]["shared_rate_per_sec"].as_f64().is_some(), "{st}");
    let s = p.stats();

    // Nothing lost, nothing accepted twice, one limit shared and used.
    let (goodput, throttled) = assert_one_shared_limit(&st, &s, N, LIMIT, elapsed, &logs);
    println!(
        "scale_out_serve: {N} in {elapsed:?} at {LIMIT}/s: {goodput:.3} of the limit, {throttled} 429s, {} duplicates",
        s.duplicates
    );
}

#[tokio::test]
async fn a_refused_redis_password_stops_send_and_serve_at_start_with_exit_2() {
    const TEST: &str = "a_refused_redis_password_stops_send_and_serve_at_start_with_exit_2";
    if !redis_here(TEST) {
        return;
    }
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:1", "", ""), 1);
    // Redis 7 without requirepass refuses AUTH with a password.
    let out = run({
        let mut c = f.send_with(&["--redis", "redis://:hunter2@127.0.0.1:6379"]);
        c.env_remove("ABIDE_REDIS_URL");
        c
    })
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(err.contains("--redis"), "{err}");
    assert!(err.contains("redis://:***@127.0.0.1:6379"), "{err}");
    assert!(err.contains("password"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    assert!(!f.db_exists(), "nothing opened before the check");
    // The same URL from the providers file, for serve: named by file and key.
    let cfg = write(
        f.dir.path(),
        "redis.toml",
        &format!(
            "{}\n[coordination]\nredis_url = \"redis://127.0.0.1:6379/999\"\n",
            provider_toml("sms", "http://127.0.0.1:1", "", "")
        ),
    );
    let mut c = abide(&[
        "serve",
        "--config",
        cfg.to_str().unwrap(),
        "--db",
        &f.db,
        "--listen",
        "127.0.0.1:0",
        "--token-env",
        TOKEN_VAR,
    ]);
    c.env(TOKEN_VAR, TOKEN).env_remove("ABIDE_REDIS_URL");
    let out = run(c).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(err.contains("[coordination] redis_url in"), "{err}");
    assert!(err.contains("database number"), "{err}");
}
