//! `RedisGates` against the Redis on 127.0.0.1:6379: skipped (printing `SKIPPED:`) when it
//! is absent, unless `ABIDE_REQUIRE_SERVICES=1`.

#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used)]

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use abide_gate::{Algorithm, Gate, GateSet, RateQuota, RedisGates, Scope};

const URL: &str = "redis://127.0.0.1:6379";

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

/// Connect, or `None` after printing why the test is skipped.
async fn connect(gates: GateSet, test: &str) -> Option<(RedisGates, RedisGates)> {
    // A prefix of its own per run: other tests and engineers share this Redis.
    let prefix = format!("abide-test:{test}:{}", uuid_ish());
    let gates = Arc::new(gates);
    match RedisGates::connect(URL, Arc::clone(&gates), &prefix).await {
        Ok(a) => {
            let b = RedisGates::connect(URL, gates, &prefix).await.unwrap();
            Some((a, b))
        }
        Err(e) if std::env::var("ABIDE_REQUIRE_SERVICES").as_deref() != Ok("1") => {
            println!("SKIPPED: {test}: no Redis at {URL} ({e})");
            None
        }
        Err(e) => panic!("ABIDE_REQUIRE_SERVICES=1 but Redis at {URL} is unreachable: {e}"),
    }
}

fn uuid_ish() -> String {
    use std::hash::BuildHasher;
    format!(
        "{:016x}",
        std::hash::RandomState::new().hash_one(std::process::id())
    )
}

#[tokio::test]
async fn two_instances_share_one_rate_and_say_the_same_retry_after() {
    for (algorithm, retry_after) in [
        (Algorithm::Gcra, 720),
        (Algorithm::FixedWindow, 3600),
        (Algorithm::SlidingWindow, 4320),
    ] {
        let q = RateQuota::new(nz(5), Duration::from_secs(3600))
            .unwrap()
            .with_algorithm(algorithm);
        let gates = GateSet::builder()
            .with_gate(Gate::rate("key", "key_rate", Scope::Key, q))
            .build()
            .unwrap();
        let Some((a, b)) = connect(gates, algorithm.as_str()).await else {
            return;
        };
        let mut accepted = 0;
        for i in 0..20 {
            let node = if i % 2 == 0 { &a } else { &b };
            match node.check_traced("k", None, None).await.unwrap() {
                Ok(adm) => {
                    accepted += 1;
                    assert_eq!(adm.headers()["ratelimit-policy"], "\"key\";q=5;w=3600");
                    if algorithm == Algorithm::SlidingWindow {
                        // Units left: the window's end; none left: the refusal's wait.
                        let want = match 5 - accepted {
                            0 => "\"key\";r=0;t=4320".to_owned(),
                            r => format!("\"key\";r={r};t=3600"),
                        };
                        assert_eq!(adm.headers()["ratelimit"], want.as_str());
                    }
                }
                Err(rej) => {
                    assert_eq!(rej.category(), "key_rate");
                    assert_eq!(rej.retry_after_secs(), retry_after, "{algorithm}");
                    assert_eq!(
                        rej.headers()["retry-after"],
                        retry_after.to_string().as_str()
                    );
                }
            }
        }
        // One limit for both instances: the burst (5), not 5 each.
        assert_eq!(accepted, 5, "{algorithm}");
    }
}

#[tokio::test]
async fn shared_concurrency_reservations_are_idempotent_leases() {
    let gates = GateSet::builder()
        .with_gate(Gate::concurrency(
            "conc",
            "concurrency",
            Scope::Key,
            nz(1),
            Duration::from_secs(30),
        ))
        .build()
        .unwrap();
    let Some((a, b)) = connect(gates, "concurrency").await else {
        return;
    };
    // The same trace on two instances shares one slot; another trace is refused.
    let first = a.check_traced("k", None, Some("A")).await.unwrap().unwrap();
    let again = b.check_traced("k", None, Some("A")).await.unwrap().unwrap();
    let no = b
        .check_traced("k", None, Some("B"))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(no.category(), "concurrency");
    assert_eq!(no.retry_after_secs(), 1);
    // Releasing one holder keeps the slot for the other; then it is free.
    first.into_guard(a.clone()).release().await.unwrap();
    assert!(b.check_traced("k", None, Some("B")).await.unwrap().is_err());
    again.into_guard(b.clone()).release().await.unwrap();
    let c = b.check_traced("k", None, Some("B")).await.unwrap().unwrap();
    c.into_guard(b.clone()).release().await.unwrap();
}

/// One request per 10 s with a burst of 1, where up to `burst` more may wait: the few
/// milliseconds between calls are small beside the interval.
fn slow_delaying(burst: u32) -> GateSet {
    let q = RateQuota::new(nz(1), Duration::from_secs(10)).unwrap();
    let g =
        Gate::rate("key", "key_rate", Scope::Key, q).with_delay(nz(burst), Duration::from_secs(60));
    GateSet::builder().with_gate(g).build().unwrap()
}

/// Whether `d` is `k` intervals of 10 s, less the little time the test itself took.
fn about(d: Duration, k: u32) -> bool {
    let full = Duration::from_secs(10) * k;
    d <= full + Duration::from_micros(1) && d + Duration::from_secs(2) > full
}

#[tokio::test]
async fn the_delay_holds_across_two_instances_and_a_waiter_gives_its_slot_back() {
    let Some((a, b)) = connect(slow_delaying(2), "delay").await else {
        return;
    };
    let first = a.check_delayed("k", None, None).await.unwrap().unwrap();
    assert_eq!(first.delay(), Duration::ZERO);
    // B queues behind A's request, A behind B's: one schedule for both instances.
    let b1 = b.check_delayed("k", None, None).await.unwrap().unwrap();
    assert!(about(b1.delay(), 1), "{:?}", b1.delay());
    let a2 = a.check_delayed("k", None, None).await.unwrap().unwrap();
    assert!(about(a2.delay(), 2), "{:?}", a2.delay());
    // The bound (2 waiting) is reached on both; the refusal names the real wait (30 s).
    for s in [&a, &b] {
        let no = s.check_delayed("k", None, None).await.unwrap().unwrap_err();
        assert!(
            no.retry_after_secs() >= 30 && about(no.wait(), 3),
            "{:?}",
            no.wait()
        );
        // The refusing decision refuses as before.
        assert!(s.check_traced("k", None, None).await.unwrap().is_err());
    }
    // B's waiter goes away: its 10 s slot is a hole, and the next request (on A) takes it.
    b1.into_guard(b.clone()).release().await.unwrap();
    let next = a.check_delayed("k", None, None).await.unwrap().unwrap();
    assert!(about(next.delay(), 1), "{:?}", next.delay());
    let mut next = next.into_guard(a.clone());
    next.arrived();
    next.release().await.unwrap();
    // A's last waiter goes away: TAT moves back, and its 20 s slot goes to the next (on B).
    a2.into_guard(a.clone()).release().await.unwrap();
    let last = b.check_delayed("k", None, None).await.unwrap().unwrap();
    assert!(about(last.delay(), 2), "{:?}", last.delay());
    let _keep = (first, last);
    assert!(b.check_delayed("k", None, None).await.unwrap().is_err());
}
