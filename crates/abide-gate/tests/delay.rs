//! Delaying gates through the public API: the decision with an injected clock, and the tower
//! layer under tokio's paused time.

#![allow(clippy::unwrap_used)]

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_gate::{BearerKeys, Gate, GateLayer, GateSet, RateQuota, Scope};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::Router;
use tower::ServiceExt;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
}

const T: Duration = Duration::from_millis(100);

/// 10/s with a quota burst of `burst`; with `delay`, requests over it may wait.
fn gates(burst: u32, delay: Option<(u32, Duration)>) -> Arc<GateSet> {
    let q = RateQuota::per_second(nz(10)).with_burst(nz(burst));
    let mut g = Gate::rate("key", "key_rate", Scope::Key, q);
    if let Some((n, max)) = delay {
        g = g.with_delay(nz(n), max);
    }
    Arc::new(GateSet::builder().with_gate(g).build().unwrap())
}

#[test]
fn only_a_gcra_gate_with_a_bounded_delay_builds() {
    let q = RateQuota::per_second(nz(10));
    let win = q.with_algorithm(abide_gate::Algorithm::FixedWindow);
    for (gate, ok) in [
        (
            Gate::rate("k", "k", Scope::Key, q).with_delay(nz(1), T),
            true,
        ),
        (
            Gate::rate("k", "k", Scope::Key, win).with_delay(nz(1), T),
            false,
        ),
        (
            Gate::rate("k", "k", Scope::Key, q).with_delay(nz(1), Duration::ZERO),
            false,
        ),
        (
            Gate::rate("k", "k", Scope::Key, q).with_delay(nz(1), Duration::from_secs(61)),
            false,
        ),
        (
            Gate::concurrency("c", "c", Scope::Key, nz(1), T).with_delay(nz(1), T),
            false,
        ),
    ] {
        assert_eq!(GateSet::builder().with_gate(gate).build().is_ok(), ok);
    }
}

#[test]
fn a_delayed_request_is_served_at_its_slot_never_before() {
    // The instants delayed requests are served at, replayed into a refusing gate, are each
    // admitted, and a delayed one a nanosecond earlier would be refused: served at the
    // slot, never before it, and not later either.
    let c = clock();
    let delaying = gates(2, Some((5, Duration::from_secs(1))));
    let t0 = c.monotonic();
    let mut served = Vec::new();
    let mut refused = 0;
    for step in 0..40u64 {
        // Bursts of four every 250 ms: 16/s against 10/s, so the queue fills and drains.
        let now = t0 + Duration::from_millis(step / 4 * 250);
        match delaying.check_delayed("k", None, None, now) {
            Ok(adm) => {
                let d = adm.delay();
                let mut guard = adm.into_guard(Arc::clone(&delaying));
                guard.arrived();
                served.push((now + d, !d.is_zero()));
            }
            Err(no) => {
                // Refused only past the bound (5 intervals), with Retry-After beyond it.
                assert!(no.wait() > 5 * T, "step {step}: {:?}", no.wait());
                assert!(Duration::from_secs(no.retry_after_secs()) >= no.wait());
                refused += 1;
            }
        }
    }
    let delayed = served.iter().filter(|(_, d)| *d).count();
    assert!(
        delayed > 10 && refused > 5,
        "{delayed} delayed, {refused} refused"
    );
    let replay = gates(2, None);
    for (i, (at, delayed)) in served.iter().enumerate() {
        if *delayed {
            let early = *at - Duration::from_nanos(1);
            assert!(
                replay.check("k", None, early).is_err(),
                "#{i} held too long"
            );
        }
        assert!(replay.check("k", None, *at).is_ok(), "#{i} served early");
    }
}

#[test]
fn past_the_burst_or_max_delay_a_request_is_refused_with_the_real_wait() {
    let c = clock();
    let now = c.monotonic();
    // Burst bound: 3 may wait (100, 200, 300 ms), the 4th (400 ms) is refused.
    let set = gates(1, Some((3, Duration::from_secs(5))));
    let mut held = Vec::new();
    for k in 0..4u32 {
        let adm = set.check_delayed("k", None, None, now).unwrap();
        assert_eq!(adm.delay(), T * k);
        held.push(adm.into_guard(Arc::clone(&set)));
    }
    let no = set.check_delayed("k", None, None, now).unwrap_err();
    assert_eq!(no.wait(), 4 * T);
    assert_eq!(no.retry_after_secs(), 1);
    assert_eq!(no.category(), "key_rate");
    // Time bound: at most 250 ms, so the 3rd over the rate (300 ms) is refused.
    let set = gates(1, Some((10, Duration::from_millis(250))));
    for k in 0..3u32 {
        let adm = set.check_delayed("k", None, None, now).unwrap();
        assert_eq!(adm.delay(), T * k);
        held.push(adm.into_guard(Arc::clone(&set)));
    }
    let no = set.check_delayed("k", None, None, now).unwrap_err();
    assert_eq!(no.wait(), 3 * T);
    assert!(Duration::from_secs(no.retry_after_secs()) >= no.wait());
    // The refusing decision still refuses at a delaying gate.
    assert!(set.check("other", None, now).is_ok());
    assert!(set.check("other", None, now).is_err());
}

#[test]
fn a_waiter_that_goes_away_frees_its_place_for_the_next() {
    let c = clock();
    let now = c.monotonic();
    let set = gates(1, Some((3, Duration::from_secs(5))));
    let first = set.check_delayed("k", None, None, now).unwrap();
    assert_eq!(first.delay(), Duration::ZERO);
    let mut w: Vec<_> = (1..=3u32)
        .map(|k| {
            let adm = set.check_delayed("k", None, None, now).unwrap();
            assert_eq!(adm.delay(), T * k);
            adm.into_guard(Arc::clone(&set))
        })
        .collect();
    assert!(set.check_delayed("k", None, None, now).is_err());
    // The middle waiter (200 ms) goes away: the next request takes its slot.
    let mut middle = w.remove(1);
    assert!(middle.waiting());
    middle.release();
    middle.release(); // idempotent: nothing more is given back
    drop(middle);
    let again = set.check_delayed("k", None, None, now).unwrap();
    assert_eq!(again.delay(), 2 * T);
    let again = again.into_guard(Arc::clone(&set));
    assert!(set.check_delayed("k", None, None, now).is_err());
    // The last one (300 ms) goes away: its slot is the next one's.
    drop(w.pop());
    let next = set.check_delayed("k", None, None, now).unwrap();
    assert_eq!(next.delay(), 3 * T);
    // Served waiters give nothing back when they end.
    let mut next = next.into_guard(Arc::clone(&set));
    next.arrived();
    drop(next);
    assert!(set.check_delayed("k", None, None, now).is_err());
    // Every waiter gone but the one served at 100 ms and the one at 200 ms: two slots back.
    drop(again);
    let later = set.check_delayed("k", None, None, now).unwrap();
    assert_eq!(later.delay(), 2 * T);
    drop(w);
    drop(first);
}

#[test]
fn an_account_queue_is_shared_by_its_keys_and_a_waiter_holds_its_concurrency_slot() {
    let c = clock();
    let now = c.monotonic();
    let q = RateQuota::per_second(nz(10)).with_burst(nz(1));
    let set = Arc::new(
        GateSet::builder()
            .with_gate(
                Gate::rate("account", "account_rate", Scope::Account, q)
                    .with_delay(nz(2), Duration::from_secs(1)),
            )
            .with_gate(Gate::concurrency(
                "conc",
                "concurrency",
                Scope::Key,
                nz(1),
                Duration::from_secs(30),
            ))
            .build()
            .unwrap(),
    );
    let a = set.check_delayed("k1", Some("acme"), None, now).unwrap();
    assert_eq!(a.delay(), Duration::ZERO);
    let a = a.into_guard(Arc::clone(&set));
    // k2 queues behind k1 in the account's schedule, and holds k2's one slot while it waits.
    let b = set.check_delayed("k2", Some("acme"), None, now).unwrap();
    assert_eq!(b.delay(), T);
    let b = b.into_guard(Arc::clone(&set));
    let no = set
        .check_delayed("k2", Some("acme"), None, now)
        .unwrap_err();
    assert_eq!(no.category(), "concurrency");
    // k3 takes the last waiting place (200 ms); a fourth request is past the bound.
    let k3 = set.check_delayed("k3", Some("acme"), None, now).unwrap();
    assert_eq!(k3.delay(), 2 * T);
    let no = set
        .check_delayed("k4", Some("acme"), None, now)
        .unwrap_err();
    assert_eq!(no.category(), "account_rate");
    // k2's waiter goes away: its slot at the account and its concurrency slot are free.
    drop(b);
    let b = set.check_delayed("k2", Some("acme"), None, now).unwrap();
    assert_eq!(b.delay(), T);
    drop((a, b, k3));
}

/// Monotonic time from tokio's clock, so paused time moves it.
#[derive(Debug)]
struct TokioTime;

impl Clock for TokioTime {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_750_000_000)
    }
    fn monotonic(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

struct App {
    router: Router,
    layer: GateLayer,
    served: Arc<Mutex<Vec<tokio::time::Instant>>>,
}

fn app(set: Arc<GateSet>) -> App {
    let keys = BearerKeys::new().with_key("k1", None);
    let layer = GateLayer::new(set, Arc::new(TokioTime), keys);
    let served = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&served);
    let router = Router::new()
        .route(
            "/ok",
            get(move || {
                s.lock().unwrap().push(tokio::time::Instant::now());
                async { "ok" }
            }),
        )
        .layer(layer.clone());
    App {
        router,
        layer,
        served,
    }
}

fn req() -> Request<Body> {
    Request::get("/ok")
        .header("authorization", "Bearer k1")
        .body(Body::empty())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_layer_holds_requests_until_their_slot_and_refuses_past_the_bound() {
    let a = app(gates(1, Some((5, Duration::from_secs(1)))));
    let t0 = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| tokio::spawn(a.router.clone().oneshot(req())))
        .collect();
    let mut codes = Vec::new();
    for t in tasks {
        let res = t.await.unwrap().unwrap();
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(res.headers().contains_key("retry-after"));
        }
        codes.push(res.status());
    }
    let ok = codes.iter().filter(|c| **c == StatusCode::OK).count();
    assert_eq!((ok, codes.len() - ok), (6, 2));
    let mut served = a.served.lock().unwrap().clone();
    served.sort();
    for (k, at) in served.iter().enumerate() {
        assert_eq!(*at - t0, T * k as u32, "request {k}");
    }
    let m = a.layer.metrics().snapshot();
    assert_eq!((m.admitted, m.delayed, m.abandoned), (6, 5, 0));
    // 100 + 200 + 300 + 400 + 500 ms held.
    assert_eq!(m.delay_us, 1_500_000);
    assert_eq!(m.rejected_by_category.get("key_rate"), Some(&2));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_disconnects_while_held_frees_its_place() {
    let a = app(gates(1, Some((1, Duration::from_secs(1)))));
    let t0 = tokio::time::Instant::now();
    assert_eq!(
        a.router.clone().oneshot(req()).await.unwrap().status(),
        StatusCode::OK
    );
    // One waits (the burst of 1); a third is refused.
    let mut waiter = Box::pin(a.router.clone().oneshot(req()));
    assert!(futures::poll!(&mut waiter).is_pending());
    let res = a.router.clone().oneshot(req()).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    // The waiter disconnects: the next request takes its place at 100 ms.
    drop(waiter);
    let res = a.router.clone().oneshot(req()).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(tokio::time::Instant::now() - t0, T);
    let m = a.layer.metrics().snapshot();
    assert_eq!((m.delayed, m.abandoned), (1, 1));
    assert_eq!(a.served.lock().unwrap().len(), 2);
}
