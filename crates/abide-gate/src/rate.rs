//! The rate algorithms, as pure functions of a per-caller [`Cell`] and `now`: GCRA, fixed
//! window and sliding window. The in-memory set calls them under its lock; a shared store
//! must compute the same answers.
//!
//! - **GCRA** (generic cell rate algorithm, ITU-T I.371): a token bucket without a refill
//!   timer. The cell holds the theoretical arrival time (TAT); `limit` per `window` on
//!   average, `burst` back to back from idle.
//! - **Fixed window**: at most `limit` requests per window; the count resets when the window
//!   ends, so a whole quota can be spent in a burst at the end of one window and again at the
//!   start of the next. Windows follow each other from a caller's first request (as the
//!   common `INCR` + `EXPIRE` counters do); a caller idle for two windows starts a new phase.
//! - **Sliding window** (the sliding window *counter*, as Cloudflare describes it): the count
//!   of the current window plus the previous window's count weighted by how much of the
//!   previous window the sliding window still covers; admitted while that estimate stays
//!   under `limit`.
//!
//! Window algorithms ignore `burst`: their burst is the whole quota.

use std::time::Duration;

use crate::gate::{Algorithm, RateQuota};

/// What one caller has spent at one rate gate. Times are nanoseconds since the set's epoch
/// (plain integers: the hot path does no `Instant` arithmetic). `at` is GCRA's TAT (0:
/// never seen) or the current window's start (meaningful only while `count` > 0; a stored
/// window cell always has counted a request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cell {
    pub(crate) at: u64,
    /// Requests counted in the previous window (sliding window only).
    pub(crate) prev: u32,
    /// Requests counted in the current window (window algorithms).
    pub(crate) count: u32,
}

/// A rate gate's view of a caller: units left and time until the quota is whole again (an
/// admission), or the wait until it would admit (a refusal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) remaining: u32,
    /// Nanoseconds (a `Duration` is built only when a status is shown).
    pub(crate) reset_ns: u64,
}

impl View {
    pub(crate) fn reset(&self) -> Duration {
        Duration::from_nanos(self.reset_ns)
    }
}

fn view(remaining: u32, reset_ns: u64) -> View {
    View {
        remaining,
        reset_ns,
    }
}

impl Cell {
    /// True when the cell no longer limits anything at `now`, so it may be forgotten.
    pub(crate) fn idle(&self, q: &RateQuota, now: u64) -> bool {
        match q.algorithm() {
            Algorithm::Gcra => self.at <= now,
            _ => self.count == 0 || now.saturating_sub(self.at) >= q.window_ns() * 2,
        }
    }

    /// The window state rolled forward to `now` (windows follow each other from `start`).
    fn rolled(&self, w: u64, now: u64) -> (u64, u32, u32) {
        if self.count == 0 {
            return (now, 0, 0);
        }
        let e = now.saturating_sub(self.at);
        if e < w {
            (self.at, self.prev, self.count)
        } else if e < w * 2 {
            (self.at + w, self.count, 0)
        } else {
            (now, 0, 0)
        }
    }
}

/// Try to admit one request at `now`: `Ok` with the charged cell and the view after it, or
/// `Err` with the wait until this gate would admit (`remaining` 0). Charges nothing on `Err`.
#[inline]
pub(crate) fn admit(q: &RateQuota, cell: Cell, now: u64) -> Result<(Cell, View), View> {
    match q.algorithm() {
        Algorithm::Gcra => gcra(q, cell, now),
        Algorithm::FixedWindow => fixed(q, cell, now),
        Algorithm::SlidingWindow => sliding(q, cell, now),
    }
}

/// Whether [`admit`] would admit at `now` (GCRA: one comparison).
#[inline]
pub(crate) fn admits(q: &RateQuota, cell: Cell, now: u64) -> bool {
    match q.algorithm() {
        // admit iff now ≥ max(TAT, now) − τ.
        Algorithm::Gcra => cell.at.saturating_sub(q.tolerance_ns()) <= now,
        _ => admit(q, cell, now).is_ok(),
    }
}

/// The view at `now` without charging (a quota endpoint).
pub(crate) fn peek(q: &RateQuota, cell: Cell, now: u64) -> View {
    let w = q.window_ns();
    match q.algorithm() {
        Algorithm::Gcra => {
            let (t, tau) = (q.interval_ns(), q.tolerance_ns());
            let tat = cell.at.max(now);
            view(units(now + tau + t, tat, t), tat - now)
        }
        Algorithm::FixedWindow => {
            let (start, _, count) = cell.rolled(w, now);
            let reset = if count == 0 {
                0
            } else {
                (start + w).saturating_sub(now)
            };
            view(q.limit().saturating_sub(count), reset)
        }
        Algorithm::SlidingWindow => {
            let (start, prev, count) = cell.rolled(w, now);
            sliding_view(q.limit(), w, now.saturating_sub(start), prev, count)
        }
    }
}

#[inline]
fn gcra(q: &RateQuota, cell: Cell, now: u64) -> Result<(Cell, View), View> {
    let (t, tau) = (q.interval_ns(), q.tolerance_ns());
    let tat = cell.at.max(now);
    let allow_at = tat.saturating_sub(tau);
    if now < allow_at {
        return Err(view(0, allow_at - now));
    }
    let new_tat = tat + t;
    let cell = Cell {
        at: new_tat,
        ..Cell::default()
    };
    Ok((cell, view(units(now + tau + t, new_tat, t), new_tat - now)))
}

fn fixed(q: &RateQuota, cell: Cell, now: u64) -> Result<(Cell, View), View> {
    let w = q.window_ns();
    let (start, _, count) = cell.rolled(w, now);
    let end = (start + w).saturating_sub(now);
    if count >= q.limit() {
        return Err(view(0, end));
    }
    let count = count + 1;
    let cell = Cell {
        at: start,
        prev: 0,
        count,
    };
    Ok((cell, view(q.limit() - count, end)))
}

fn sliding(q: &RateQuota, cell: Cell, now: u64) -> Result<(Cell, View), View> {
    let (w, limit) = (q.window_ns(), q.limit());
    let (start, prev, count) = cell.rolled(w, now);
    let e = now.saturating_sub(start);
    if let Some(wait) = sliding_wait(limit, w, e, prev, count) {
        return Err(view(0, wait));
    }
    let count = count + 1;
    let cell = Cell {
        at: start,
        prev,
        count,
    };
    Ok((cell, sliding_view(limit, w, e, prev, count)))
}

/// `prev·(w−e)/w + count` is the sliding estimate; one more request fits while
/// `prev·(w−e) + (count+1)·w ≤ limit·w`. `None` when it fits now, else the wait in
/// nanoseconds. (u128: windows are at most 365 days, so products stay far below its max.)
fn sliding_wait(limit: u32, w: u64, e: u64, prev: u32, count: u32) -> Option<u64> {
    let (wn, en) = (u128::from(w), u128::from(e));
    let (l, p, c) = (u128::from(limit), u128::from(prev), u128::from(count));
    let wait = if p * (wn - en) + (c + 1) * wn <= l * wn {
        return None;
    } else if c < l {
        // Only the previous window's weight blocks: wait until it has slid far enough.
        // prev > 0 here, else the request would fit.
        let keep = (l - c - 1) * wn / p;
        (wn - en).saturating_sub(keep)
    } else {
        // The current window is full: wait for it to end, then until its weight (it becomes
        // the previous window) leaves room for one.
        let keep = (l - 1) * wn / c;
        (wn - en) + (wn - keep)
    };
    Some(u64::try_from(wait).unwrap_or(u64::MAX))
}

/// Units left (the whole quota minus the estimate, rounded down) and the reset.
///
/// A sliding window's quota is never restored in one step, so the reset names the nearest
/// moment that tells the truth about it:
/// - **Units left**: the end of the current window (at most one window away). By then the
///   previous window weighs nothing and the counter holds only this window's requests, so
///   the `remaining` units may be spread evenly over the reset without ever crossing the
///   limit: the same statement a fixed window makes. (The moment the estimate reaches zero,
///   up to two windows away, read as a reset told clients of a `w=1` policy that `r=39;t=2`,
///   a quota of about half the real one.)
/// - **None left**: the wait until one more is admitted, exactly what a refusal at this
///   instant says, so an admission with `r=0` and the 429 after it agree.
fn sliding_view(limit: u32, w: u64, e: u64, prev: u32, count: u32) -> View {
    let (wn, en) = (u128::from(w), u128::from(e));
    let used = u128::from(prev) * (wn - en) + u128::from(count) * wn;
    let left = (u128::from(limit) * wn).saturating_sub(used) / wn;
    let reset = if left == 0 {
        // left == 0 means one more does not fit, so the wait is Some.
        sliding_wait(limit, w, e, prev, count).unwrap_or(w - e)
    } else if count > 0 || prev > 0 {
        w - e
    } else {
        0
    };
    view(u32::try_from(left).unwrap_or(u32::MAX), reset)
}

/// Units a GCRA gate has left when its quota is whole again in `reset_ns` (what
/// [`admit`]'s view says, from the reset alone).
pub(crate) fn gcra_units(q: &RateQuota, reset_ns: u64) -> u32 {
    let (t, tau) = (q.interval_ns(), q.tolerance_ns());
    units(tau + t, reset_ns, t)
}

/// Whole intervals `t` between `to` and `from` (0 when `from` is not after `to`).
fn units(from: u64, to: u64, t: u64) -> u32 {
    u32::try_from(from.saturating_sub(to) / t.max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    /// An instant well after the epoch, in nanoseconds.
    fn start() -> u64 {
        7_000_000_000
    }

    fn ms(n: u64) -> u64 {
        n * 1_000_000
    }

    fn quota(limit: u32, window_ms: u64, a: Algorithm) -> RateQuota {
        RateQuota::new(
            NonZeroU32::new(limit).unwrap(),
            Duration::from_millis(window_ms),
        )
        .unwrap()
        .with_algorithm(a)
    }

    /// Admit `n` at `now`, returning the cell; panics if one is refused.
    fn fill(q: &RateQuota, mut cell: Cell, now: u64, n: u32) -> Cell {
        for _ in 0..n {
            cell = admit(q, cell, now).unwrap().0;
        }
        cell
    }

    #[test]
    fn fixed_window_takes_a_whole_quota_at_each_side_of_the_boundary() {
        let q = quota(10, 1000, Algorithm::FixedWindow);
        let t0 = start();
        let cell = fill(&q, Cell::default(), t0, 9);
        let (cell, v) = admit(&q, cell, t0 + ms(999)).unwrap();
        assert_eq!(v.remaining, 0);
        assert_eq!(v.reset(), Duration::from_millis(1));
        let no = admit(&q, cell, t0 + ms(999)).unwrap_err();
        assert_eq!(no.reset(), Duration::from_millis(1));
        // 1 ns before the boundary: still refused; at it, a whole new quota.
        let just_before = t0 + ms(1000) - 1;
        assert_eq!(
            admit(&q, cell, just_before).unwrap_err().reset(),
            Duration::from_nanos(1)
        );
        let at = t0 + ms(1000);
        let cell = fill(&q, cell, at, 10);
        assert_eq!(
            admit(&q, cell, at).unwrap_err().reset(),
            Duration::from_secs(1)
        );
        // Windows keep their phase: the next one starts at 2 s, not at a later request.
        let (_, v) = admit(&q, cell, t0 + ms(2500)).unwrap();
        assert_eq!((v.remaining, v.reset()), (9, Duration::from_millis(500)));
    }

    #[test]
    fn fixed_window_peek_charges_nothing() {
        let q = quota(3, 1000, Algorithm::FixedWindow);
        let t0 = start();
        assert_eq!(
            peek(&q, Cell::default(), t0),
            View {
                remaining: 3,
                reset_ns: 0
            }
        );
        let cell = fill(&q, Cell::default(), t0, 2);
        let v = peek(&q, cell, t0 + ms(400));
        assert_eq!((v.remaining, v.reset()), (1, Duration::from_millis(600)));
        assert_eq!(peek(&q, cell, t0 + ms(400)), v);
    }

    #[test]
    fn sliding_window_weights_the_previous_window() {
        let q = quota(10, 1000, Algorithm::SlidingWindow);
        let t0 = start();
        // A whole quota in a burst, like a fixed window.
        let cell = fill(&q, Cell::default(), t0, 10);
        // Full current window: wait for its end, then until 10·(1−x) + 1 ≤ 10, x = 0.1 s.
        let no = admit(&q, cell, t0).unwrap_err();
        assert_eq!(no.reset(), Duration::from_millis(1100));
        // At 1.0 s the previous window still weighs 10: refused, 100 ms to go.
        let at = t0 + ms(1000);
        assert_eq!(
            admit(&q, cell, at).unwrap_err().reset(),
            Duration::from_millis(100)
        );
        // At 1.1 s: weight 9, one fits; then 9 + 1 = 10 refuses again, for another 100 ms.
        let at = t0 + ms(1100);
        let (cell, v) = admit(&q, cell, at).unwrap();
        assert_eq!(v.remaining, 0);
        // None left: the admission names the same wait as the refusal after it.
        assert_eq!(v.reset(), Duration::from_millis(100));
        let no = admit(&q, cell, at).unwrap_err();
        assert_eq!(no.reset(), Duration::from_millis(100));
        // Half way through: weight 5 + 1 counted leaves 4.
        let at = t0 + ms(1500);
        assert_eq!(peek(&q, cell, at).remaining, 4);
        let cell = fill(&q, cell, at, 4);
        assert!(admit(&q, cell, at).is_err());
    }

    #[test]
    fn sliding_window_reset_is_the_window_end_while_units_are_left() {
        let q = quota(40, 1000, Algorithm::SlidingWindow);
        let t0 = start();
        // 39 in the first window, then one at 1.25 s: 39·0.75 + 1 = 30.25, 9 left.
        let cell = fill(&q, Cell::default(), t0, 39);
        let (cell, v) = admit(&q, cell, t0 + ms(1250)).unwrap();
        assert_eq!(v.remaining, 9);
        // Was 1.75 s (until nothing counted is left): `t=2` for a `w=1` policy.
        assert_eq!(v.reset(), Duration::from_millis(750));
        assert_eq!(peek(&q, cell, t0 + ms(1250)), v);
        // With nothing counted there is nothing to reset.
        assert_eq!(peek(&q, Cell::default(), t0).reset_ns, 0);
    }

    #[test]
    fn sliding_window_views_never_overstate_the_wait_or_the_limit() {
        // A sender near the limit with uneven gaps: every admission with units left names a
        // reset within the window, spending those units evenly over it is all admitted, and
        // an admission with none left names exactly the refusal's wait.
        let q = quota(40, 1000, Algorithm::SlidingWindow);
        let w = ms(1000);
        let mut cell = Cell::default();
        let mut now = start();
        let (mut zero, mut some) = (0, 0);
        for step in 0..2000u64 {
            match admit(&q, cell, now) {
                Ok((c, v)) => {
                    cell = c;
                    if v.remaining == 0 {
                        zero += 1;
                        assert_eq!(admit(&q, cell, now).unwrap_err(), v, "step {step}");
                    } else {
                        some += 1;
                        assert!(v.reset_ns <= w, "step {step}: {v:?}");
                        let gap = v.reset_ns / u64::from(v.remaining);
                        let mut probe = cell;
                        for k in 1..=u64::from(v.remaining) {
                            probe = admit(&q, probe, now + k * gap)
                                .unwrap_or_else(|e| panic!("step {step} unit {k}: {e:?}"))
                                .0;
                        }
                    }
                }
                Err(v) => now += v.reset_ns,
            }
            // 20–30 ms gaps: 33–50/s around a 40/s limit.
            now += ms(20 + step * 7 % 11);
        }
        assert!(zero > 10 && some > 10, "zero {zero}, some {some}");
    }

    #[test]
    fn sliding_window_forgets_after_two_idle_windows() {
        let q = quota(5, 1000, Algorithm::SlidingWindow);
        let t0 = start();
        let cell = fill(&q, Cell::default(), t0, 5);
        assert!(!cell.idle(&q, t0 + ms(1999)));
        assert!(cell.idle(&q, t0 + ms(2000)));
        let at = t0 + ms(2000);
        assert_eq!(peek(&q, cell, at).remaining, 5);
        let _ = fill(&q, cell, at, 5);
    }

    #[test]
    fn every_refusal_names_a_wait_after_which_the_gate_admits() {
        // The reported wait is exact: 1 ns earlier is refused, at it admitted.
        for a in [
            Algorithm::Gcra,
            Algorithm::FixedWindow,
            Algorithm::SlidingWindow,
        ] {
            let q = quota(7, 1300, a);
            let t0 = start();
            let mut cell = Cell::default();
            let mut now = t0;
            for step in 0..200u64 {
                match admit(&q, cell, now) {
                    Ok((c, _)) => cell = c,
                    Err(v) => {
                        assert!(v.reset() > Duration::ZERO, "{a:?} step {step}");
                        let wait = u64::try_from(v.reset().as_nanos()).unwrap();
                        let before = now + wait - 1;
                        assert!(admit(&q, cell, before).is_err(), "{a:?} step {step}");
                        cell = admit(&q, cell, now + wait).unwrap().0;
                        now += wait;
                    }
                }
                now += ms(step % 5 * 37);
            }
        }
    }
}
