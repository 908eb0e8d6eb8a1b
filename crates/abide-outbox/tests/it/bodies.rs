//! Throttles told only by the body: a `200` that is a throttle is retried, never stored
//! `SUBMITTED`; an answer that says "out of quota" parks the item `DEFERRED`, never
//! `FAILED` and never retried on a timer. Virtual time, a real SQLite file, a scripted
//! transport.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, VerdictClass};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, ListFilter, NewItem, Request, Response,
    ScriptedTransport, SqliteStore, State, Store, Transport,
};
use serde_json::json;

use crate::support::{still, t0, StillStore, TokioClock};

/// Shopify's documented GraphQL throttle: 101 points asked, 40 available, 50 per second.
const THROTTLED: &str = r#"{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":101,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":40,"restoreRate":50.0}}}}"#;

const OUT_OF_QUOTA: &str = r#"{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","code":"insufficient_quota"}}"#;

fn answer(status: u16, body: &'static str) -> Response {
    Response::Http {
        status: http::StatusCode::from_u16(status).unwrap(),
        headers: http::HeaderMap::new(),
        body: bytes::Bytes::from_static(body.as_bytes()),
    }
}

type Ran = (
    StillStore<SqliteStore>,
    Arc<ScriptedTransport>,
    tempfile::TempDir,
);

const PROVIDER: &str = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 20.0
        concurrency = 2"#;

async fn run(
    n: usize,
    script: impl FnMut(&abide_outbox::Item, usize) -> Response + Send + 'static,
) -> Ran {
    run_with(PROVIDER, n, script).await
}

async fn run_with(
    toml: &str,
    n: usize,
    script: impl FnMut(&abide_outbox::Item, usize) -> Response + Send + 'static,
) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let store = StillStore::new(
        still(SqliteStore::open(dir.path().join("outbox.db")))
            .await
            .unwrap(),
    );
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let t = Arc::new(
        ScriptedTransport::new(dyn_clock.clone(), script).with_latency(Duration::from_millis(10)),
    );
    let config = Config::from_toml_str(toml).unwrap();
    let opts = DispatcherOptions {
        seed: Some(7),
        ..DispatcherOptions::default()
    };
    let tt = t.clone();
    let d = Dispatcher::with_transports(store.clone(), config, dyn_clock, opts, move |_| {
        let t: Arc<dyn Transport> = tt.clone();
        t
    })
    .unwrap();
    let items: Vec<_> = (0..n)
        .map(|i| {
            let req = Request::post_json("/graphql", json!({ "n": i }));
            NewItem::new("p", req).with_idempotency_key(format!("k{i}"))
        })
        .collect();
    d.enqueue(&items).await.unwrap();
    d.run_until_drained().await.unwrap();
    (store, t, dir)
}

async fn all(store: &StillStore<SqliteStore>) -> Vec<abide_outbox::Item> {
    store
        .list(&ListFilter {
            limit: 100,
            ..ListFilter::default()
        })
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_200_that_says_throttled_is_retried_not_submitted() {
    // Every item's first request is throttled with a 200; the second is accepted.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let (store, t, _dir) = run(10, move |item, _| {
        let n = seen.entry(item.idempotency_key.clone()).or_default();
        *n += 1;
        if *n == 1 {
            answer(200, THROTTLED)
        } else {
            answer(200, r#"{"data":{"ok":true}}"#)
        }
    })
    .await;
    let items = all(&store).await;
    assert_eq!(items.len(), 10);
    for it in &items {
        assert_eq!(it.state, State::Submitted, "{}", it.idempotency_key);
        assert_eq!(
            it.attempts, 2,
            "{}: throttled once, then delivered",
            it.idempotency_key
        );
        let attempts = store.attempts(&it.id).await.unwrap();
        let classes: Vec<_> = attempts.iter().map(|a| a.record.verdict_class).collect();
        assert_eq!(classes, [VerdictClass::Throttle, VerdictClass::Success]);
        // The body's cost model (61 points at 50 per second): about 1.2 s, never 0.
        let wait = attempts[0].record.delay.unwrap();
        assert!(wait >= Duration::from_millis(1200), "{wait:?}");
    }
    assert_eq!(
        t.sent().len(),
        20,
        "each item sent twice, none lost, none extra"
    );
}

#[tokio::test(start_paused = true)]
async fn out_of_quota_is_deferred_after_one_request_never_failed() {
    let (store, t, _dir) = run(5, |_, _| answer(429, OUT_OF_QUOTA)).await;
    let items = all(&store).await;
    assert_eq!(items.len(), 5);
    for it in &items {
        assert_eq!(it.state, State::Deferred, "{}", it.idempotency_key);
        assert_eq!(it.attempts, 1, "never retried on a timer");
        let reason = it.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("out of quota")
                && reason.contains("http_429_openai_insufficient_quota"),
            "{reason}"
        );
    }
    assert_eq!(t.sent().len(), 5);
}

/// A user's rule in the providers file: an API whose 200 says `"code": "BUSY"` is
/// throttling, its wait in `retry_after`.
const RULED: &str = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 20.0
        concurrency = 2
        [[provider.classify.body]]
        name = "busy"
        json = "/errors/0/extensions/code"
        equals = "BUSY"
        verdict = "throttle"
        delay_json = "/retry_after""#;

#[tokio::test(start_paused = true)]
async fn a_rule_in_the_providers_file_makes_a_200_a_throttle() {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let (store, t, _dir) = run_with(RULED, 4, move |item, _| {
        let n = seen.entry(item.idempotency_key.clone()).or_default();
        *n += 1;
        if *n == 1 {
            answer(
                200,
                r#"{"errors":[{"extensions":{"code":"BUSY"}}],"retry_after":"2.5s"}"#,
            )
        } else {
            answer(200, r#"{"data":{}}"#)
        }
    })
    .await;
    for it in all(&store).await {
        assert_eq!((it.state, it.attempts), (State::Submitted, 2));
        let attempts = store.attempts(&it.id).await.unwrap();
        assert_eq!(attempts[0].record.verdict_class, VerdictClass::Throttle);
        assert!(attempts[0].record.delay.unwrap() >= Duration::from_millis(2500));
    }
    assert_eq!(t.sent().len(), 8);
}

#[test]
fn a_bad_rule_is_refused_at_load_naming_provider_and_rule() {
    let bad = RULED.replace("\"/retry_after\"", "\"retry_after\"");
    let e = Config::from_toml_str(&bad).unwrap_err().to_string();
    assert!(e.contains("classify.body.busy.delay_json"), "{e}");
    assert!(e.contains("JSON pointer") && e.contains('p'), "{e}");
    let bad = RULED.replace("verdict = \"throttle\"", "verdict = \"slow\"");
    let e = Config::from_toml_str(&bad).unwrap_err().to_string();
    assert!(e.contains("slow") && e.contains("out_of_quota"), "{e}");
}
