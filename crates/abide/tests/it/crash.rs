//! kill -9 or SIGTERM in the middle of `abide send`, then run it again: nothing lost,
//! nothing accepted twice, and every repeat carries the same idempotency key.

#![allow(clippy::unwrap_used)]

use crate::support::*;

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
    wait_until_while_running(&mut first, "the provider to accept a quarter", || {
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
    let mut first = start(f.send());
    wait_until_while_running(&mut first, "the provider to accept some", || {
        p.stats().accepted >= 40
    })
    .await;
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

/// 20 quick restarts of `abide send`, then a run to the end: every item's attempt count
/// is the number of requests the provider saw for its idempotency key. An attempt is a
/// request on the wire: an item claimed and never sent costs nothing, however often its
/// claim is reclaimed.
///
/// First 10 runs stopped by SIGTERM at different points (at once, or after 1 to 15 more
/// requests reached the provider): counts match exactly. Then 10 stopped by SIGKILL at the
/// same points: a kill landing between the committed "sent" mark and the provider reading
/// the request counts that request once too often (at most one per sender per kill,
/// documented in docs/concepts.md), never once too few.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_restarts_charge_exactly_the_requests_on_the_wire() {
    const N: usize = 300;
    const SENDERS: u64 = 4;
    // Unlimited for this pace (no 429s, so no retry budget in the way); 10 ms per message
    // keeps requests on the wire when a signal lands.
    let mut pc = provider_config(1000, 100);
    pc.latency_ms = 10;
    let p = start_provider(pc).await;
    let f = Files::new(
        &provider_toml(
            "sms",
            &p.url(),
            &format!("rate_hint = 100.0\nconcurrency = {SENDERS}"),
            "",
        ),
        N,
    );
    let restart = |kill: bool, round: usize| {
        let (p, f) = (&p, &f);
        async move {
            let before = p.stats().requests;
            let mut child = start(f.send());
            let more = [0u64, 1, 3, 6, 10, 15][round % 6];
            if more > 0 {
                wait_until("requests from this run", || {
                    p.stats().requests >= before + more
                })
                .await;
            }
            if kill {
                child.start_kill().unwrap();
            } else {
                sigterm(&child);
            }
            tokio::time::timeout(RUN_BOUND, child.wait())
                .await
                .expect("a stopped run did not exit")
                .unwrap();
        }
    };

    for round in 0..10 {
        restart(false, round).await;
    }
    let (over, attempts) = compare(&f.db, &p, N).await;
    assert_eq!(over, 0, "after SIGTERMs only: {attempts} attempts");
    assert!(attempts > 0, "nothing was sent before the restarts");

    const KILLS: u64 = 10;
    for round in 0..KILLS as usize {
        restart(true, round).await;
    }
    let stopped_at = p.stats();
    assert!(
        stopped_at.accepted < N as u64,
        "finished before the last restart: {stopped_at:?}"
    );
    let last = run(f.send()).await;
    assert_eq!(last.status.code(), Some(0), "{}", show(&last));
    let s = p.stats();
    assert_eq!(s.accepted, N as u64, "{s:?}");
    let (over, attempts) = compare(&f.db, &p, N).await;
    assert!(
        over <= KILLS * SENDERS,
        "{over} attempts never on the wire after {KILLS} kills ({attempts} attempts, {} \
         requests)",
        s.requests
    );
    eprintln!(
        "20 restarts (10 kill -9): {attempts} attempts, {} requests, {over} counted for a \
         request a kill cut off before the provider read it",
        s.requests
    );
}

/// Every item's attempts against the requests `p` saw for its key: never fewer, the window
/// count equal to the total. Returns (attempts over requests, attempts) summed over items.
async fn compare(db: &str, p: &abide_fake::RunningProvider, n: usize) -> (u64, u64) {
    let seen = p.requests_by_key();
    assert!(!seen.truncated);
    assert_eq!(
        seen.requests_by_key.values().sum::<u64>(),
        p.stats().requests,
        "a request without a known key"
    );
    let store = abide_outbox::SqliteStore::open(db).await.unwrap();
    let filter = abide_outbox::ListFilter {
        limit: n,
        ..abide_outbox::ListFilter::default()
    };
    let items = abide_outbox::Store::list(&store, &filter).await.unwrap();
    // Counted by what the remote said, requests a kill cut off included (no_response).
    let by_code: u64 = abide_outbox::Store::remote_counts(&store, None)
        .await
        .unwrap()
        .iter()
        .map(|(_, n)| n)
        .sum();
    store.close().await.unwrap();
    assert_eq!(items.len(), n);
    let (mut over, mut total) = (0, 0);
    for it in &items {
        let key = &it.idempotency_key;
        let on_wire = seen.requests_by_key.get(key).copied().unwrap_or(0);
        let attempts = u64::from(it.attempts);
        assert!(
            attempts >= on_wire,
            "{key}: {attempts} attempts for {on_wire} requests on the wire"
        );
        assert_eq!(it.window_attempts, it.attempts, "{key}");
        over += attempts - on_wire;
        total += attempts;
    }
    assert_eq!(
        by_code, total,
        "attempts by remote code against attempts charged"
    );
    (over, total)
}

/// Whether process `pid` catches SIGTERM (Linux: bit 15 of `SigCgt` in /proc/PID/status).
fn catches_sigterm(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
}

/// SIGTERM in the first instants of `abide send`, while it still reads its input: the
/// handler is installed before anything else, so the signal is caught, the whole input is
/// enqueued (the enqueue is one transaction, never half done), nothing is sent, and the
/// run exits 130. Before, the handler came only once delivery began: the signal killed the
/// process the default way, and a kill after the first "sent" marks charged attempts
/// that never went out (a race in the restarts test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_the_input_is_read_enqueues_it_all_and_sends_nothing() {
    use tokio::io::AsyncWriteExt;
    const N: usize = 500;
    let p = start_provider(provider_config(1000, 100)).await;
    let f = Files::new(
        &provider_toml("sms", &p.url(), "rate_hint = 500.0\nconcurrency = 20", ""),
        0,
    );
    let mut cmd = abide(&[
        "send",
        "--config",
        f.cfg.to_str().unwrap(),
        "--db",
        &f.db,
        "--json",
        "--quiet",
        "-",
    ]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = start(cmd);
    let pid = child.id().unwrap();
    // The process blocks reading stdin; its handler is installed before it reads.
    wait_until("abide to catch SIGTERM", || catches_sigterm(pid)).await;
    sigterm(&child);
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(messages(N, "sms").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(RUN_BOUND, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", show(&out));
    let r = report(&out);
    assert_eq!(r["outcome"], "interrupted", "{r}");
    assert_eq!(r["input"]["enqueued"], N as u64, "{r}");
    assert_eq!(r["outbox"]["counts"]["queued"], N as u64, "{r}");
    assert_eq!(r["run"]["attempts"], 0, "{r}");
    assert_eq!(p.stats().requests, 0);
    // The next run delivers them.
    let again = run(f.send()).await; // its input file is empty: only what is queued
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    assert_eq!(p.stats().accepted, N as u64);
}
