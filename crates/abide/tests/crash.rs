//! kill -9 or SIGTERM in the middle of `abide send`, then run it again: nothing lost,
//! nothing accepted twice, and every repeat carries the same idempotency key.

#![allow(clippy::unwrap_used)]

mod support;

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_then_resume_delivers_everything_once() {
    const N: usize = 1000;
    // 5 ms per message keeps requests on the wire when the kill lands.
    let mut pc = provider_config(300, 30);
    pc.latency_ms = 5;
    let p = start_provider(pc).await;
    // Reclaimed items are retries and draw on the retry budget; a larger floor keeps
    // the resumed run from trickling them out at the default 1/s.
    let f = Files::new(
        &provider_toml(
            "sms",
            &p.url(),
            "rate_hint = 300.0\nconcurrency = 20",
            "[provider.budget]\nmin_per_sec = 100",
        ),
        N,
    );

    let mut first = start(f.send());
    wait_until("the provider to accept a quarter", || {
        p.stats().accepted >= (N / 4) as u64
    })
    .await;
    first.start_kill().unwrap(); // SIGKILL: no cleanup, leases left behind
    let status = first.wait().await.unwrap();
    assert!(!status.success());
    let at_kill = p.stats();
    assert!(
        at_kill.accepted < N as u64,
        "finished before the kill: {at_kill:?}"
    );
    // What the dead run left unrecorded: items still IN_FLIGHT (sent or about to be, their
    // answers on the wire or received and not yet committed). `status` only reads.
    let st = run(abide(&["status", "--db", &f.db, "--json"])).await;
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let unrecorded = st["counts"]["in_flight"].as_u64().unwrap();

    let second = run(f.send()).await;
    assert_eq!(second.status.code(), Some(0), "{}", show(&second));
    let s = p.stats();
    // Every item accepted exactly once: a repeat reached the provider only with an
    // idempotency key it had already accepted, so it counted as a duplicate.
    assert_eq!(s.accepted, N as u64, "{s:?}");
    // A repeat can only be of an item whose answer the dead run never recorded: the
    // requests on the wire at the kill (20 senders) and the answers still waiting for
    // their batch to commit. Never of a recorded one.
    assert!(
        s.duplicates <= unrecorded,
        "{} duplicates, {unrecorded} unrecorded at the kill: {s:?}",
        s.duplicates
    );
    assert!(s.requests >= N as u64 + s.duplicates);
    let r = report(&second);
    assert_eq!(
        r["outbox"]["counts"]["submitted"],
        N as u64,
        "{}",
        show(&second)
    );
    assert_eq!(r["outbox"]["items"], N as u64);
    // The first run's lines were not enqueued again.
    assert_eq!(
        r["input"]["already_enqueued"].as_u64().unwrap() + r["input"]["enqueued"].as_u64().unwrap(),
        N as u64
    );
    assert_eq!(
        r["input"]["enqueued"], 0,
        "input was enqueued before the kill"
    );
    // abide's own record: one 202 per item. The dead run's last responses were never
    // recorded (a reclaimed item is charged the request it had marked as sent).
    let ok = r["outbox"]["remote_counts"]["http_202"].as_u64().unwrap();
    assert_eq!(ok, N as u64, "{}", show(&second));
}

/// SIGTERM in the middle of `abide send`: exit 130, nothing left IN_FLIGHT, and every
/// request the provider answered is recorded (its accepted count equals SUBMITTED), so
/// the next run re-sends nothing it accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_run_records_every_answer_and_leaves_nothing_in_flight() {
    const N: usize = 400;
    // 50 ms per message keeps requests on the wire when the signal lands.
    let mut pc = provider_config(200, 20);
    pc.latency_ms = 50;
    let p = start_provider(pc).await;
    let f = Files::new(
        &provider_toml("sms", &p.url(), "rate_hint = 200.0\nconcurrency = 20", ""),
        N,
    );
    let first = start(f.send());
    wait_until("the provider to accept some", || p.stats().accepted >= 40).await;
    sigterm(&first);
    let out = tokio::time::timeout(RUN_BOUND, first.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", show(&out));
    let r = report(&out);
    assert_eq!(r["outcome"], "interrupted", "{r}");
    let c = &r["outbox"]["counts"];
    assert_eq!(c["in_flight"], 0, "{r}");
    let at_stop = p.stats();
    assert!(at_stop.accepted < N as u64, "finished first: {at_stop:?}");
    assert_eq!(c["submitted"], at_stop.accepted, "an answer was lost: {r}");
    assert_eq!(
        c["submitted"].as_u64().unwrap()
            + c["pending"].as_u64().unwrap()
            + c["queued"].as_u64().unwrap(),
        N as u64,
        "{r}"
    );

    let second = run(f.send()).await;
    assert_eq!(second.status.code(), Some(0), "{}", show(&second));
    let s = p.stats();
    assert_eq!(s.accepted, N as u64, "{s:?}");
    assert_eq!(s.duplicates, 0, "a recorded answer was sent again: {s:?}");
}
