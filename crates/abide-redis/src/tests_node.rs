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

/// Two nodes started at the same instant on a shared estimate left by earlier nodes (none
/// alive): both start from it, and what they publish keeps one rate and one ceiling. The
/// first to sync saw itself alone and kept its own cold-start search, whose rate (and
/// ceiling `None`) then overwrote the shared ones turn about with the other node's.
#[tokio::test]
async fn nodes_joining_at_once_on_a_shared_estimate_all_start_from_it() {
    let Some(mut conn) = connect("at-once").await else {
        return;
    };
    let key = prefix("at-once");
    let _: () = redis::cmd("HSET")
        .arg(format!("{key}:sms:state"))
        .arg(&["tat", "0", "dseq", "3", "rate", "9.4", "ceil", "9.9"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (a, b) = (
        start(URL, &key, "a", Arc::clone(&clock)),
        start(URL, &key, "b", Arc::clone(&clock)),
    );
    let (pa, pb) = (pacer(50.0, &*clock), pacer(50.0, &*clock));
    // As a session does: pull, then reserve, until each has a shared slot.
    let slot = |c: &RedisCoordination, p: &Pacer| {
        c.pull(p, clock.monotonic());
        matches!(c.reserve(p, clock.monotonic(), None), Reservation::Slot(_))
    };
    assert!(eventually(|| slot(&a, &pa)).await);
    assert!(eventually(|| slot(&b, &pb)).await);
    for (name, p) in [("a", &pa), ("b", &pb)] {
        assert_eq!((p.rate(), p.ceiling()), (9.4, Some(9.9)), "node {name}");
    }
    // Both have had answers and publish: the shared estimate stays the one they took.
    a.push(&pa, clock.monotonic());
    b.push(&pb, clock.monotonic());
    let synced = |c: &RedisCoordination, p: &Pacer| {
        let st = c.status(p, clock.monotonic());
        st.nodes == 2 && st.peers.len() == 2
    };
    assert!(eventually(|| synced(&a, &pa) && synced(&b, &pb)).await);
    for _ in 0..3 {
        a.shared.wake.notify_one();
        b.shared.wake.notify_one();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (rate, ceil): (String, String) = redis::cmd("HMGET")
            .arg(format!("{key}:sms:state"))
            .arg(&["rate", "ceil"])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!((rate.as_str(), ceil.as_str()), ("9.4", "9.9"));
    }
}

#[tokio::test]
async fn a_push_before_the_pull_does_not_overwrite_the_estimate_being_adopted() {
    let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
    let c = start(
        "redis://127.0.0.1:1",
        &prefix("adopt"),
        "a",
        clock.clone() as Arc<dyn Clock>,
    );
    let p = pacer(50.0, &*clock);
    // The join took the shared estimate; an answer comes back before any pull.
    c.view().take_decrease(9.4, Some(9.9));
    c.push(&p, clock.monotonic());
    let published = |c: &RedisCoordination| {
        let v = c.view();
        (v.rate, v.ceiling)
    };
    assert_eq!(published(&c), (9.4, Some(9.9)));
    assert!(c.view().pending_decrease.is_none());
    // Pulled, the pacer's own numbers are the estimate's again.
    c.pull(&p, clock.monotonic());
    assert_eq!((p.rate(), p.ceiling()), (9.4, Some(9.9)));
    c.push(&p, clock.monotonic());
    assert_eq!(published(&c), (9.4, Some(9.9)));
}
