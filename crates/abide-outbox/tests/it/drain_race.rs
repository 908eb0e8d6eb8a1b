//! "Drained" against fail-over moves: the worst interleaving (every waiting item moves to
//! the other provider just before each read the drain check makes) never reads as drained
//! while items wait.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use abide_core::Clock;
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, Ending, Feed, NewItem, Request, Response,
    ScriptedTransport, SqliteStore, Store, Transport,
};
use serde_json::json;

use crate::support::{still, t0, StillStore, TokioClock};

const PROVIDERS: &str = r#"[[provider]]
    name = "a"
    base_url = "http://127.0.0.1:9"
    concurrency = 2
    [provider.failover]
    to = "b"
    after_pending_secs = 30
    [[provider]]
    name = "b"
    base_url = "http://127.0.0.1:10"
    concurrency = 2"#;

#[tokio::test(start_paused = true)]
async fn items_moving_between_providers_never_read_as_drained() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let store = StillStore::new(
        still(SqliteStore::open(dir.path().join("outbox.db")))
            .await
            .unwrap(),
    );
    // Both providers answer every request with an hour's wait: the items stay PENDING.
    let c: Arc<dyn Clock> = clock.clone();
    let busy = Arc::new(ScriptedTransport::new(c, |_, _| {
        Response::with_headers(503, &[("retry-after", "3600")])
    }));
    let transports: HashMap<&str, Arc<ScriptedTransport>> =
        HashMap::from([("a", busy.clone()), ("b", busy.clone())]);
    let config = Config::from_toml_str(PROVIDERS).unwrap();
    let c: Arc<dyn Clock> = clock.clone();
    let opts = DispatcherOptions {
        seed: Some(7),
        ..DispatcherOptions::default()
    };
    let d = Dispatcher::with_transports(store.clone(), config, c, opts, |p| {
        let t: Arc<dyn Transport> = transports[p.name.as_str()].clone();
        t
    })
    .unwrap();
    let items: Vec<NewItem> = (0..20)
        .map(|i| NewItem::new("a", Request::post_json("/v1/m", json!({ "n": i }))))
        .collect();
    d.enqueue(&items).await.unwrap();
    store.move_before_reads("a", "b");

    // Asked provider by provider, the race is won every time: each provider is empty
    // when it is asked. This is what a per-provider drain check would see.
    let on_a = store.counts_by_state(Some("a")).await.unwrap();
    let on_b = store.counts_by_state(Some("b")).await.unwrap();
    assert_eq!(
        (on_a.queued + on_a.pending, on_b.queued + on_b.pending),
        (0, 0),
        "the race is forced"
    );
    // One read of the whole outbox sees them wherever they are.
    for _ in 0..50 {
        assert!(
            !d.is_drained().await.unwrap(),
            "drained with 20 items waiting"
        );
    }
    // A whole drained run under the same race: it must not end as drained.
    let shutdown = tokio::time::sleep(Duration::from_secs(120));
    let (progress, ending) = d
        .run_drained(Feed::complete(), Duration::ZERO, shutdown)
        .await
        .unwrap();
    assert_eq!(ending, Ending::Stopped, "{progress:?}");
    let all = still(store.0.counts_by_state(None)).await.unwrap();
    assert_eq!(all.queued + all.pending + all.in_flight, 20, "{all:?}");
}
