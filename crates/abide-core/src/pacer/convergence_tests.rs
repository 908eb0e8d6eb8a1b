//! After the first search for the limit, in virtual time, answer by answer: a later throttle at
//! or below the ceiling lowers it below the rate throttled (fast convergence); soon after a
//! cut it converges when the host refused next to nothing, and throttles that refuse a
//! share halve, whether or not the host had just been paused; one throttle soon after a cut
//! (on trial, see `noise.rs`) sends back only its item.

use std::time::{Duration, UNIX_EPOCH};

use super::search_tests::cold;
use super::*;
use crate::retry_after::{DelayReason, RetryDelay};
use crate::{Clock, ManualClock};

const MS: Duration = Duration::from_millis(1);

fn answer(class: VerdictClass) -> Verdict {
    let delay = Duration::from_secs(1);
    Verdict {
        class,
        reason: class.as_str().to_owned(),
        retry_after: (class == VerdictClass::Throttle).then(|| RetryDelay {
            delay,
            reason: DelayReason::Honoured,
            raw: Some("1".to_owned()),
            retry_after: Some(delay),
        }),
        rate_limit: None,
        secondary_limit: false,
    }
}

/// `n` successes 10 ms apart (100/s accepted), then one throttle with `Retry-After: 1`, then
/// the 1 s pause; returns the rate just before the throttle.
fn accept_then_throttle(clock: &ManualClock, p: &Pacer, n: usize) -> f64 {
    accept_every_then_throttle(clock, p, n, 10 * MS)
}

#[test]
fn a_throttle_at_or_below_the_ceiling_lowers_it_below_the_rate_throttled() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let p = Pacer::new(cold(100), clock.monotonic());
    accept_then_throttle(&clock, &p, 300);
    assert!(p.ceiling().is_some());
    // 6 s later (not soon), throttled again at or below the estimate while 100/s was
    // accepted: the ceiling is at most 0.975 x the rate throttled (fast convergence), not
    // the 100/s the host accepted, which is the rate it then throttles again.
    let rate = accept_then_throttle(&clock, &p, 600);
    let c = p.ceiling().unwrap();
    assert!(
        c <= 0.975 * rate + 1e-9,
        "ceiling {c} after a throttle at {rate}/s"
    );
    assert!(c >= 0.9 * rate, "ceiling {c} after a throttle at {rate}/s");
}

/// `n` successes `gap` apart, then one throttle with `Retry-After: 1`, then the 1 s pause;
/// returns the rate just before the throttle.
fn accept_every_then_throttle(clock: &ManualClock, p: &Pacer, n: usize, gap: Duration) -> f64 {
    for _ in 0..n {
        clock.advance(gap);
        p.on_verdict(clock.monotonic(), &answer(VerdictClass::Success));
    }
    let before = p.rate();
    clock.advance(10 * MS);
    p.on_verdict(clock.monotonic(), &answer(VerdictClass::Throttle));
    clock.advance(Duration::from_secs(1));
    before
}

#[test]
fn a_throttle_soon_after_a_cut_that_refused_next_to_nothing_converges_instead_of_halving() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let p = Pacer::new(cold(100), clock.monotonic());
    // The search ends with a ceiling near 100/s and a 1 s pause.
    accept_then_throttle(&clock, &p, 300);
    assert!(p.ceiling().is_some());
    // 2.5 s of sending without a pause, all of it accepted (100/s), then a throttle at the
    // rate in use, within half a window of the cut: the estimate read a little high, the
    // limit did not fall. Fast convergence, not a halving and a search from half the limit.
    let before = accept_every_then_throttle(&clock, &p, 250, 10 * MS);
    let c = p.ceiling().expect("a ceiling is kept");
    assert!(
        (c - 0.975 * before).abs() < 1e-6,
        "ceiling {c} after a throttle at {before}/s"
    );
    assert!(p.rate() >= 0.9 * before, "{} after {before}", p.rate());
}

/// `n` successes 10 ms apart.
fn accept(clock: &ManualClock, p: &Pacer, n: usize) {
    for _ in 0..n {
        clock.advance(10 * MS);
        p.on_verdict(clock.monotonic(), &answer(VerdictClass::Success));
    }
}

/// `n` answers 10 ms apart, every other one a throttle (a limit that fell to half the rate);
/// returns the rate before the first.
fn half_refused(clock: &ManualClock, p: &Pacer, n: usize) -> f64 {
    let before = p.rate();
    for i in 0..n {
        clock.advance(10 * MS);
        let class = if i % 2 == 0 {
            VerdictClass::Success
        } else {
            VerdictClass::Throttle
        };
        p.on_verdict(clock.monotonic(), &answer(class));
    }
    before
}

#[test]
fn throttles_soon_after_a_cut_that_refuse_a_share_still_halve() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let p = Pacer::new(cold(100), clock.monotonic());
    accept_then_throttle(&clock, &p, 300);
    // 2.5 s without a pause in which the host accepted 50/s of the 100/s sent, refusing
    // every other request: the limit fell, and what was accepted cannot say by how much.
    // The cut on trial sees the share rise far above the one before it, and the throttles
    // are decided as any: a halving.
    let before = half_refused(&clock, &p, 250);
    assert_eq!(p.ceiling(), None);
    assert!(
        p.rate() <= 0.5 * before + 1e-9,
        "{} after {before}",
        p.rate()
    );
}

#[test]
fn throttles_soon_after_a_pause_still_halve() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let p = Pacer::new(cold(100), clock.monotonic());
    accept_then_throttle(&clock, &p, 300);
    // Only 1 s of sending since the pause ended (what the host accepted then may be a
    // refilled burst or a fresh window's quota, and proves nothing about the limit), then
    // half of what is sent refused.
    accept(&clock, &p, 100);
    let before = half_refused(&clock, &p, 20);
    assert_eq!(p.ceiling(), None);
    assert!(
        p.rate() <= 0.5 * before + 1e-9,
        "{} after {before}",
        p.rate()
    );
}

#[test]
fn one_throttle_soon_after_a_cut_sends_back_only_its_item() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let p = Pacer::new(cold(100), clock.monotonic());
    accept_then_throttle(&clock, &p, 300);
    let ceiling = p.ceiling();
    // The cut is on trial: one throttle among 100 answers after it may be noise. It does
    // not pause the host, and does not cut again.
    accept(&clock, &p, 100);
    let rate = p.rate();
    clock.advance(10 * MS);
    let now = clock.monotonic();
    p.on_verdict(now, &answer(VerdictClass::Throttle));
    assert_eq!(p.paused_until(now), None);
    assert_eq!((p.rate(), p.ceiling()), (rate, ceiling));
    assert_eq!(p.snapshot(now).decreases, 1);
}
