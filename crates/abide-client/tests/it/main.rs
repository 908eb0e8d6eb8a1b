//! The driver against a scripted client, in virtual time (a `ManualClock` that the
//! `ManualSleeper` advances): what it does with each answer, without a network.

#![allow(clippy::unwrap_used)]

mod script;

use std::time::Duration;

use abide_client::{drive, StopReason};
use script::{clock, get, policy, Script};

const SECS: fn(u64) -> Duration = Duration::from_secs;

#[tokio::test]
async fn a_wait_that_would_end_at_the_maximum_age_stops_before_it_is_taken() {
    let clock = clock();
    let p = policy(&clock)
        .with_max_age(SECS(60))
        .with_max_wait(SECS(300))
        .build()
        .unwrap();
    let script = Script::new([(503, Some("60")), (200, None)]);
    let e = drive(&p, get(&p), script.clone()).await.unwrap_err();
    assert_eq!(e.reason, StopReason::MaxAge { max_age: SECS(60) }, "{e}");
    assert_eq!((e.attempts, script.sent()), (1, 1));
    // Stopped at once: the wait was not slept.
    assert_eq!(e.elapsed, Duration::ZERO);
}

#[tokio::test]
async fn a_wait_that_ends_before_the_maximum_age_is_taken() {
    let clock = clock();
    let p = policy(&clock)
        .with_max_age(SECS(60))
        .with_max_wait(SECS(300))
        .build()
        .unwrap();
    let script = Script::new([(503, Some("59")), (200, None)]);
    let (status, _) = drive(&p, get(&p), script.clone()).await.unwrap();
    assert_eq!((status.as_u16(), script.sent()), (200, 2));
}

#[tokio::test]
async fn a_wait_longer_than_max_wait_stops_naming_it() {
    let clock = clock();
    let p = policy(&clock).with_max_wait(SECS(30)).build().unwrap();
    let script = Script::new([(429, Some("31"))]);
    let e = drive(&p, get(&p), script.clone()).await.unwrap_err();
    assert!(
        matches!(e.reason, StopReason::WaitTooLong { wait, .. } if wait == SECS(31)),
        "{e}"
    );
    assert_eq!(script.sent(), 1);
}
