//! Quota-exact pacing: the units the server says are left are spent at once, never more,
//! and the reset is waited for; in virtual time against the model limiters of
//! `search_tests` (which advertise `q=100;w=1` with `r` and `t` on every answer), 40
//! senders sharing one pacer.

use std::time::Duration;

use super::search_tests::{cold, efficiency, run, Algo};
use super::tests::{rate_limit, setup, verdict};
use super::*;
use crate::ratelimit::RateLimitInfo;
use crate::Clock;

const MS: Duration = Duration::from_millis(1);

/// `limit` per `window_secs` with `remaining` left and the reset `reset_secs` away.
fn quota(limit: u64, remaining: u64, window_secs: u64, reset_secs: u64) -> Verdict {
    Verdict {
        rate_limit: Some(RateLimitInfo {
            reset: Some(Duration::from_secs(reset_secs)),
            ..rate_limit(limit, remaining, window_secs)
        }),
        ..verdict(VerdictClass::Success)
    }
}

#[test]
fn the_units_left_go_at_once_and_the_next_waits_for_the_reset() {
    let (_, t0, p) = setup(10.0);
    // 10 per 10 s (1/s): the first answer says 9 are left, the window resets in 10 s.
    let first = p.reserve(t0);
    let now = first + 5 * MS;
    p.on_verdict_for(now, t0, &quota(10, 9, 10, 10));
    // Spacing at 0.97/s would hand these out a second apart; the quota lets all 9 go now,
    // a millisecond apart (the default hard cap, `max_rate` 1000/s).
    for i in 0..9 {
        assert_eq!(p.reserve(now), now + i * MS);
    }
    // The tenth would be over the quota: not before the reset (plus the clock error and,
    // until the refill is known, one interval at the advertised rate).
    let next = p.reserve(now);
    assert!(next >= now + Duration::from_secs(11), "{:?}", next - now);
}

#[test]
fn unanswered_and_reordered_answers_never_grant_more_than_is_left() {
    let (_, t0, p) = setup(1000.0);
    // Ten units per minute, five slots out at once. The server processes the second before
    // the first (9 left, then 8); the first's answer arrives first.
    let slots: Vec<Instant> = (0..5).map(|_| p.reserve(t0)).collect();
    let at = slots[4] + 2 * MS;
    let held = |p: &Pacer, now: Instant| p.reserve(now) > now + Duration::from_secs(59);
    p.on_verdict_for(at, t0, &quota(10, 8, 60, 60));
    // Four unanswered may not be counted yet: 8 − 4 = 4 more (at the 1000/s hard cap).
    for i in 0..4 {
        assert_eq!(p.reserve(at), at + i * MS);
    }
    assert!(held(&p, at));
    // The late answer says 9: against it count the 7 unanswered (3 + 4) and the answer that
    // arrived after it was sent: one more, ten in all, the whole quota and no more.
    let later = at + MS;
    p.on_verdict_for(later, t0, &quota(10, 9, 60, 60));
    assert_eq!(p.reserve(later), at + 4 * MS);
    assert!(held(&p, later));
}

#[test]
fn a_quota_back_whole_at_the_reset_is_waited_for_exactly() {
    let (clock, t0, p) = setup(10.0);
    let mut reserved = t0;
    let mut slot = p.reserve(t0);
    // Window 1: r counts down from 9 as the answers come; then the answer after the reset
    // shows the quota whole again (a fixed window).
    let mut r = 9;
    let mut reset_at = None;
    for round in 0..25 {
        clock.advance(slot.saturating_duration_since(clock.monotonic()) + 2 * MS);
        let now = clock.monotonic();
        // Whole seconds, rounded up, as the IETF `t`.
        let resets_in = reset_at.map_or(10, |r: Instant| {
            let d = r.saturating_duration_since(now);
            (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
        });
        p.on_verdict_for(now, reserved, &quota(10, r, 10, resets_in));
        reset_at.get_or_insert(now + Duration::from_secs(10));
        reserved = now;
        slot = p.reserve(now);
        if slot > now {
            // Spent: the next slot is after the reset.
            assert_eq!(r, 0, "round {round}: {r} left yet held back");
            assert!(slot >= reset_at.unwrap(), "round {round}");
            if round > 12 {
                // The refill is known to be stepped: no interval added, only the clock error
                // beyond each reset and the round trip of each window's first answer (2 ms
                // each, here the second window's), which bounds the reset from above.
                assert!(
                    slot <= reset_at.unwrap() + 10 * MS,
                    "{:?}",
                    slot - reset_at.unwrap()
                );
                return;
            }
            reset_at = Some(reset_at.unwrap() + Duration::from_secs(10));
            r = 9;
        } else {
            r = r.saturating_sub(1);
        }
    }
    panic!("never waited for a reset");
}

#[test]
fn a_small_burst_is_read_as_a_gradual_refill_and_spaced_at_the_rate() {
    let (_, t0, p) = setup(10.0);
    let first = p.reserve(t0);
    let now = first + 2 * MS;
    // 100 per second advertised, but only 9 left after one request: a bucket with a burst
    // of 10. Spaced at 97/s, not a wait for `t` once its units are spent, and no burst.
    p.on_verdict_for(now, t0, &quota(100, 9, 1, 1));
    let slots: Vec<Instant> = (0..12).map(|_| p.reserve(now)).collect();
    // (The old cold-start queue and the fill lane up to the new rate interleave.)
    for w in slots.windows(2) {
        assert!(w[1] > w[0], "{slots:?}");
    }
    assert!(
        slots[11] - now < Duration::from_millis(200),
        "{:?}",
        slots[11] - now
    );
}

#[test]
fn without_a_count_the_spacing_stays_even() {
    let (_, t0, p) = setup(10.0);
    let first = p.reserve(t0);
    let now = first + 2 * MS;
    let v = Verdict {
        rate_limit: Some(RateLimitInfo {
            remaining: None,
            ..rate_limit(100, 0, 1)
        }),
        ..verdict(VerdictClass::Success)
    };
    p.on_verdict_for(now, t0, &v);
    let a = p.reserve(now);
    let b = p.reserve(now);
    assert!(b - a >= Duration::from_millis(10), "{:?}", b - a);
}

/// 40 senders sharing one pacer, 3,000 items, each limiter: no answer refused (the host
/// refuses anything over its quota), and more than `headroom` of the limit delivered where
/// the quota is back whole at each reset.
#[test]
fn forty_senders_never_exceed_the_advertised_quota() {
    for algo in [
        Algo::Gcra,
        Algo::GcraFullBurst,
        Algo::FixedWindow,
        Algo::SlidingWindow,
    ] {
        let r = run(cold(40), algo, true, 40, 3000);
        assert_eq!(r.delivered, 3000, "{algo:?}");
        assert_eq!(r.throttles, 0, "{algo:?}");
        if matches!(algo, Algo::FixedWindow | Algo::GcraFullBurst) {
            // A whole quota per window after the first (which the cold start enters late).
            let full = r.per_second[1..r.per_second.len() - 1]
                .iter()
                .filter(|(ok, _)| *ok >= 99)
                .count();
            assert!(
                full + 3 >= r.per_second.len() - 2,
                "{algo:?}: {:?}",
                r.per_second
            );
        }
    }
}

/// Not a test of speed: prints what the harness saw (`--nocapture`).
#[test]
fn quota_report() {
    for algo in [
        Algo::Gcra,
        Algo::GcraFullBurst,
        Algo::FixedWindow,
        Algo::SlidingWindow,
    ] {
        let r = run(cold(40), algo, true, 40, 3000);
        println!(
            "{algo:?}: done {:.2}s eff {:.3} 429s {} per second {:?}",
            r.done.as_secs_f64(),
            efficiency(&r),
            r.throttles,
            &r.per_second[..r.per_second.len().min(6)]
        );
    }
}

#[test]
fn a_count_without_a_window_is_spent_too() {
    // `X-RateLimit-Limit: 10`, `-Remaining: 4`, `-Reset` 30 s away: no window advertised.
    let (_, t0, p) = setup(10.0);
    let first = p.reserve(t0);
    let now = first + 2 * MS;
    let v = Verdict {
        rate_limit: Some(RateLimitInfo {
            window: None,
            reset: Some(Duration::from_secs(30)),
            ..rate_limit(10, 4, 30)
        }),
        ..verdict(VerdictClass::Success)
    };
    p.on_verdict_for(now, t0, &v);
    for i in 0..4 {
        assert_eq!(p.reserve(now), now + i * MS);
    }
    assert!(p.reserve(now) >= now + Duration::from_secs(30));
}

#[test]
fn a_burst_within_the_quota_still_keeps_to_the_hard_cap() {
    // A server may say a million units are left; the user's cap (`max_rate`, the providers
    // file's hard cap) still spaces the burst: a remote count is input, not instruction.
    let clock = crate::ManualClock::new(std::time::UNIX_EPOCH);
    let t0 = clock.monotonic();
    let cfg = PacerConfig {
        initial_rate: 10.0,
        max_rate: 20.0,
        ..PacerConfig::default()
    };
    let p = Pacer::new(cfg, t0);
    let first = p.reserve(t0);
    let now = first + 5 * MS;
    p.on_verdict_for(now, t0, &quota(1_000_000, 999_999, 60, 60));
    let slots: Vec<Instant> = (0..10).map(|_| p.reserve(now)).collect();
    assert_eq!(slots[0], now);
    for w in slots.windows(2) {
        assert_eq!(w[1] - w[0], 50 * MS, "{slots:?}");
    }
}
