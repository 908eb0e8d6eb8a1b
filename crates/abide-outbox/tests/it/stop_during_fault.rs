//! A stop asked for while the database refuses writes ends the run at once (the waits for
//! the database end), saying it was asked, instead of at the store-fault limit.

use std::sync::Arc;
use std::time::Duration;

use abide_core::Clock;
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, Ending, Error, Feed, NewItem, Request, Response,
    ScriptedTransport, SqliteStore, Store, Transport,
};
use serde_json::json;

use crate::support::{still, t0, StillStore, TokioClock};

#[tokio::test(start_paused = true)]
async fn a_stop_during_a_store_fault_ends_the_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let start = clock.monotonic();
    let store = StillStore::new(
        still(SqliteStore::open(dir.path().join("outbox.db")))
            .await
            .unwrap(),
    );
    let s = store.clone();
    let c: Arc<dyn Clock> = clock.clone();
    // The disk fills at the 20th request, for good.
    let t = Arc::new(
        ScriptedTransport::new(c, move |_, n| {
            if n == 20 {
                s.fail_writes(true);
            }
            Response::status(202)
        })
        .with_latency(Duration::from_millis(10)),
    );
    let config = Config::from_toml_str(
        "[[provider]]\nname = \"p\"\nbase_url = \"http://127.0.0.1:9\"\nrate_hint = 100.0\n\
         concurrency = 4",
    )
    .unwrap();
    let c: Arc<dyn Clock> = clock.clone();
    let opts = DispatcherOptions {
        seed: Some(7),
        ..DispatcherOptions::default()
    };
    let d = Dispatcher::with_transports(store.clone(), config, c, opts, |_| {
        let t: Arc<dyn Transport> = t.clone();
        t
    })
    .unwrap();
    let items: Vec<NewItem> = (0..100)
        .map(|i| NewItem::new("p", Request::post_json("/m", json!({ "n": i }))))
        .collect();
    d.enqueue(&items).await.unwrap();
    // A SIGTERM 5 s in, well inside the 60 s limit.
    let shutdown = tokio::time::sleep(Duration::from_secs(5));
    let err = d
        .run_drained(Feed::complete(), Duration::ZERO, shutdown)
        .await
        .map(|(_, ending): (_, Ending)| ending)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ResultsNotRecorded {
                interrupted: true,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("as asked"), "{err}");
    let stopped = clock.monotonic() - start;
    assert!(
        stopped < Duration::from_secs(15),
        "stopped after {stopped:?}"
    );
    // Nothing lost: every item in a known state once the disk is back.
    store.fail_writes(false);
    let counts = still(store.0.counts_by_state(None)).await.unwrap();
    assert_eq!(counts.total(), 100);
}
