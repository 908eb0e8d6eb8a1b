//! End to end over loopback against `abide-fake`: real HTTP, real SQLite, real time
//! (kept to a few seconds by generous provider limits).

use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{ProviderConfig as FakeConfig, RunningProvider};
use abide_outbox::{
    AttemptRecord, Completion, Config, Dispatcher, DispatcherOptions, NewItem, Outcome, Progress,
    RemoteCode, Request, SqliteStore, State, Store,
};
use serde_json::json;

/// Each test uses its own variable so parallel tests do not race on the environment.
fn set_token(var: &str) {
    // Test-only: the variable names are unique per test and only this process reads them.
    std::env::set_var(var, abide_fake::DEMO_KEY);
}

async fn fake(toml: &str) -> RunningProvider {
    let cfg = FakeConfig::from_toml_str(toml).unwrap();
    abide_fake::spawn(cfg, Arc::new(SystemClock), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn items(provider: &str, n: usize, prefix: &str) -> Vec<NewItem> {
    (0..n)
        .map(|i| {
            NewItem::new(
                provider,
                Request::post_json("/v1/messages", json!({"to": "+15550100", "n": i})),
            )
            .with_idempotency_key(format!("{prefix}-{i}"))
        })
        .collect()
}

fn opts() -> DispatcherOptions {
    DispatcherOptions {
        maintenance_interval: Duration::from_millis(100),
        idle_poll: Duration::from_millis(50),
        budget_denied_delay: Duration::from_millis(200),
        seed: Some(4),
        ..DispatcherOptions::default()
    }
}

/// A fresh SQLite outbox; the directory must live as long as the store.
async fn temp_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("o.db")).await.unwrap();
    (dir, store)
}

/// One `[[provider]]` table sending to `base_url` with the token in `token_env`; `rest` holds
/// the test's own keys and sub-tables.
fn provider_toml(name: &str, base_url: &str, token_env: &str, rest: &str) -> String {
    format!(
        "[[provider]]\nname = \"{name}\"\nbase_url = \"{base_url}\"\n\
         credentials_env = \"{token_env}\"\n{rest}\n"
    )
}

fn dispatcher(store: SqliteStore, config: &str) -> Dispatcher<SqliteStore> {
    let config = Config::from_toml_str(config).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    Dispatcher::new(store, config, clock, opts()).unwrap()
}

/// Run `d` until drained; `why` is the failure message when that takes longer than `within`.
async fn drain(d: &Dispatcher<SqliteStore>, within: Duration, why: &str) -> Progress {
    match tokio::time::timeout(within, d.run_until_drained()).await {
        Ok(p) => p.unwrap(),
        Err(_) => {
            let p = d.progress().await.unwrap();
            let items = d
                .store()
                .list(&abide_outbox::ListFilter::default())
                .await
                .unwrap();
            panic!(
                "{why}: not drained within {within:?}: {p:?}\n{:?}",
                items.iter().take(3).collect::<Vec<_>>()
            );
        }
    }
}

/// Get the key suspended the careless way: 20 back to back, ignoring the 429s.
async fn suspend_key(provider: &RunningProvider) {
    let client = reqwest::Client::new();
    for _ in 0..20 {
        client
            .post(format!("{}/v1/messages", provider.url()))
            .bearer_auth(abide_fake::DEMO_KEY)
            .json(&json!({"to": "+15550100"}))
            .send()
            .await
            .unwrap();
    }
    assert_eq!(provider.stats().suspensions, 1, "setup");
}

async fn run(
    store: SqliteStore,
    config: &str,
    work: Vec<NewItem>,
) -> (Dispatcher<SqliteStore>, Progress) {
    let d = dispatcher(store, config);
    for chunk in work.chunks(1000) {
        d.enqueue(chunk).await.unwrap();
    }
    let progress = drain(&d, Duration::from_secs(60), "drains within a minute").await;
    println!(
        "elapsed {:?}, achieved {:.0}/s, throttles/request {:.3}, totals {:?}",
        progress.elapsed,
        progress.achieved_rate(),
        progress.throttles_per_request(),
        progress.totals
    );
    (d, progress)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_four_workers_deliver_every_item_exactly_once_under_a_rate_limit() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_EXACTLY_ONCE";
    set_token(TOKEN);
    let provider = fake(
        r#"
        [limits]
        key_rate = "1000/s"
        key_burst = 50
        account_rate = "2000/s"
        "#,
    )
    .await;
    let (_dir, store) = temp_store().await;
    let config = provider_toml(
        "fake",
        &provider.url(),
        TOKEN,
        "rate_hint = 900.0\nconcurrency = 24",
    );
    let n = 2000;
    let (d, progress) = run(store.clone(), &config, items("fake", n, "once")).await;

    let stats = provider.stats();
    assert_eq!(stats.accepted, n as u64, "{stats:?}");
    assert_eq!(stats.duplicates, 0, "{stats:?}");
    assert_eq!(progress.counts.submitted, n as u64, "{progress:?}");
    assert_eq!(progress.counts.active(), 0);
    assert_eq!(progress.totals.delivered, n as u64);
    let throttled_429 = stats.rejected_by_status.get(&429).copied().unwrap_or(0);
    let per_request = throttled_429 as f64 / n as f64;
    assert!(
        per_request <= 0.05,
        "429s per logical request {per_request}: {stats:?}"
    );
    let remote = d.store().remote_counts(Some("fake")).await.unwrap();
    assert!(
        remote.contains(&(RemoteCode::Http(202), n as u64)),
        "{remote:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_items_wait_pending_then_drain_without_duplicates() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_THROTTLED";
    set_token(TOKEN);
    // Far slower than the sender's starting pace: 429s with Retry-After are certain. (The
    // client ignores the rate-limit headers: reading the first answer's policy and
    // concurrency quota, it would otherwise slow down before most of its first burst went
    // out, and whether any 429 came back would depend on timing.)
    let provider = fake(
        r#"
        [limits]
        key_rate = "100/s"
        key_burst = 5
        "#,
    )
    .await;
    let (_dir, store) = temp_store().await;
    let config = provider_toml(
        "fake",
        &provider.url(),
        TOKEN,
        "rate_hint = 2000.0\nconcurrency = 20\n[provider.budget]\nretry_ratio = 1.0\n\
         [provider.pacer]\nuse_rate_limit_headers = false",
    );
    let n = 150;
    let (d, progress) = run(store, &config, items("fake", n, "thr")).await;
    let stats = provider.stats();
    assert_eq!(stats.accepted, n as u64, "{stats:?}");
    assert_eq!(stats.duplicates, 0);
    assert!(
        progress.totals.throttled > 0,
        "the test must provoke throttles: {progress:?}"
    );
    assert_eq!(progress.counts.submitted, n as u64, "{progress:?}");
    // The pacer learned: it ends well below its starting 2000/s.
    let rate = d.pacer("fake").unwrap().rate();
    assert!(rate < 2000.0, "rate {rate}");
    // Throttled attempts were recorded with the delay chosen and why.
    let remote = d.store().remote_counts(None).await.unwrap();
    assert!(
        remote
            .iter()
            .any(|(c, n)| *c == RemoteCode::Http(429) && *n > 0),
        "{remote:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_items_fail_over_to_the_second_provider_after_the_configured_age() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_FAILOVER";
    set_token(TOKEN);
    let backup = fake("[limits]\nkey_rate = \"500/s\"\nkey_concurrency = 64").await;
    // A port that refuses connections: bind, note the address, drop the listener.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (_dir, store) = temp_store().await;
    let config = provider_toml(
        "primary",
        &format!("http://{dead}"),
        TOKEN,
        r#"
        [provider.retry]
        backoff_base_ms = 100
        backoff_cap_secs = 1
        [provider.failover]
        to = "backup"
        after_pending_secs = 1"#,
    ) + &provider_toml("backup", &backup.url(), TOKEN, "rate_hint = 200.0");
    let n = 40;
    let work = items("primary", n, "fo");
    let (d, progress) = run(store.clone(), &config, work).await;
    assert_eq!(progress.counts.submitted, n as u64, "{progress:?}");
    assert_eq!(backup.stats().accepted, n as u64);
    assert_eq!(backup.stats().duplicates, 0);
    let some = d
        .store()
        .claim("backup", "x", SystemClock.now(), Duration::ZERO, 1)
        .await;
    assert!(some.unwrap().is_empty());
    // Every item kept its original provider and key, and went through the backup.
    let first = d.enqueue(&items("primary", 1, "fo")).await.unwrap();
    assert!(!first[0].created, "same key: a no-op");
    let it = store.get(&first[0].id).await.unwrap().unwrap();
    assert_eq!(it.state, State::Submitted);
    assert_eq!(
        (it.provider.as_str(), it.current_provider.as_str()),
        ("primary", "backup")
    );
    let attempts = store.attempts(&it.id).await.unwrap();
    assert_eq!(
        attempts.last().map(|a| a.record.provider.as_str()),
        Some("backup")
    );
    assert!(attempts.iter().all(|a| a.idempotency_key == "fo-0"));
}

/// Regression: items reclaimed from a dead run's leases drew on the retry budget, so a
/// resumed run drained them at the budget's floor (84 items took 33 s). With a budget that
/// allows no retry at all they must still all go, none refused by the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_reclaimed_after_a_crash_draw_no_retry_budget() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_RECLAIMED";
    set_token(TOKEN);
    // Nothing may be throttled here: with a zero budget a real retry would wait forever,
    // and this test is about attempts that retry nothing. Both limits far above the pace.
    let provider = fake(
        "[limits]\nkey_rate = \"1000/s\"\nkey_burst = 50\naccount_rate = \"1000/s\"\naccount_burst = 50",
    )
    .await;
    let (_dir, store) = temp_store().await;
    let config = provider_toml(
        "fake",
        &provider.url(),
        TOKEN,
        r#"
        rate_hint = 500.0
        concurrency = 8
        [provider.budget]
        min_per_sec = 0
        retry_ratio = 0.0"#,
    );
    let n = 60;
    store
        .enqueue(&items("fake", n, "crash"), SystemClock.now())
        .await
        .unwrap();
    // A run that claimed everything and died: the lease is already over.
    let claimed = store
        .claim("fake", "dead", SystemClock.now(), Duration::ZERO, n)
        .await
        .unwrap();
    assert_eq!(claimed.len(), n);
    assert_eq!(
        store
            .reclaim_all_in_flight(SystemClock.now())
            .await
            .unwrap(),
        n as u64
    );

    let d = dispatcher(store, &config);
    let progress = drain(
        &d,
        Duration::from_secs(20),
        "resumed items drain without retry budget",
    )
    .await;
    assert_eq!(progress.counts.submitted, n as u64, "{progress:?}");
    assert_eq!(progress.totals.budget_denied, 0, "{progress:?}");
    assert_eq!(progress.totals.throttled, 0, "the premise: {progress:?}");
    assert_eq!(provider.stats().accepted, n as u64);
}

/// Regression: after an outage every waiting item is a retry, and the budget let them go
/// at its floor (1/s) long after the provider answered again (100 items had not drained
/// in 45 s). A retry that succeeds now pays for the next, so they go at the pacer's rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_retries_drains_at_the_pacers_rate_once_the_provider_answers() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_BACKLOG";
    set_token(TOKEN);
    let provider = fake("[limits]\nkey_rate = \"1000/s\"\nkey_burst = 50").await;
    let (_dir, store) = temp_store().await;
    let n = 100;
    let now = SystemClock.now();
    store
        .enqueue(&items("fake", n, "backlog"), now)
        .await
        .unwrap();
    // Each was tried once during the outage and refused: due again now, a retry.
    let claimed = store
        .claim("fake", "before", now, Duration::from_secs(60), n)
        .await
        .unwrap();
    let failed: Vec<Completion> = claimed
        .iter()
        .map(|it| Completion {
            id: it.id.clone(),
            lease_owner: "before".into(),
            outcome: Outcome::Retry {
                next_attempt_at: now,
                reason: "http_503".into(),
            },
            attempts: vec![AttemptRecord {
                at: now,
                provider: "fake".into(),
                remote: RemoteCode::Http(503),
                verdict_class: abide_core::VerdictClass::Retry,
                delay: None,
                delay_reason: None,
                latency: Duration::from_millis(1),
            }],
            last_provider_code: Some(abide_outbox::RemoteCode::Http(503)),
            message_id: None,
        })
        .collect();
    store.complete(&failed, now).await.unwrap();

    let config = provider_toml(
        "fake",
        &provider.url(),
        TOKEN,
        "rate_hint = 200.0\nconcurrency = 8",
    );
    let d = dispatcher(store, &config);
    // At the default floor (1 retry/s) this takes about 90 s.
    let progress = drain(
        &d,
        Duration::from_secs(20),
        "the backlog drains at the pacer's rate, not the budget floor",
    )
    .await;
    assert_eq!(progress.counts.submitted, n as u64, "{progress:?}");
    assert_eq!(provider.stats().accepted, n as u64);
    assert_eq!(provider.stats().duplicates, 0);
}

/// Regression: a suspended key (`403` without `Retry-After`, configured as a throttle) saw
/// 120-200 attempts in 2-3 s, because only a `Retry-After` paused the provider. A throttle
/// without one now pauses it for a growing backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_key_sees_a_handful_of_requests_then_the_items_drain() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_SUSPENDED";
    set_token(TOKEN);
    let provider = fake(
        r#"
        [limits]
        key_rate = "200/s"
        key_burst = 2
        [abuse]
        threshold = 5
        window_secs = 60
        suspend_secs = 2
        "#,
    )
    .await;
    suspend_key(&provider).await;
    let refused_before = suspended(&provider);
    let accepted_before = provider.stats().accepted;
    let (_dir, store) = temp_store().await;
    let config = provider_toml(
        "fake",
        &provider.url(),
        TOKEN,
        r#"
        rate_hint = 200.0
        concurrency = 20
        [provider.classify.http]
        403 = "throttle"
        [provider.retry]
        max_attempts = 1000
        backoff_cap_secs = 2"#,
    );
    let n = 100;
    let (_, progress) = run(store, &config, items("fake", n, "susp")).await;
    let refused = suspended(&provider) - refused_before;
    // The 20 workers' first requests, then about one per pause (1 s, 2 s, ...).
    assert!(
        refused <= 30,
        "{refused} requests reached the suspended key"
    );
    assert_eq!(progress.counts.submitted, n as u64, "{progress:?}");
    assert_eq!(provider.stats().accepted - accepted_before, n as u64);
}

fn suspended(p: &RunningProvider) -> u64 {
    p.stats()
        .rejected_by_reason
        .get("suspended")
        .copied()
        .unwrap_or(0)
}

/// `on_wire` counts requests awaiting their answer (at most the concurrency), while
/// `in_flight` counts every claimed item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_wire_counts_requests_awaiting_an_answer_not_claimed_items() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_ON_WIRE";
    set_token(TOKEN);
    let provider = fake("latency_ms = 50\n[limits]\nkey_rate = \"1000/s\"\nkey_burst = 50").await;
    let (_dir, store) = temp_store().await;
    let config = provider_toml(
        "fake",
        &provider.url(),
        TOKEN,
        "rate_hint = 400.0\nconcurrency = 4",
    );
    let d = dispatcher(store, &config);
    d.enqueue(&items("fake", 200, "wire")).await.unwrap();
    let run = tokio::spawn({
        let d = d.clone();
        async move { d.run_until_drained().await }
    });
    let (mut most_on_wire, mut most_in_flight) = (0, 0);
    for _ in 0..2000 {
        let t = d.totals();
        assert!(t.on_wire <= 4, "{t:?}");
        most_on_wire = most_on_wire.max(t.on_wire);
        most_in_flight = most_in_flight.max(t.in_flight);
        if run.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let progress = run.await.unwrap().unwrap();
    assert_eq!(progress.counts.submitted, 200);
    assert!(most_on_wire >= 1, "never saw a request on the wire");
    assert!(
        most_in_flight > 4,
        "claims run ahead of the senders: {most_in_flight}"
    );
    assert_eq!(progress.totals.on_wire, 0);
}

/// Regression: with a suspended primary backing off (pauses of 1, 2, 4, 8, 16 s), senders
/// held their claimed items through each pause, out of reach of fail-over; the run took
/// over 30 s. A pause longer than 2 s now hands them back, so they fail over on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_do_not_wait_out_a_long_pause_in_a_senders_hands() {
    const TOKEN: &str = "ABIDE_IT_TOKEN_PAUSE_FAILOVER";
    set_token(TOKEN);
    let primary = fake(
        "[limits]\nkey_rate = \"200/s\"\nkey_burst = 2\n\
         [abuse]\nthreshold = 5\nwindow_secs = 60\nsuspend_secs = 3600",
    )
    .await;
    suspend_key(&primary).await;
    let backup = fake("[limits]\nkey_rate = \"500/s\"\nkey_burst = 50").await;
    let (_dir, store) = temp_store().await;
    let config = provider_toml(
        "primary",
        &primary.url(),
        TOKEN,
        r#"
        rate_hint = 200.0
        concurrency = 20
        [provider.classify.http]
        403 = "throttle"
        [provider.failover]
        to = "backup"
        after_pending_secs = 2"#,
    ) + &provider_toml("backup", &backup.url(), TOKEN, "rate_hint = 200.0");
    let d = dispatcher(store, &config);
    let n = 100;
    d.enqueue(&items("primary", n, "pf")).await.unwrap();
    let progress = drain(
        &d,
        Duration::from_secs(15),
        "items fail over within seconds of their age, not after the pauses",
    )
    .await;
    assert_eq!(progress.counts.submitted, n as u64, "{progress:?}");
    assert_eq!(backup.stats().accepted, n as u64);
    assert!(progress.totals.lease_returns > 0, "{progress:?}");
}

/// The library itself refuses a lease that could end while a request is still on the
/// wire (timeout + 2 s), naming the provider; the CLI's own check is not the only guard.
#[tokio::test]
async fn a_lease_shorter_than_a_timeout_plus_margin_is_refused() {
    let config = Config::from_toml_str(
        r#"
        [[provider]]
        name = "fast"
        base_url = "http://127.0.0.1:9/"
        timeout_secs = 1
        [[provider]]
        name = "slow"
        base_url = "http://127.0.0.1:9/"
        timeout_secs = 30
    "#,
    )
    .unwrap();
    let (_dir, store) = temp_store().await;
    let with_lease = |secs| DispatcherOptions {
        lease: Duration::from_secs(secs),
        ..opts()
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let err = Dispatcher::new(store.clone(), config.clone(), clock.clone(), with_lease(31))
        .expect_err("31 s < 30 s + 2 s");
    match &err {
        abide_outbox::Error::Preflight(abide_outbox::Preflight::LeaseTooShort {
            provider,
            least,
            ..
        }) => assert_eq!((provider.as_str(), least.as_secs()), ("slow", 32), "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(Dispatcher::new(store, config, clock, with_lease(32)).is_ok());
}
