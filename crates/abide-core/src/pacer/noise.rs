//! Throttles that do not follow the rate: a host that refuses a share of requests whatever
//! the pace (a random `0x58`, every 20th request a `429`, a key shared with another client).
//!
//! Each such throttle looks like the limit's answer. Cutting on each decays the rate without
//! end (against an SMSC refusing 5 % at random, 12.5/s fell under 1/s within two minutes),
//! and pausing the host for each costs a pause per twenty requests at 5 %, whatever the
//! rate. What tells the two apart is what a cut does: under a limit the throttles stop once
//! the rate is below it; under noise they go on at the same share. So a cut that follows a
//! small share of throttles is put on [`Trial`], as TCP undoes a window reduction once the
//! loss is known to be spurious (RFC 3522, the Eifel algorithm): the rate is held where the
//! cut put it (at least [`LEAST_CUT`] below what the host was being sent), and a throttle
//! that keeps to the share seen before the cut sends only its own item back (it still waits
//! its own `Retry-After`) rather than pausing the host. Then:
//! - the share fell: the cut found a limit, and stands;
//! - it rose clearly, or the host refuses most requests: a limit lower still, or an outage,
//!   decided as any throttle;
//! - it stayed, on enough answers over enough time at a rate clearly lower: noise. The cut
//!   is undone and the search for the limit starts over from the rate before it (every
//!   ceiling so far may have been read off noise), with the noise's share ([`Noise`])
//!   known: a throttle within it sends only its own item back, and a share clearly above it
//!   is the limit again, cut to and put on trial like any other (where a share that stays
//!   re-estimates the noise).
//!
//! A share of [`MOST`] or more is a host refusing, never noise.

use std::time::{Duration, Instant};

/// Fresh answers after a cut before their share may be called noise.
pub(super) const EVIDENCE: u64 = 40;
/// Throttles among them for their share to say anything (one is a stray).
const LEAST_THROTTLES: u64 = 2;
/// Throttles after a cut for them to be called noise: a limit just below the rate after the
/// cut lets a trickle through (a GCRA's edge), and a noise verdict that is wrong costs
/// throttles for as long as it stands.
const STAYED_THROTTLES: u64 = 4;
/// The share "stayed" when it is at least this fraction of the share before the cut.
const KEPT: f64 = 0.6;
/// A cut on trial lowers the rate at least this fraction below the rate the host was being
/// sent: a smaller one may not reach below a limit, and could not tell it from noise.
pub(super) const LEAST_CUT: f64 = 0.1;
/// The rate the answers after the cut came at must be at least this fraction lower than
/// before it for their share to say anything (the cut's [`LEAST_CUT`], less what measuring
/// a rate over a few seconds misreads).
const MEASURED_CUT: f64 = 0.05;
/// Open time (the host not paused) a trial needs before it may call the throttles noise: a
/// limiter's burst, refilled by the pause that came with the cut, is spent first, or a
/// limit still below the rate refuses next to nothing until it is.
const LEAST_OPEN: Duration = Duration::from_secs(2);
/// Answers after which a trial that saw no noise says the cut found a limit (or a window of
/// open time, or [`TRIAL_WINDOWS`] windows in all, whichever comes first): noise at a share
/// that matters shows long before.
const MOST_ANSWERS: u64 = 200;
/// Throttles a trial expects under noise at the share before the cut before it may say
/// they stopped.
const EXPECTED: f64 = 4.0;
/// A share of noise below this costs little (a cut per fifty answers at most), and a trial
/// does not wait for one smaller to show.
const NOISE_THAT_MATTERS: f64 = 0.04;
/// A trial lasts at most this many windows.
const TRIAL_WINDOWS: u32 = 2;
/// Accepted answers per throttle, at least, for throttles to be taken for noise (a share of
/// 20 % at most).
const ACCEPTED_PER_THROTTLE: u64 = 4;
/// A larger share is a host refusing, not noise.
pub(super) const MOST: f64 = 0.1;
/// How far above a share (in standard deviations) another is clearly above it.
const SIGMAS: f64 = 3.0;
/// How far below the share before a cut (in standard deviations) the share after it says
/// the cut helped.
const FELL_SIGMAS: f64 = 2.0;

/// Throttles found to be noise: their share of the fresh answers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Noise {
    /// The throttled share that did not fall with the rate.
    pub(super) fraction: f64,
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

/// A cut on probation (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(super) struct Trial {
    /// Fresh answers, and throttles among them, since the last decrease before this cut
    /// (this cut's throttle included).
    before: (u64, u64),
    /// The rate the host was being sent before the cut (answers per second open).
    before_rate: f64,
    /// The same since the cut.
    answers: u64,
    throttles: u64,
    /// When the cut was made.
    started: Instant,
    /// The first and the last answer since the cut: the rate they came at.
    first: Option<Instant>,
    last: Option<Instant>,
    /// The share of the noise already known (0 when none): throttles after the cut at
    /// about that share say the cut found the limit, not that it did not help.
    noise: f64,
    /// This trial follows one that said [`Outcome::Again`]: the answers before are that
    /// trial's.
    again: bool,
}

/// What the answers after a cut say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Not enough answers yet to tell.
    Open,
    /// The throttles stopped (or fell clearly): the cut found a limit.
    Fell,
    /// They went on at the share seen before the cut: noise; undo the cut.
    Stayed,
    /// They rose clearly above it: the limit is lower still (or the host is refusing).
    Rose,
    /// They went on, but the share before the cut rested on too few answers to compare
    /// with: cut again, and compare with the share since this cut ([`Trial::again`]).
    Again,
}

impl Trial {
    /// A trial of a cut made at `now` after `before` (fresh answers, throttles) since the
    /// previous decrease, while the host was being sent `before_rate` per second, with
    /// `noise` (a share) already known, if any.
    pub(super) fn new(
        now: Instant,
        before: (u64, u64),
        before_rate: f64,
        noise: Option<&Noise>,
    ) -> Self {
        Self {
            before: (before.0.max(1), before.1.max(1)),
            before_rate,
            answers: 0,
            throttles: 0,
            started: now,
            first: None,
            last: None,
            noise: noise.map_or(0.0, |n| n.fraction),
            again: false,
        }
    }

    /// Was the host refusing before the cut rather than metering: not [`mostly_accepting`],
    /// or a share too large for noise, and not by the chance of a few answers?
    pub(super) fn refusing_before(&self) -> bool {
        let (n, k) = self.before;
        !mostly_accepting(n, k) || refusing(n, k)
    }

    /// Could the share before the cut be noise that matters ([`NOISE_THAT_MATTERS`]), or
    /// does it rest on too few answers to say?
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn could_be_noise(&self) -> bool {
        let (n, k) = self.before;
        n < EVIDENCE || k as f64 >= NOISE_THAT_MATTERS * n as f64
    }

    /// The outcome if the next fresh answer, at `now`, is a throttle, without counting it;
    /// `paused` as for [`Trial::outcome`].
    pub(super) fn with_throttle(
        &self,
        now: Instant,
        window: Duration,
        paused: Duration,
    ) -> Outcome {
        let mut t = *self;
        t.count(now, true);
        t.outcome(now, window, paused)
    }

    /// Count a fresh answer after the cut, at `now`.
    pub(super) fn count(&mut self, now: Instant, throttled: bool) {
        self.answers += 1;
        self.throttles += u64::from(throttled);
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// Does this trial follow one that said [`Outcome::Again`]?
    pub(super) fn is_again(&self) -> bool {
        self.again
    }

    /// When the first answer after the cut came, if one did.
    pub(super) fn first_answer(&self) -> Option<Instant> {
        self.first
    }

    /// The throttled share of the answers before and after the cut, together: the noise's
    /// share once the trial says [`Outcome::Stayed`].
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn pooled(&self) -> f64 {
        (self.before.1 + self.throttles) as f64 / (self.before.0 + self.answers) as f64
    }

    /// What the answers after the cut say at `now`; `paused` is how long the host was
    /// paused since the first of them (time in which none could come).
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn outcome(&self, now: Instant, window: Duration, paused: Duration) -> Outcome {
        let (nb, kb) = (self.before.0 as f64, self.before.1 as f64);
        let (n, k) = (self.answers as f64, self.throttles as f64);
        let before = kb / nb;
        let after = if n > 0.0 { k / n } else { 0.0 };
        // Two proportions: how far the share after the cut lies from the one before, in
        // standard deviations of their difference (both samples may be small).
        let pool = self.pooled();
        let sigma = (pool * (1.0 - pool) * (1.0 / nb + 1.0 / n.max(1.0))).sqrt();
        let z = if sigma > 0.0 {
            (after - before) / sigma
        } else {
            0.0
        };
        let two = self.throttles >= LEAST_THROTTLES;
        if two && z > SIGMAS || refusing(self.answers, self.throttles) {
            return Outcome::Rose;
        }
        let open = self.open(paused);
        let expired = now.saturating_duration_since(self.started) > window * TRIAL_WINDOWS;
        if (self.answers < EVIDENCE || open < LEAST_OPEN) && !expired {
            return Outcome::Open;
        }
        // Both shares must rest on enough answers: a share before the cut read off a few
        // answers says nothing (a limit far below the rate refuses few of them while each
        // refusal's pause refills its burst). Then this trial's share is the one to compare
        // with, at a rate cut once more.
        if two && self.before.0 < EVIDENCE && self.clearly_above_known(after, n) {
            return Outcome::Again;
        }
        // After [`Outcome::Again`] the share before is itself one seen after a cut, spared
        // its pauses: its throttles count toward the evidence.
        let seen = self.throttles + if self.again { self.before.1 } else { 0 };
        let stayed = two
            && seen >= STAYED_THROTTLES
            && z >= -FELL_SIGMAS
            && self.clearly_above_known(after, n)
            && self.did_not_fall(before, after, self.answer_rate(paused));
        if stayed {
            return Outcome::Stayed;
        }
        // Holding the rate costs little either way (a limit is below the rate before the
        // cut, noise takes only what it took before): wait until noise at the share before
        // (or one that matters, [`NOISE_THAT_MATTERS`]) would have shown, or the share
        // clearly fell.
        let needed =
            (EXPECTED / before.max(NOISE_THAT_MATTERS)).clamp(EVIDENCE as f64, MOST_ANSWERS as f64);
        let quiet = n >= needed && self.throttles < LEAST_THROTTLES;
        if quiet || z < -FELL_SIGMAS || self.answers >= MOST_ANSWERS || open >= window || expired {
            return Outcome::Fell;
        }
        Outcome::Open
    }

    /// The trial after a further cut at `now`, when this one said [`Outcome::Again`]: its
    /// answers are the share before, at the rate they came at (`paused` as for
    /// [`Trial::outcome`]).
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn again(&self, now: Instant, paused: Duration) -> Self {
        Self {
            again: true,
            before: (self.answers, self.throttles),
            before_rate: self.answer_rate(paused),
            answers: 0,
            throttles: 0,
            started: now,
            first: None,
            last: None,
            noise: self.noise,
        }
    }

    /// The rate the answers since the cut came at (per second open; `paused` as for
    /// [`Trial::outcome`]).
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn answer_rate(&self, paused: Duration) -> f64 {
        (self.answers.saturating_sub(1)) as f64 / self.open(paused).as_secs_f64().max(0.1)
    }

    /// Time between the first and the last answer since the cut, pauses left out.
    fn open(&self, paused: Duration) -> Duration {
        match (self.first, self.last) {
            (Some(a), Some(b)) => b.saturating_duration_since(a).saturating_sub(paused),
            _ => Duration::ZERO,
        }
    }

    /// Is a share `after` of `n` answers clearly above the noise already known? A limit
    /// with noise on top shows the noise's share after a cut below it: that is a cut that
    /// helped, not one to undo.
    fn clearly_above_known(&self, after: f64, n: f64) -> bool {
        let p = self.noise;
        after - p > FELL_SIGMAS * (p * (1.0 - p) / n).sqrt()
    }

    /// Did the cut leave the throttled share where it was, the share `before` it at
    /// `before_rate` and `after` it at `after_rate`? Only a real cut ([`MEASURED_CUT`])
    /// can say so, and the share must lie nearer the share before it than the one a limit
    /// would leave: a limit at what was accepted before, `rate × (1 − share)`, refuses
    /// `1 − limit / rate` of the lower rate (nothing, once below it).
    fn did_not_fall(&self, before: f64, after: f64, after_rate: f64) -> bool {
        let limit = self.before_rate * (1.0 - before);
        let if_limit = (1.0 - limit / after_rate).max(0.0);
        after_rate <= (1.0 - MEASURED_CUT) * self.before_rate
            && after < MOST
            && after >= KEPT * before
            && after >= f64::midpoint(before, if_limit)
    }
}

/// Does a host that answered `answers` with `throttles` among them accept most requests:
/// at least [`ACCEPTED_PER_THROTTLE`] per throttle? Noise is a small share; a first answer
/// that is a throttle, or throttles in a row, are a host refusing, and pause it.
fn mostly_accepting(answers: u64, throttles: u64) -> bool {
    answers.saturating_sub(throttles) >= ACCEPTED_PER_THROTTLE * throttles
}

/// Is `throttles` of `answers` a host refusing rather than metering: three or more, and a
/// share above [`MOST`] by two standard deviations (so 3 of 15 is chance, 3 of 3 is not)?
#[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
pub(super) fn refusing(answers: u64, throttles: u64) -> bool {
    if throttles <= LEAST_THROTTLES || answers == 0 {
        return false;
    }
    let share = throttles as f64 / answers as f64;
    share - 2.0 * (share * (1.0 - share) / answers as f64).sqrt() >= MOST
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Clock, ManualClock};
    use std::time::UNIX_EPOCH;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn t0() -> Instant {
        ManualClock::new(UNIX_EPOCH).monotonic()
    }

    /// A trial after `before` at 100/s, with `(answers, throttles)` after the cut spread
    /// evenly over `secs` seconds (the first a success).
    fn after(before: (u64, u64), after: (u64, u64), secs: u64, noise: Option<f64>) -> Trial {
        let t0 = t0();
        let noise = noise.map(|fraction| Noise { fraction });
        let mut t = Trial::new(t0, before, 100.0, noise.as_ref());
        let n = u32::try_from(after.0).unwrap();
        for i in 0..after.0 {
            let at = t0 + S(secs) * u32::try_from(i).unwrap() / n;
            let throttled = (i + 1) * after.1 / after.0 != i * after.1 / after.0;
            t.count(at, throttled);
        }
        t
    }

    fn judged(before: (u64, u64), a: (u64, u64), secs: u64, noise: Option<f64>) -> Outcome {
        after(before, a, secs, noise).outcome(t0() + S(secs), S(10), Duration::ZERO)
    }

    #[test]
    fn throttles_that_go_on_at_the_same_share_after_a_cut_are_noise() {
        // 5 % before at 100/s, 5 % after at 85/s (340 answers in 4 s).
        assert_eq!(judged((200, 10), (340, 17), 4, None), Outcome::Stayed);
        // The same share over too short a time: a limiter's burst may still be spent.
        assert_eq!(judged((200, 10), (85, 4), 1, None), Outcome::Open);
        // Not a cut: the same rate after it says nothing, and noise would have shown.
        assert_eq!(judged((200, 10), (400, 20), 4, None), Outcome::Fell);
        // A trickle is not enough to call it noise (a limit just below the rate).
        assert_eq!(judged((200, 10), (170, 3), 2, None), Outcome::Open);
    }

    #[test]
    fn throttles_that_stop_or_fall_after_a_cut_are_a_limit() {
        assert_eq!(judged((200, 10), (340, 0), 4, None), Outcome::Fell);
        assert_eq!(judged((200, 20), (340, 3), 4, None), Outcome::Fell);
        // A limit with noise on top: after a cut below it, only the known noise.
        assert_eq!(judged((300, 30), (340, 17), 4, Some(0.05)), Outcome::Fell);
    }

    #[test]
    fn throttles_that_rise_after_a_cut_or_come_in_a_row_are_a_refusing_host() {
        assert_eq!(judged((400, 2), (100, 10), 2, None), Outcome::Rose);
        assert_eq!(judged((200, 10), (3, 3), 1, None), Outcome::Rose);
        // Trials start only where the host was metering, not refusing.
        let t0 = t0();
        assert!(!Trial::new(t0, (8, 1), 100.0, None).refusing_before());
        assert!(Trial::new(t0, (2, 1), 100.0, None).refusing_before());
        assert!(Trial::new(t0, (100, 30), 100.0, None).refusing_before());
    }

    #[test]
    fn a_share_before_read_off_a_few_answers_is_compared_again_after_a_deeper_cut() {
        // One throttle in 24 answers before the cut says nothing; 2 of 60 since do.
        let first = after((24, 1), (60, 2), 3, None);
        assert_eq!(
            first.outcome(t0() + S(3), S(10), Duration::ZERO),
            Outcome::Again
        );
        // The next trial compares with those 60, and counts their throttles too: 3 more
        // of 60 at a rate 20 % lower is noise.
        let t0 = t0();
        let mut next = first.again(t0, Duration::ZERO);
        for i in 0..60u32 {
            next.count(t0 + S(4) * i / 60, i % 20 == 19);
        }
        assert_eq!(
            next.outcome(t0 + S(4), S(10), Duration::ZERO),
            Outcome::Stayed
        );
    }

    #[test]
    fn only_a_share_clearly_above_the_noise_is_a_limit_again() {
        let n = Noise { fraction: 0.05 };
        assert!(!n.exceeded(0.02, 39, 39));
        assert!(!n.exceeded(0.02, 1000, 60));
        assert!(n.exceeded(0.02, 1000, 120));
        // Few answers: a wider margin.
        assert!(!n.exceeded(0.02, 60, 7));
        assert!(n.exceeded(0.02, 60, 10));
    }
}
