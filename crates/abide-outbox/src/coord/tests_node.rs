//! Whole nodes: [`RedisCoordination`] instances sharing one Redis on 127.0.0.1:6379 (skipped
//! with `SKIPPED:` when it is absent, failing under `ABIDE_REQUIRE_SERVICES=1`), and the
//! fallback with Redis unreachable (a closed port).

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{
    Classifier, Clock, Coordination, CoordinationMode, ManualClock, Observation, Pacer,
    PacerConfig, Reservation, RetryBudget, RetryBudgetConfig, SystemClock,
};

use super::tests::{connect, prefix};
use super::*;

const URL: &str = "redis://127.0.0.1:6379";

fn pacer(rate: f64, clock: &dyn Clock) -> Pacer {
    Pacer::new(
        PacerConfig {
            initial_rate: rate,
            ..PacerConfig::default()
        },
        clock.monotonic(),
    )
}

fn budget_cfg() -> RetryBudgetConfig {
    RetryBudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec: 0,
        retry_ratio: 0.0,
    }
}

fn start(url: &str, prefix: &str, node: &str, clock: Arc<dyn Clock>) -> RedisCoordination {
    let target = CoordinationTarget {
        url: url.into(),
        prefix: prefix.into(),
        node: node.into(),
        expected_nodes: 1,
    };
    RedisCoordination::start(&target, "sms", 50.0, 1.0, budget_cfg(), clock).unwrap()
}

/// Poll `done` every 10 ms, at most 3 s (bounded; not a timing assertion).
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..300 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

#[tokio::test]
async fn a_throttle_on_one_node_pauses_the_other_and_its_decrease_is_adopted() {
    if connect("nodes").await.is_none() {
        return;
    }
    let key = prefix("nodes");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (a, b) = (
        start(URL, &key, "a", Arc::clone(&clock)),
        start(URL, &key, "b", Arc::clone(&clock)),
    );
    let (pa, pb) = (pacer(50.0, &*clock), pacer(50.0, &*clock));
    // Both get shared slots once joined.
    let slot = |c: &RedisCoordination, p: &Pacer| {
        matches!(c.reserve(p, clock.monotonic(), None), Reservation::Slot(_))
    };
    assert!(eventually(|| slot(&a, &pa) && slot(&b, &pb)).await);
    assert_eq!(
        a.status(&pa, clock.monotonic()).mode,
        CoordinationMode::Redis
    );
    assert!(eventually(|| b.status(&pb, clock.monotonic()).nodes == 2).await);
    // Node a hears a 429 with Retry-After: 30.
    let headers = http::HeaderMap::from_iter([(http::header::RETRY_AFTER, "30".parse().unwrap())]);
    let obs = Observation::Http {
        status: http::StatusCode::TOO_MANY_REQUESTS,
        headers: &headers,
        body: b"",
    };
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
    let v = Classifier::default().classify(&obs, clock.now(), &mut rng);
    pa.on_verdict(clock.monotonic(), &v);
    a.push(&pa, clock.monotonic());
    let paused = || {
        b.pull(&pb, clock.monotonic());
        pb.paused_until(clock.monotonic())
            .is_some_and(|u| u > clock.monotonic() + Duration::from_secs(25))
    };
    assert!(
        eventually(paused).await,
        "b paused until a's Retry-After ends"
    );
    // A decrease a made reaches b's pacer.
    let before = pb.rate();
    pa.adopt_shared(clock.monotonic(), 10.0, Some(11.0)); // stand-in for a's own cut:
    a.view().pending_decrease = Some((10.0, Some(11.0)));
    a.shared.wake.notify_one();
    let adopted = || {
        b.pull(&pb, clock.monotonic());
        pb.rate() < before
    };
    assert!(eventually(adopted).await);
    assert_eq!(pb.rate(), 10.0);
    assert_eq!(pb.ceiling(), Some(11.0));
}

#[tokio::test]
async fn redis_unreachable_falls_back_to_a_bounded_share_never_unlimited() {
    // Port 1 on loopback: nothing listens there.
    let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
    let c = start(
        "redis://127.0.0.1:1",
        &prefix("down"),
        "a",
        clock.clone() as Arc<dyn Clock>,
    );
    let p = pacer(10.0, &*clock);
    assert!(
        eventually(|| c.status(&p, clock.monotonic()).mode == CoordinationMode::Fallback).await
    );
    let t0 = clock.monotonic();
    let slots: Vec<_> = (0..5)
        .map(|_| match c.reserve(&p, t0, None) {
            Reservation::Slot(at) => at - t0,
            r => panic!("{r:?}"),
        })
        .collect();
    let ms = Duration::from_millis;
    assert_eq!(slots, [ms(0), ms(100), ms(200), ms(300), ms(400)]);
    // The last node count seen divides the rate: three nodes, a third each.
    c.view().nodes = 3;
    c.view().fallback_tat = None;
    let t1 = t0 + Duration::from_secs(10);
    let a = c.reserve(&p, t1, None);
    let b = c.reserve(&p, t1, None);
    assert_eq!(
        (a, b),
        (Reservation::Slot(t1), Reservation::Slot(t1 + ms(300)))
    );
    // Its own retry budget, bounded (no floor, no ratio here: nothing).
    let budget = RetryBudget::new(budget_cfg(), t0);
    assert!(!c.try_withdraw(&budget, t0));
    // The URL never shows a password.
    let secret = start(
        "redis://:hunter2@127.0.0.1:1",
        &prefix("down"),
        "b",
        clock.clone() as Arc<dyn Clock>,
    );
    assert!(!format!("{secret:?}").contains("hunter2"));
    assert!(!secret.shown_url().contains("hunter2"));
}

#[test]
fn a_node_takes_only_fresh_slots_outside_a_pause_and_asks_by_its_share() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let ms = Duration::from_millis;
    let mut v = View::new(90.0, t0, 1);
    v.nodes = 3;
    assert_eq!(v.batch(), 0, "no demand, no slots");
    v.starved = 1;
    // 90/s over 3 nodes: 30/s each, 200 ms of it.
    assert_eq!(v.batch(), 6);
    v.slots
        .extend([t0, t0 + ms(10), t0 + ms(500), t0 + ms(900)]);
    let now = t0 + ms(300);
    // Stale (more than 25 ms past: a burst if used) slots are dropped; those inside a
    // pause too.
    assert_eq!(v.take_slot(now, Some(t0 + ms(600))), Some(t0 + ms(900)));
    assert_eq!(v.take_slot(now, None), None);
}

#[test]
fn falling_back_starts_after_the_shared_slots_already_handed_out() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let ms = Duration::from_millis;
    let mut v = View::new(30.0, t0, 1);
    v.nodes = 3;
    v.slots.extend([t0 + ms(100), t0 + ms(400)]);
    assert_eq!(v.take_slot(t0, None), Some(t0 + ms(100)));
    assert_eq!(v.take_slot(t0, None), Some(t0 + ms(400)));
    // Redis goes away with senders waiting on both: the fallback share (10/s) follows
    // them instead of sending beside them.
    v.mode = CoordinationMode::Fallback;
    assert_eq!(v.fallback_slot(t0, 30.0, None), t0 + ms(500));
    assert_eq!(v.fallback_slot(t0, 30.0, None), t0 + ms(600));
}
