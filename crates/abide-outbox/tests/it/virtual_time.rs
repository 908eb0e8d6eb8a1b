//! The dispatcher in virtual time: tokio's paused clock, a real SQLite file held still
//! while it works (`support::StillStore`), and a scripted transport. Minutes of schedule
//! run in milliseconds and every send time is exact.

use std::collections::HashMap;
use std::future::pending;
use std::sync::Arc;
use std::time::{Duration, Instant};

use abide_core::Clock;
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, ListFilter, NewItem, Request, Response,
    ScriptedTransport, SqliteStore, State, Store, Transport,
};
use serde_json::json;

use crate::support::{still, t0, StillStore, TokioClock};

type Vt = StillStore<SqliteStore>;

async fn store(dir: &tempfile::TempDir) -> Vt {
    StillStore::new(
        still(SqliteStore::open(dir.path().join("outbox.db")))
            .await
            .unwrap(),
    )
}

fn items(provider: &str, n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| {
            let req = Request::post_json("/v1/messages", json!({ "n": i }));
            NewItem::new(provider, req).with_idempotency_key(format!("{provider}-{i}"))
        })
        .collect()
}

fn opts() -> DispatcherOptions {
    DispatcherOptions {
        seed: Some(7),
        ..DispatcherOptions::default()
    }
}

fn dispatcher(
    store: Vt,
    toml: &str,
    clock: &Arc<TokioClock>,
    transports: &HashMap<&str, Arc<ScriptedTransport>>,
) -> Dispatcher<Vt> {
    dispatcher_with(store, toml, clock, transports, opts())
}

/// [`dispatcher`] with other options.
fn dispatcher_with(
    store: Vt,
    toml: &str,
    clock: &Arc<TokioClock>,
    transports: &HashMap<&str, Arc<ScriptedTransport>>,
    opts: DispatcherOptions,
) -> Dispatcher<Vt> {
    let config = Config::from_toml_str(toml).unwrap();
    let clock: Arc<dyn Clock> = clock.clone();
    Dispatcher::with_transports(store, config, clock, opts, |p| {
        let t: Arc<dyn Transport> = transports[p.name.as_str()].clone();
        t
    })
    .unwrap()
}

fn scripted(
    clock: &Arc<TokioClock>,
    script: impl FnMut(&abide_outbox::Item, usize) -> Response + Send + 'static,
) -> Arc<ScriptedTransport> {
    let clock: Arc<dyn Clock> = clock.clone();
    Arc::new(ScriptedTransport::new(clock, script).with_latency(Duration::from_millis(10)))
}

#[tokio::test(start_paused = true)]
async fn a_throttle_pauses_every_sender_until_its_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let t = scripted(&clock, |_, n| {
        if n == 5 {
            Response::with_headers(429, &[("retry-after", "10")])
        } else {
            Response::status(202)
        }
    });
    let toml = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 50.0
        concurrency = 4"#;
    let d = dispatcher(
        store(&dir).await,
        toml,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    d.enqueue(&items("p", 40)).await.unwrap();
    let report = d.run_until_drained().await.unwrap();

    assert_eq!(report.counts.get(State::Submitted), 40);
    let sent = t.sent();
    assert_eq!(sent.len(), 41, "one retry for the one throttle");
    let answered = sent[5].at + Duration::from_millis(10);
    let after: Vec<Instant> = sent
        .iter()
        .map(|s| s.at)
        .filter(|at| *at > answered)
        .collect();
    assert!(!after.is_empty());
    for at in after {
        assert!(
            at >= answered + Duration::from_secs(10),
            "a send {:?} after the throttle, inside its 10 s pause",
            at - answered
        );
    }
    // The throttled item carries the same key on its retry.
    let key = &sent[5].idempotency_key;
    assert_eq!(sent.iter().filter(|s| &s.idempotency_key == key).count(), 2);
}

#[tokio::test(start_paused = true)]
async fn pending_items_fail_over_after_the_configured_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let start = clock.monotonic();
    let down = scripted(&clock, |_, _| {
        Response::with_headers(503, &[("retry-after", "5")])
    });
    let backup = scripted(&clock, |_, _| Response::status(202));
    let toml = r#"[[provider]]
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
    let transports = HashMap::from([("a", down.clone()), ("b", backup.clone())]);
    let d = dispatcher(store(&dir).await, toml, &clock, &transports);
    d.enqueue(&items("a", 10)).await.unwrap();
    let report = d.run_until_drained().await.unwrap();

    assert_eq!(report.counts.get(State::Submitted), 10);
    let moved = backup.sent();
    assert_eq!(moved.len(), 10, "each item once at the backup");
    for s in &moved {
        let waited = s.at - start;
        assert!(
            waited >= Duration::from_secs(30) && waited < Duration::from_secs(40),
            "moved after {waited:?}"
        );
    }
    // Every answer from `a` paused it for 5 s: a handful of requests in 30 s, not the pace.
    let tried = down.sent().len();
    assert!(
        (1..=24).contains(&tried),
        "{tried} requests to the provider that was down"
    );
}

#[tokio::test(start_paused = true)]
async fn a_crashed_sender_s_items_are_resent_after_the_lease_with_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let start = clock.monotonic();
    let toml = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        concurrency = 4"#;
    // The first run's requests never come back; the run is then killed.
    let hung = {
        let c: Arc<dyn Clock> = clock.clone();
        Arc::new(
            ScriptedTransport::new(c, |_, _| Response::status(202))
                .with_latency(Duration::from_secs(3600)),
        )
    };
    let store = store(&dir).await;
    let first = dispatcher(
        store.clone(),
        toml,
        &clock,
        &HashMap::from([("p", hung.clone())]),
    );
    first.enqueue(&items("p", 8)).await.unwrap();
    let run = tokio::spawn(async move { first.run_until(pending()).await });
    tokio::time::sleep(Duration::from_secs(5)).await;
    run.abort();
    let _ = run.await;
    assert_eq!(
        hung.sent().len(),
        4,
        "one request per sender was on the wire"
    );
    assert!(
        store
            .counts_by_state(None)
            .await
            .unwrap()
            .get(State::InFlight)
            > 0
    );

    let t = scripted(&clock, |_, _| Response::status(202));
    let second = dispatcher(
        store.clone(),
        toml,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    let report = second.run_until_drained().await.unwrap();
    assert_eq!(report.counts.get(State::Submitted), 8);
    let lease = DispatcherOptions::default().lease;
    for lost in hung.sent() {
        let again: Vec<_> = t
            .sent()
            .into_iter()
            .filter(|s| s.idempotency_key == lost.idempotency_key)
            .collect();
        assert_eq!(again.len(), 1, "{} resent once", lost.idempotency_key);
        assert!(
            again[0].at - start >= lease,
            "resent {:?} after the start, before its lease ended",
            again[0].at - start
        );
    }
    // An attempt is a request on the wire: the items the dead run claimed and never sent
    // cost nothing; the ones it sent cost one each, their answers never recorded.
    let all = store
        .list(&ListFilter {
            limit: 100,
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 8);
    for it in all {
        let requests = hung
            .sent()
            .into_iter()
            .chain(t.sent())
            .filter(|s| s.idempotency_key == it.idempotency_key)
            .count();
        assert_eq!(it.attempts as usize, requests, "{}", it.idempotency_key);
        assert_eq!(it.window_attempts, it.attempts);
    }
}

#[tokio::test(start_paused = true)]
async fn retries_the_budget_refuses_wait_and_are_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let mut seen: HashMap<String, u32> = HashMap::new();
    // Every item's first two requests fail (a successful retry is refunded, so only
    // failing retries can exhaust the budget); the third succeeds.
    let t = scripted(&clock, move |item, _| {
        let n = seen.entry(item.id.clone()).or_default();
        *n += 1;
        if *n <= 2 {
            Response::status(503)
        } else {
            Response::status(202)
        }
    });
    let toml = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 100.0
        concurrency = 8
        [provider.budget]
        min_per_sec = 1
        retry_ratio = 0.0"#;
    let d = dispatcher(
        store(&dir).await,
        toml,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    d.enqueue(&items("p", 30)).await.unwrap();
    let report = d.run_until_drained().await.unwrap();

    assert_eq!(report.counts.get(State::Submitted), 30, "nothing lost");
    assert!(report.totals.budget_denied > 0, "{:?}", report.totals);
    assert_eq!(t.sent().len(), 90, "a refused retry is not a request");
    // The failing retries (each item's second request) may spend at most the floor,
    // 1/s over the budget's 10 s window (+ the current bucket): 11 in any 10 s.
    let mut count: HashMap<String, u32> = HashMap::new();
    let failing: Vec<Instant> = t
        .sent()
        .into_iter()
        .filter(|s| {
            let n = count.entry(s.id.clone()).or_default();
            *n += 1;
            *n == 2
        })
        .map(|s| s.at)
        .collect();
    assert_eq!(failing.len(), 30);
    for (i, at) in failing.iter().enumerate() {
        let within = failing[i..]
            .iter()
            .take_while(|b| **b < *at + Duration::from_secs(10))
            .count();
        assert!(within <= 11, "{within} failing retries within 10 s");
    }
}

#[tokio::test(start_paused = true)]
async fn a_provider_down_for_ten_seconds_sees_a_handful_of_connection_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let start = clock.monotonic();
    let down_until = start + Duration::from_secs(10);
    let c = clock.clone();
    let t = scripted(&clock, move |_, _| {
        if c.monotonic() < down_until {
            Response::Transport(abide_core::TransportFailure::Connect)
        } else {
            Response::status(202)
        }
    });
    let toml = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 100.0
        concurrency = 8"#;
    let d = dispatcher(
        store(&dir).await,
        toml,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    d.enqueue(&items("p", 200)).await.unwrap();
    let report = d.run_until_drained().await.unwrap();

    assert_eq!(report.counts.get(State::Submitted), 200, "nothing lost");
    let during = t.sent().iter().filter(|s| s.at < down_until).count();
    // The 8 sent at once, then one probe per pause (1, 2, 4, 8 s): not 100/s × 10 s.
    assert!(
        during <= 16,
        "{during} connection attempts during a 10 s outage"
    );
    assert_eq!(report.totals.transport_failures as usize, during);
}

/// A fault injected from the transport's script: results stop being written at the
/// `from`-th request and work again at the `to`-th (never, with `usize::MAX`).
fn faulty(clock: &Arc<TokioClock>, store: &Vt, from: usize, to: usize) -> Arc<ScriptedTransport> {
    let s = store.clone();
    scripted(clock, move |_, n| {
        if n == from {
            s.fail_writes(true);
        }
        if n == to {
            s.fail_writes(false);
        }
        Response::status(202)
    })
}

const ONE_SENDER: &str = r#"[[provider]]
    name = "p"
    base_url = "http://127.0.0.1:9"
    rate_hint = 100.0
    concurrency = 4"#;

#[tokio::test(start_paused = true)]
async fn a_short_store_fault_pauses_sending_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let store = store(&dir).await;
    let t = faulty(&clock, &store, 20, usize::MAX);
    let d = dispatcher(
        store.clone(),
        ONE_SENDER,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    d.enqueue(&items("p", 100)).await.unwrap();
    let run = {
        let d = d.clone();
        tokio::spawn(async move { d.run_until_drained().await })
    };
    // Let the fault last 5 s of virtual time, then free the "disk".
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = t.sent().len();
    assert!(
        during <= 20 + 4,
        "{during} sent while results could not be written"
    );
    store.fail_writes(false);
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.counts.get(State::Submitted), 100);
    assert_eq!(
        t.sent().len(),
        100,
        "no duplicate: every answer was recorded in the end"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lasting_store_fault_stops_the_run_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let start = clock.monotonic();
    let store = store(&dir).await;
    let t = faulty(&clock, &store, 20, usize::MAX);
    let d = dispatcher(
        store.clone(),
        ONE_SENDER,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    d.enqueue(&items("p", 100)).await.unwrap();
    let err = d.run_until_drained().await.unwrap_err();
    assert!(
        matches!(err, abide_outbox::Error::ResultsNotRecorded { seconds, .. } if seconds >= 60),
        "{err}"
    );
    assert!(err.to_string().contains("disk is full"), "{err}");
    let stopped = clock.monotonic() - start;
    assert!(
        stopped < Duration::from_secs(75),
        "stopped after {stopped:?}"
    );
    assert!(t.sent().len() <= 20 + 4, "{} sent in all", t.sent().len());
    // Every item is in a known state: nothing lost, the unrecorded ones still leased.
    store.fail_writes(false);
    let counts = store.counts_by_state(None).await.unwrap();
    assert_eq!(counts.total(), 100);
}

/// A provider that advertises 3 requests in flight (IETF `RateLimit-Policy` without a
/// window): once its first answer is in, the dispatcher's 8 senders never have more than 3
/// requests on the wire, though the pace (500/s) would allow 25 in 50 ms.
#[tokio::test(start_paused = true)]
async fn the_senders_never_exceed_an_advertised_concurrency_quota() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let latency = Duration::from_millis(50);
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let t = Arc::new(
        ScriptedTransport::new(dyn_clock, |_, _| {
            Response::with_headers(
                202,
                &[
                    ("ratelimit-policy", r#""key";q=1000;w=1, "conc";q=3"#),
                    ("ratelimit", r#""key";r=900;t=1, "conc";r=1;t=0"#),
                ],
            )
        })
        .with_latency(latency),
    );
    let toml = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 500.0
        concurrency = 8"#;
    let d = dispatcher(
        store(&dir).await,
        toml,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    d.enqueue(&items("p", 60)).await.unwrap();
    let report = d.run_until_drained().await.unwrap();
    assert_eq!(report.counts.get(State::Submitted), 60);

    let sent: Vec<Instant> = t.sent().iter().map(|s| s.at).collect();
    assert_eq!(sent.len(), 60);
    // Requests on the wire when each was sent (itself included; answers take `latency`).
    let on_wire = |at: Instant| {
        sent.iter()
            .filter(|s| **s <= at && **s + latency > at)
            .count()
    };
    let first_answer = sent[0] + latency;
    let before = sent
        .iter()
        .filter(|s| **s < first_answer)
        .map(|s| on_wire(*s))
        .max();
    assert!(
        before > Some(3),
        "unlimited before the quota is known: {before:?}"
    );
    for s in sent.iter().filter(|s| **s >= first_answer) {
        assert!(
            on_wire(*s) <= 3,
            "{} on the wire at {:?}",
            on_wire(*s),
            *s - sent[0]
        );
    }
    let p = &d.progress().await.unwrap().providers[0];
    assert_eq!(p.host_in_flight.limit, Some(3));
    assert!(p.host_in_flight.held_sends > 0);
}

/// Items enqueued while the dispatcher runs (as `abide send` enqueues while it delivers,
/// or `serve` takes them from its API) go out at once: the enqueue wakes the claimer that
/// found nothing, which would otherwise sleep out its idle poll.
#[tokio::test(start_paused = true)]
async fn items_enqueued_while_running_are_claimed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let t = scripted(&clock, |_, _| Response::status(202));
    let toml = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 100.0
        concurrency = 4"#;
    let d = dispatcher_with(
        store(&dir).await,
        toml,
        &clock,
        &HashMap::from([("p", t.clone())]),
        DispatcherOptions {
            // Far longer than the test: only the wake can explain a prompt claim.
            idle_poll: Duration::from_secs(3600),
            ..opts()
        },
    );
    let runner = d.clone();
    let run = tokio::spawn(async move { runner.run_until(pending()).await });
    // The claimer has looked, found nothing, and gone to sleep.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(t.sent().is_empty());
    let enqueued_at = clock.monotonic();
    d.enqueue(&items("p", 3)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.abort();
    let _ = run.await;
    let sent = t.sent();
    assert_eq!(sent.len(), 3, "every item enqueued while running was sent");
    let first = sent[0].at - enqueued_at;
    assert!(
        first < Duration::from_millis(100),
        "first send {first:?} after the enqueue"
    );
}

/// A drained run ends only once its feed is complete and nothing of a configured
/// provider is left (whatever waits for a provider the file does not name does not keep
/// it running), and a broken feed stops it.
#[tokio::test(start_paused = true)]
async fn a_drained_run_waits_for_its_feed_and_stops_when_the_feed_breaks() {
    use abide_outbox::{Ending, Feed};
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TokioClock::new(t0()));
    let t = scripted(&clock, |_, _| Response::status(202));
    let toml = r#"[[provider]]
        name = "p"
        base_url = "http://127.0.0.1:9"
        rate_hint = 100.0"#;
    let d = dispatcher(
        store(&dir).await,
        toml,
        &clock,
        &HashMap::from([("p", t.clone())]),
    );
    // Not configured here: never sent by this run, and not waited for.
    d.store()
        .enqueue(&items("elsewhere", 3), t0())
        .await
        .unwrap();
    assert!(d.is_drained().await.unwrap());
    d.enqueue(&items("p", 5)).await.unwrap();
    assert!(!d.is_drained().await.unwrap());

    let (closer, feed) = Feed::open();
    let later = {
        let d = d.clone();
        async move {
            // The first items are long delivered before the rest comes in.
            tokio::time::sleep(Duration::from_secs(30)).await;
            let more: Vec<NewItem> = items("p", 10).split_off(5);
            d.enqueue(&more).await.unwrap();
            closer.complete();
        }
    };
    let run = d.run_drained(feed, Duration::ZERO, pending());
    let ((p, ending), ()) = tokio::join!(async { run.await.unwrap() }, later);
    assert_eq!(ending, Ending::Drained);
    assert_eq!(p.counts.get(State::Submitted), 10);
    assert_eq!(t.sent().len(), 10);
    assert!(d.is_drained().await.unwrap());
    assert_eq!(d.store().counts_by_state(None).await.unwrap().queued, 3);

    // Enqueueing failed (its closer dropped unclosed): the run stops at once.
    let (closer, feed) = Feed::open();
    drop(closer);
    let (_, ending) = d
        .run_drained(feed, Duration::ZERO, pending())
        .await
        .unwrap();
    assert_eq!(ending, Ending::InputFailed);
    // And one asked to stop says so.
    let (_, ending) = d
        .run_drained(Feed::complete(), Duration::from_secs(60), async {})
        .await
        .unwrap();
    assert_eq!(ending, Ending::Stopped);
}
