//! Scale out: three `abide send` processes on one PostgreSQL outbox and one Redis
//! deliver to one `abide provider` limited per key, and share its limit; one is killed
//! with `kill -9` mid-run and nothing is lost.
//!
//! Needs PostgreSQL and Redis on loopback: skipped (printing `SKIPPED:`) when either is
//! absent, a failure under `ABIDE_REQUIRE_SERVICES=1`. Short by design (1,500 messages at
//! 150/s); benches/scale_out.sh runs 6,000 at 100/s and a Redis restart.

#![allow(clippy::unwrap_used)]

use abide_core::{Clock, SystemClock};

use crate::support::services::{assert_one_shared_limit, redis_here, Db, REDIS};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_one_limit_and_lose_nothing_to_a_kill_9() {
    let _alone = crate::ONE_AT_A_TIME.lock().await;
    const TEST: &str = "three_nodes_share_one_limit_and_lose_nothing_to_a_kill_9";
    const N: usize = 1500;
    const LIMIT: u32 = 150;
    if !redis_here(TEST) {
        return;
    }
    let Some(db) = Db::create(TEST, "send").await else {
        return;
    };
    // 5 ms per message keeps requests on the wire when the kill lands.
    // A burst of 200 ms of the limit: three processes on two cores wake late now and then.
    let mut pc = provider_config(LIMIT, LIMIT / 5);
    pc.latency_ms = 5;
    let p = start_provider(pc).await;
    // The cold start is another test's subject: the nodes start near the limit (and adopt
    // 0.97 x the advertised one at the first answer). Reclaimed items draw no budget; the
    // timeout fits the short lease, after which a killed node's items come back.
    let f = Files::new(
        &provider_toml(
            "sms",
            &p.url(),
            &format!(
                "rate_hint = {}.0\nconcurrency = 16\ntimeout_secs = 1.0",
                LIMIT - 10
            ),
            "",
        ),
        N,
    );
    let prefix = format!("abide-test:scale:{}", db.name);
    let url = db.url();
    let cfg = f.cfg.to_str().unwrap().to_owned();
    let input = f.input.to_str().unwrap().to_owned();
    let node = || {
        let mut c = abide(&[
            "send",
            "--config",
            &cfg,
            "--db",
            &url,
            "--json",
            "--quiet",
            "--lease",
            "4s",
            "--redis-prefix",
            &prefix,
            &input,
        ]);
        c.env("ABIDE_REDIS_URL", REDIS);
        c
    };
    // The first node enqueues everything; the others find the same lines already there.
    let a = start(node());
    wait_until("the first node to deliver", || p.stats().accepted > 0).await;
    let clock = SystemClock;
    let first_accept = clock.monotonic();
    let (b, mut c) = (start(node()), start(node()));
    wait_until("a third delivered", || p.stats().accepted >= (N / 3) as u64).await;
    c.start_kill().unwrap(); // SIGKILL: its leases are left behind
    assert!(!c.wait().await.unwrap().success());
    wait_until("every message accepted", || p.stats().accepted >= N as u64).await;
    let elapsed = clock.monotonic() - first_accept;
    let mut reports = Vec::new();
    let mut logs = String::new();
    for child in [a, b] {
        let out = tokio::time::timeout(RUN_BOUND, child.wait_with_output())
            .await
            .expect("a node did not drain in time")
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        logs.push_str(&String::from_utf8_lossy(&out.stderr));
        reports.push(report(&out));
    }
    let st = run(abide(&["status", "--db", &url, "--json"])).await;
    db.drop_now().await;
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let s = p.stats();

    // Nothing lost, nothing accepted twice, one limit shared and used.
    let (goodput, throttled) = assert_one_shared_limit(&st, &s, N, LIMIT, elapsed, &logs);
    for r in &reports {
        let c = &r["providers"][0]["coordination"];
        assert_eq!(c["mode"], "redis", "{r}");
        assert!(c["node"].as_str().unwrap().starts_with("abide-"), "{r}");
    }
    println!(
        "scale_out: {N} in {elapsed:?} at {LIMIT}/s: {goodput:.3} of the limit, {throttled} 429s, {} duplicates",
        s.duplicates
    );
}
