//! Throttles that do not follow the rate: a host that refuses a share of requests whatever
//! the pace (a random `0x58`, every 20th request a `429`, a key shared with another client).
//!
//! Each such throttle looks like the limit's answer, and cutting on each decays the rate
//! without end (against an SMSC refusing 5 % at random, 12.5/s fell under 1/s within two
//! minutes). What tells the two apart is what a cut does: under a limit the throttled share
//! of the answers falls once the rate is below it; under noise it stays. So the fresh
//! answers are counted in a [`Segment`] that cuts do not clear, and its share is judged
//! once it holds [`EVIDENCE`] answers with at least two throttles. When a share judged at a
//! rate at least [`LEAST_CUT`] lower than the one judged before it did not fall (at least
//! [`KEPT`] of it, and nearer to it than to what a limit at the earlier accepted rate would
//! leave), the throttles are noise: the pacer holds what the host was accepting as a floor
//! and stops cutting, and throttles within the noise only send their own items back (each
//! still waits its own `Retry-After`): they neither cut the rate nor pause the host. A
//! share clearly above the noise (three standard deviations, or the throttle threshold,
//! whichever is more) means the limit is near: one cut to what the host accepted, and the
//! floor is held again from there. A share of [`MOST`] or more is a host refusing (an
//! outage, a fallen limit) and ends it. While a small share has just been judged and the
//! one since is small too, a second throttle soon after a cut does not halve the rate
//! (noise would decay it before it could be told from a limit); a fallen limit refuses a
//! large share and still does.

use std::time::{Duration, Instant};

/// Fresh answers before their throttled share is judged.
pub(super) const EVIDENCE: u64 = 40;
/// Throttles among them for their share to say anything (one or two are strays).
const LEAST_THROTTLES: u64 = 2;
/// The share "did not fall" when it is at least this fraction of the share before the cut.
const KEPT: f64 = 0.6;
/// A cut this much of the rate or more can tell noise from a limit (a smaller one may not
/// have reached below the limit).
const LEAST_CUT: f64 = 0.1;
/// A segment spans at most this many windows: at a low rate, evidence takes longer.
const SEGMENT_WINDOWS: u32 = 6;
/// A larger share is a host refusing, not noise: it is cut at once, as before.
pub(super) const MOST: f64 = 0.1;
/// How far above the noise's share (in standard deviations) a share is a limit again.
const SIGMAS: f64 = 3.0;

/// The throttled share of the fresh answers that decided a cut, and the rate cut from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cut {
    pub(super) fraction: f64,
    pub(super) rate: f64,
}

impl Cut {
    /// A cut from `rate` decided on `total` fresh answers of which `throttles` were
    /// throttles; `None` when too few to say what share was throttled.
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn judged(total: u64, throttles: u64, rate: f64) -> Option<Self> {
        (total >= EVIDENCE && throttles >= LEAST_THROTTLES).then(|| Self {
            fraction: throttles as f64 / total as f64,
            rate,
        })
    }

    /// After this cut the fresh answers say `after` (a judged share at `after.rate`): did
    /// the cut leave the throttled share where it was? Only a real cut (the rate at least
    /// [`LEAST_CUT`] lower) can say so, and the share must lie nearer the share before it
    /// than the one a limit would leave: a limit at what was accepted before, `rate × (1 −
    /// share)`, refuses `1 − limit / rate` of the lower rate (nothing, once below it).
    pub(super) fn did_not_fall(&self, after: &Self) -> bool {
        let limit = self.rate * (1.0 - self.fraction);
        let if_limit = (1.0 - limit / after.rate).max(0.0);
        after.rate <= (1.0 - LEAST_CUT) * self.rate
            && after.fraction < MOST
            && after.fraction >= KEPT * self.fraction
            && after.fraction >= f64::midpoint(self.fraction, if_limit)
    }
}

/// Fresh answers counted since the last judged share: cuts do not clear it (the noise
/// that keeps cutting the rate also keeps clearing the pacer's own counts), time does.
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    started: Instant,
    answers: u64,
    throttles: u64,
}

impl Segment {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            started: now,
            answers: 0,
            throttles: 0,
        }
    }

    /// Count a fresh answer that was not a throttle, at `now`; `false` when the segment
    /// expired (older than `window`) and started again, which breaks the chain of shares.
    pub(super) fn accepted(&mut self, now: Instant, window: Duration) -> bool {
        let kept = self.expire(now, window);
        self.answers += 1;
        kept
    }

    /// When the segment began.
    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// Count a fresh throttle at `now`; `paused` is how long the host was paused since
    /// [`Segment::started`]. A judged share is of the rate the segment's answers came at
    /// (per second of open time), not the pacer's rate, which a few senders may not fill.
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn throttled(&mut self, now: Instant, paused: Duration, window: Duration) -> Judged {
        let kept = self.expire(now, window);
        self.answers += 1;
        self.throttles += 1;
        let open = now
            .saturating_duration_since(self.started)
            .saturating_sub(paused)
            .max(Duration::from_millis(100));
        let rate = self.answers as f64 / open.as_secs_f64();
        match Cut::judged(self.answers, self.throttles, rate) {
            Some(c) => {
                *self = Self::new(now);
                if c.fraction < MOST {
                    Judged::Share(c)
                } else {
                    Judged::Broken
                }
            }
            None if kept => Judged::Nothing,
            None => Judged::Broken,
        }
    }

    /// The share so far is small enough to be noise (or too little is known).
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn small(&self) -> bool {
        self.throttles < LEAST_THROTTLES || (self.throttles as f64) < MOST * self.answers as f64
    }

    /// A segment older than `window` starts again: its share is of another time.
    fn expire(&mut self, now: Instant, window: Duration) -> bool {
        if now.saturating_duration_since(self.started) > window * SEGMENT_WINDOWS {
            *self = Self::new(now);
            return false;
        }
        true
    }
}

/// What a fresh throttle made of the [`Segment`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Judged {
    /// Not enough yet.
    Nothing,
    /// A share small enough to be noise, judged on enough answers.
    Share(Cut),
    /// The chain of shares broke: a share too large for noise, or an expired segment.
    Broken,
}

/// Throttles found to be noise: their share, and the rate held.
#[derive(Debug, Clone, Copy)]
pub(super) struct Noise {
    /// The throttled share that did not fall with the rate.
    pub(super) fraction: f64,
    /// The rate held (requests per second): the one before the cut that did not help.
    pub(super) floor: f64,
}

impl Noise {
    /// Is a throttled share of `throttles` in `total` fresh answers clearly above the
    /// noise (a limit again)? Never on fewer than [`EVIDENCE`] answers.
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn exceeded(&self, threshold: f64, total: u64, throttles: u64) -> bool {
        if total < EVIDENCE {
            return false;
        }
        let p = self.fraction;
        let share = throttles as f64 / total as f64;
        let sigma = (p * (1.0 - p) / total as f64).sqrt();
        share > p + threshold.max(SIGMAS * sigma)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_that_did_not_fall_is_noise_and_one_that_fell_is_not() {
        let before = Cut::judged(100, 5, 100.0).unwrap();
        assert!(before.did_not_fall(&Cut::judged(60, 3, 90.0).unwrap()));
        assert!(!before.did_not_fall(&Cut::judged(200, 3, 90.0).unwrap()));
        // Hardly a cut: it may not have reached below a limit.
        assert!(!before.did_not_fall(&Cut::judged(60, 3, 97.0).unwrap()));
        // 30 % over a limit, cut by 10 %: a limit still refuses 15 % of it.
        let over = Cut::judged(100, 23, 130.0).unwrap();
        assert!(!over.did_not_fall(&Cut::judged(100, 15, 117.0).unwrap()));
        // Refusing, not noise.
        assert!(!before.did_not_fall(&Cut::judged(60, 30, 90.0).unwrap()));
        // Too little to judge.
        assert!(Cut::judged(39, 5, 1.0).is_none());
        assert!(Cut::judged(400, 1, 1.0).is_none());
    }

    #[test]
    fn only_a_share_clearly_above_the_noise_is_a_limit_again() {
        let n = Noise {
            fraction: 0.05,
            floor: 90.0,
        };
        assert!(!n.exceeded(0.02, 39, 39));
        assert!(!n.exceeded(0.02, 1000, 60));
        assert!(n.exceeded(0.02, 1000, 120));
        // Few answers: a wider margin.
        assert!(!n.exceeded(0.02, 60, 7));
        assert!(n.exceeded(0.02, 60, 10));
    }
}
