//! A refused connection is not an attempt: nothing reached the remote, so nothing is
//! charged, nothing counts toward `max_attempts`, and no `no_response` is recorded. The
//! host's outage handling still pauses it. Real loopback, real SQLite, a few seconds.

use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{ProviderConfig as FakeConfig, RunningProvider};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, ListFilter, NewItem, RemoteCode, Request, SqliteStore,
    State, Store,
};
use serde_json::json;

const TOKEN: &str = "ABIDE_IT_TOKEN_REFUSED";

/// Connect failures seen before the provider is started: more than there are items' worth
/// of attempts under `max_attempts = 1`, so charging them would defer items.
const REFUSALS: u64 = 3;

/// A port nothing listens on (bound, noted, dropped), and a dispatcher on a fresh SQLite
/// outbox sending to it with `retry` as its `[provider.retry]` table, holding `n` items
/// keyed `{prefix}-{i}`.
async fn refused_dispatcher(
    retry: &str,
    concurrency: usize,
    n: u64,
    prefix: &str,
) -> (
    std::net::SocketAddr,
    tempfile::TempDir,
    SqliteStore,
    Dispatcher<SqliteStore>,
) {
    // Test-only: the variable name is unique to these tests and only this process reads it.
    std::env::set_var(TOKEN, abide_fake::DEMO_KEY);
    let addr = refusing_addr();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("o.db")).await.unwrap();
    let config = format!(
        "[[provider]]\nname = \"p\"\nbase_url = \"http://{addr}\"\n\
         credentials_env = \"{TOKEN}\"\nrate_hint = 200.0\nconcurrency = {concurrency}\n\
         [provider.retry]\n{retry}\n"
    );
    let config = Config::from_toml_str(&config).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let opts = DispatcherOptions {
        maintenance_interval: Duration::from_millis(100),
        idle_poll: Duration::from_millis(50),
        seed: Some(9),
        ..DispatcherOptions::default()
    };
    let d = Dispatcher::new(store.clone(), config, clock, opts).unwrap();
    let work: Vec<NewItem> = (0..n)
        .map(|i| {
            NewItem::new(
                "p",
                Request::post_json("/v1/messages", json!({"to": "+15550100", "n": i})),
            )
            .with_idempotency_key(format!("{prefix}-{i}"))
        })
        .collect();
    d.enqueue(&work).await.unwrap();
    (addr, dir, store, d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_are_not_attempts_and_items_wait_for_the_provider() {
    // One attempt each: a single charged refusal would defer its item.
    let n = 6u64;
    let retry = "max_attempts = 1\nbackoff_base_ms = 100\nbackoff_cap_secs = 1";
    let (addr, _dir, store, d) = refused_dispatcher(retry, 4, n, "refused").await;

    // Start the provider on that port once the dispatcher has been refused a few times.
    let start_later = async {
        for _ in 0..400 {
            let t = d.progress().await.unwrap().totals;
            if t.transport_failures >= REFUSALS {
                let cfg = FakeConfig::from_toml_str("[limits]\nkey_rate = \"1000/s\"").unwrap();
                let p: RunningProvider = abide_fake::spawn(cfg, Arc::new(SystemClock), addr)
                    .await
                    .unwrap();
                return p;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("fewer than {REFUSALS} refused connections in 10 s");
    };
    let (progress, provider) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(d.run_until_drained(), start_later)
    })
    .await
    .expect("drains within a minute");
    let progress = progress.unwrap();

    // The outage was seen and counted as what we saw, not as what the remote said.
    assert!(
        progress.totals.transport_failures >= REFUSALS,
        "{progress:?}"
    );
    // Every item delivered; none deferred by refusals.
    assert_eq!(progress.counts.submitted, n, "{progress:?}");
    assert_eq!(progress.totals.deferred, 0, "{progress:?}");
    let seen = provider.stats();
    assert_eq!(seen.accepted, n);
    assert_eq!(seen.duplicates, 0);
    // Attempts are requests on the wire: as many as the provider saw, no `no_response`.
    assert_eq!(progress.totals.attempts, seen.requests, "{progress:?}");
    let remote = d.store().remote_counts(None).await.unwrap();
    let recorded: u64 = remote.iter().map(|(_, c)| *c).sum();
    assert_eq!(recorded, seen.requests, "{remote:?}");
    assert!(
        !remote.iter().any(|(c, _)| *c == RemoteCode::NoResponse),
        "{remote:?}"
    );
    for it in store.list(&ListFilter::default()).await.unwrap() {
        assert_eq!(it.state, State::Submitted);
        assert_eq!(it.attempts, 1, "{it:?}");
        assert_eq!(store.attempts(&it.id).await.unwrap().len(), 1);
    }
}

/// An item no request can be made of (its path edited by hand to leave the base URL) fails
/// at once, with no attempt and no request: it is no outage of the host either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsendable_row_fails_without_a_request_or_an_attempt() {
    // Nothing listens here; nothing may try.
    let addr = refusing_addr();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("o.db")).await.unwrap();
    let config = format!(
        "[[provider]]\nname = \"p\"\nbase_url = \"http://{addr}/api\"\nrate_hint = 200.0\n"
    );
    let config = Config::from_toml_str(&config).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let d = Dispatcher::new(store.clone(), config, clock, DispatcherOptions::default()).unwrap();
    let req = Request::post_json("/v1/messages", json!({"to": "+15550100"}));
    let id = d
        .enqueue(&[NewItem::new("p", req).with_idempotency_key("edited")])
        .await
        .unwrap()[0]
        .id
        .clone();
    sqlx::query("UPDATE items SET path = '/%2e%2e/v1' WHERE id = ?")
        .bind(&id)
        .execute(store.pool())
        .await
        .unwrap();
    let progress = tokio::time::timeout(Duration::from_secs(30), d.run_until_drained())
        .await
        .expect("fails at once")
        .unwrap();
    let it = store.get(&id).await.unwrap().unwrap();
    assert_eq!(it.state, State::Failed, "{it:?}");
    assert!(
        it.reason.as_deref().unwrap_or("").starts_with("unsendable"),
        "{it:?}"
    );
    assert_eq!(it.attempts, 0);
    assert_eq!(progress.totals.attempts, 0, "{progress:?}");
    assert_eq!(progress.totals.transport_failures, 0, "{progress:?}");
}

/// A host that stays down: refused connections never reach the attempt cap, but the
/// messages still age, and past `max_age` they are parked (`DEFERRED`, reason naming the
/// age), unsent and uncharged, so the run ends instead of waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_stays_down_defers_items_at_their_maximum_age_uncharged() {
    let retry = "max_attempts = 1\nmax_age_secs = 1\nbackoff_base_ms = 100\nbackoff_cap_secs = 1";
    let (_addr, _dir, store, d) = refused_dispatcher(retry, 2, 3, "down").await;
    let progress = tokio::time::timeout(Duration::from_secs(60), d.run_until_drained())
        .await
        .expect("a host that stays down still ends the run")
        .unwrap();
    assert_eq!(progress.counts.deferred, 3, "{progress:?}");
    // This run's decisions count them too, whichever path parked them (the send that met
    // the age, or the maintenance sweep): the report must not say "deferred 0".
    assert_eq!(progress.totals.deferred, 3, "{progress:?}");
    assert_eq!(progress.totals.attempts, 0, "{progress:?}");
    assert!(progress.totals.transport_failures >= 3, "{progress:?}");
    assert!(d.store().remote_counts(None).await.unwrap().is_empty());
    for it in store.list(&ListFilter::default()).await.unwrap() {
        assert_eq!(it.state, State::Deferred);
        assert_eq!(it.attempts, 0, "{it:?}");
        let reason = it.reason.clone().unwrap_or_default();
        assert!(reason.starts_with("maximum age"), "{it:?}");
    }
}

/// A loopback address nothing listens on: the port was free a moment ago and its
/// listener is gone, so a connect is refused.
fn refusing_addr() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}
