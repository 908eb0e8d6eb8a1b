//! The driver against a scripted client, in virtual time (a `ManualClock` that the
//! `ManualSleeper` advances): what it does with each answer, without a network.

#![allow(clippy::unwrap_used)]

mod bodies;
mod script;

use std::time::Duration;

use abide_client::{drive, CoordinationConfig, StopReason};
use abide_core::CoordinationMode;
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

#[tokio::test]
async fn a_request_s_own_max_wait_replaces_the_policy_s() {
    let clock = clock();
    let p = policy(&clock).with_max_wait(SECS(30)).build().unwrap();
    // Shorter than the policy's: the 20 s wait is refused, naming the request's budget.
    let script = Script::new([(429, Some("20")), (200, None)]);
    let e = drive(&p, get(&p).with_max_wait(SECS(5)), script.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(e.reason, StopReason::WaitTooLong { max_wait, .. } if max_wait == SECS(5)),
        "{e}"
    );
    assert_eq!(script.sent(), 1);
    // Longer than the policy's: a 40 s wait is taken.
    let p = policy(&clock).with_max_wait(SECS(30)).build().unwrap();
    let script = Script::new([(429, Some("40")), (200, None)]);
    let (status, _) = drive(&p, get(&p).with_max_wait(SECS(50)), script.clone())
        .await
        .unwrap();
    assert_eq!((status.as_u16(), script.sent()), (200, 2));
}

#[tokio::test]
async fn coordination_without_a_redis_url_keeps_hosts_local_and_a_bad_url_is_refused() {
    let clock = clock();
    let p = policy(&clock)
        .with_coordination(&CoordinationConfig::default())
        .build()
        .unwrap();
    let out = get(&p);
    let key = out.key.clone();
    assert!(p.coordination_status(&key).is_none(), "no request yet");
    drive(&p, out, Script::new([(200, None)])).await.unwrap();
    assert_eq!(
        p.coordination_status(&key).unwrap().mode,
        CoordinationMode::Local
    );
    let url = "redis://:PASS@127.0.0.1:99999999";
    let bad = CoordinationConfig::new(Some(url.into()), None, None).unwrap();
    let e = policy(&clock).with_coordination(&bad).build().unwrap_err();
    assert_eq!(e.setting, "redis_url");
    assert!(!e.to_string().contains("PASS"), "{e}");
}

/// The builder checks with the session's own validator, so a setting that has no builder
/// method of its own (set through `with_session_config`) is refused too, by its path.
#[test]
fn every_session_setting_is_checked_by_the_one_validator() {
    let clock = clock();
    let mut cfg = abide_core::SessionConfig::default();
    cfg.retry.backoff.cap = Duration::from_secs(1 << 63);
    let e = policy(&clock).with_session_config(cfg).build().unwrap_err();
    assert_eq!(e.setting, "retry.backoff.cap");
    assert!(e.problem.contains("is outside"), "{e}");

    let e = policy(&clock)
        .with_initial_rate(f64::NAN)
        .build()
        .unwrap_err();
    assert_eq!(e.setting, "initial_rate", "{e}");
    let e = policy(&clock)
        .with_max_wait(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.setting, "max_wait");
}
