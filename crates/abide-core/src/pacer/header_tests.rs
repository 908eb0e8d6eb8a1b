//! The pacer steered by rate-limit headers: a target below the advertised limit, the hard
//! cap over it, an exhausted quota pausing until its reset.

use super::tests::{rate_limit, setup, verdict};
use super::*;
use crate::ratelimit::RateLimitInfo;
use crate::{Clock, ManualClock};
use std::time::UNIX_EPOCH;

#[test]
fn headers_set_target_below_advertised_limit() {
    let (clock, t0, p) = setup(50.0);
    // 100 per 10 s = 10/s advertised; aim at 97 % (the default headroom).
    let v = Verdict {
        rate_limit: Some(rate_limit(100, 60, 10)),
        ..verdict(VerdictClass::Success)
    };
    p.on_verdict(t0, &v);
    let target = p.target().unwrap();
    assert!((target - 9.7).abs() < 1e-9, "{target}");
    assert!((p.rate() - 9.7).abs() < 1e-9);
    for _ in 0..100 {
        clock.advance(Duration::from_millis(500));
        p.on_verdict(clock.monotonic(), &v);
    }
    assert!(p.rate() <= 9.7 + 1e-9);
}

/// `max_rate` is a hard cap (a providers file's `max_rate`): an advertised limit above it
/// is not followed past it, and clean time never climbs over it.
#[test]
fn an_advertised_limit_above_max_rate_is_capped() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let cfg = PacerConfig {
        initial_rate: 2.0,
        max_rate: 4.0,
        ..PacerConfig::default()
    };
    let p = Pacer::new(cfg, t0);
    // 100 per 10 s = 10/s advertised.
    let v = Verdict {
        rate_limit: Some(rate_limit(100, 60, 10)),
        ..verdict(VerdictClass::Success)
    };
    for _ in 0..100 {
        clock.advance(Duration::from_millis(500));
        p.on_verdict(clock.monotonic(), &v);
        assert!(p.rate() <= 4.0 + 1e-9, "{}", p.rate());
    }
    assert!(p.target().unwrap() <= 4.0 + 1e-9);
}

#[test]
fn exhausted_remaining_pauses_until_reset() {
    let (_, t0, p) = setup(10.0);
    let v = Verdict {
        rate_limit: Some(RateLimitInfo {
            limit: None,
            window: None,
            ..rate_limit(100, 0, 7)
        }),
        ..verdict(VerdictClass::Success)
    };
    p.on_verdict(t0, &v);
    assert_eq!(p.paused_until(t0), Some(t0 + Duration::from_secs(7)));
}

#[test]
fn an_admitted_last_unit_pauses_one_interval_not_the_rounded_reset() {
    // q=40;w=1 and r=0;t=1 on a success: a sliding window's estimate right after an
    // admission paced at 0.97 × 40/s; pausing the whole second held the sender at 0.34.
    let (_, t0, p) = setup(10.0);
    let ok = Verdict {
        rate_limit: Some(rate_limit(40, 0, 1)),
        ..verdict(VerdictClass::Success)
    };
    p.on_verdict(t0, &ok);
    assert_eq!(p.paused_until(t0), Some(t0 + Duration::from_millis(25)));
    // The same numbers on a throttle are the server's demand: the whole reset.
    let t1 = t0 + Duration::from_secs(5);
    let no = Verdict {
        rate_limit: Some(rate_limit(40, 0, 1)),
        ..verdict(VerdictClass::Throttle)
    };
    p.on_verdict(t1, &no);
    assert_eq!(p.paused_until(t1), Some(t1 + Duration::from_secs(1)));
}
