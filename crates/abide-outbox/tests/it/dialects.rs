//! The outbox against each rate-limit header style `abide-fake` can speak, over
//! loopback: with `Retry-After` switched off, the dialect's reset is the only guide, and the
//! outbox must pause until it instead of coming back after its own one-second backoff.

use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::ProviderConfig as FakeConfig;
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, NewItem, RemoteCode, Request, SqliteStore, Store,
};
use serde_json::json;

/// One token every 3 s, a burst of 1: the second message is refused with a reset of
/// about 3 s (rounded up to whole seconds by the draft-6 and epoch styles).
const LIMIT: &str = r#"
[limits]
key_rate = "1/3s"
key_burst = 1
account_rate = "1000/s"
[behaviour]
retry_after = "absent"
"#;

/// Messages sent: the first takes the token, each of the others must wait for one.
const N: usize = 3;

/// Send [`N`] messages to a provider speaking `style`, read by an outbox in `dialect`;
/// returns the 429s seen.
async fn throttles_against(style: &str, dialect: &str, token_env: &str) -> usize {
    // Test-only: the variable names are unique per test and only this process reads them.
    std::env::set_var(token_env, abide_fake::DEMO_KEY);
    let cfg = FakeConfig::from_toml_str(&format!("headers = \"{style}\"\n{LIMIT}")).unwrap();
    let provider = abide_fake::spawn(cfg, Arc::new(SystemClock), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("o.db")).await.unwrap();
    let config = Config::from_toml_str(&format!(
        "[[provider]]\nname = \"fake\"\nbase_url = \"{}\"\ncredentials_env = \"{token_env}\"\n\
         rate_hint = 50.0\nconcurrency = 1\nrate_limit_dialect = \"{dialect}\"\n",
        provider.url()
    ))
    .unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let opts = DispatcherOptions {
        maintenance_interval: Duration::from_millis(100),
        idle_poll: Duration::from_millis(50),
        seed: Some(4),
        ..DispatcherOptions::default()
    };
    let d = Dispatcher::new(store, config, clock, opts).unwrap();
    let work: Vec<NewItem> = (0..N)
        .map(|i| {
            NewItem::new(
                "fake",
                Request::post_json("/v1/messages", json!({"to": "+15550100", "n": i})),
            )
            .with_idempotency_key(format!("{style}-{i}"))
        })
        .collect();
    let ids: Vec<String> = d
        .enqueue(&work)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let progress = tokio::time::timeout(Duration::from_secs(30), d.run_until_drained())
        .await
        .expect("drains within 30 s")
        .unwrap();

    let stats = provider.stats();
    assert_eq!(progress.counts.submitted, N as u64, "{style}: {progress:?}");
    assert_eq!(
        (stats.accepted, stats.duplicates),
        (N as u64, 0),
        "{style}: {stats:?}"
    );
    let mut throttles = Vec::new();
    for id in &ids {
        for a in d.store().attempts(id).await.unwrap() {
            if a.record.remote == RemoteCode::Http(429) {
                throttles.push(a.record);
            }
        }
    }
    println!(
        "{style} read as {dialect}: {} throttles; {progress:?}",
        throttles.len()
    );
    for t in &throttles {
        assert_eq!(
            t.verdict_class,
            abide_core::VerdictClass::Throttle,
            "{style}: {t:?}"
        );
    }
    throttles.len()
}

/// Every accepted answer says `remaining 0, reset in ~3 s`: the pacer pauses until then, so
/// each next message finds a fresh token (one early arrival is tolerated).
async fn paces_against(style: &str, token_env: &str) {
    let n = throttles_against(style, "auto", token_env).await;
    assert!(n <= 1, "{style}: {n} throttles");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_pauses_until_an_ietf_reset() {
    paces_against("ietf", "ABIDE_IT_TOKEN_DIALECT_IETF").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_pauses_until_a_draft_6_reset() {
    paces_against("draft-6", "ABIDE_IT_TOKEN_DIALECT_DRAFT6").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_pauses_until_an_x_ratelimit_epoch_reset() {
    paces_against("x-ratelimit", "ABIDE_IT_TOKEN_DIALECT_XRL").await;
}

/// The control: an outbox told to read another dialect sees no reset, sends at once and
/// learns from 429s (its own pauses, 1 s then 2 s: at least two per token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_reading_the_wrong_dialect_is_throttled_instead() {
    let n = throttles_against("x-ratelimit", "shopify", "ABIDE_IT_TOKEN_DIALECT_BLIND").await;
    assert!(n >= 2, "{n} throttles");
}
