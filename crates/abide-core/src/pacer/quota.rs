//! Quota-exact pacing: when the server says how many units are left (`remaining`, the IETF
//! `r`) until its quota resets (`reset`, `t`) under a policy of `limit` units (`q`, per
//! window `w` where one is advertised; `X-RateLimit-*` names none), spend those units at once and wait for the reset, rather than space requests at
//! `headroom ×` the rate. See "Quota-exact pacing" in the [module docs](super).
//!
//! # Counting what is left
//! An answer's `remaining` counts every request the server processed before that one. Of
//! ours, those still unanswered may or may not be counted; so may those answered since the
//! request was reserved (an answer that arrives after it was reserved may have been
//! processed before or after it). Both are subtracted: `remaining − unanswered − answered
//! since` is a lower bound of what is left, for any answer, however late or reordered, as
//! long as nobody else spends the quota (a share with another client is read from the
//! next answer). Each slot handed out while units are left takes one of them.
//!
//! # When the units are spent
//! Whether the quota comes back in one step at the reset (a fixed window; a GCRA whose
//! burst is the whole quota) or a unit at a time (a sliding window counter, a token bucket
//! with a small burst) the headers do not say. The pacer learns it from the first answer
//! after the reset: the quota back whole (at least half of it) is a step, and from then on
//! a sender that spent the units waits until the reset, plus [`CLOCK_ERROR`], where the next
//! window's slots begin at the rate; otherwise the refill is gradual, and the usual spacing
//! (with the short hold after an admitted last unit) paces what comes back, with no burst
//! beyond it (see [`Quota::peek`]). Before it is
//! known the wait is for the reset too, after a burst plus one interval at the advertised
//! rate: a sliding window that took a whole quota in a burst admits one more then (its previous window
//! weighs `1 − 1/q` of it), so the answer that tells the two apart is not refused. A first
//! answer showing less than half the quota left with next to nothing spent names a bucket
//! whose burst is smaller than its quota: gradual at once.
//!
//! The reset is read as an upper bound: the server computed `t` before the answer arrived
//! and rounded it up (RFC 9110 delay-seconds), so `arrival + t` is never before the reset;
//! the smallest such bound over the window's answers is kept.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::ratelimit::RateLimitInfo;

/// Added to a reset before the next window's first slot: the two clocks' disagreement over
/// a window (a rate error) and the server's rounding of time, not the network (an answer's
/// arrival already bounds the reset from above).
pub(super) const CLOCK_ERROR: Duration = Duration::from_millis(2);
/// A slot unanswered this long after its time is taken for lost (a caller that reserved
/// and never sent): it no longer holds a unit back.
const LOST_AFTER: Duration = Duration::from_secs(30);
/// Most unanswered slots remembered (the oldest is forgotten beyond).
const MAX_OUTSTANDING: usize = 65_536;

/// How the quota comes back after its reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refill {
    /// Not seen yet.
    Unknown,
    /// Whole at the reset (a fixed window; a GCRA with a burst of the whole quota).
    Stepped,
    /// A unit at a time (a sliding window counter; a bucket with a small burst).
    Gradual,
}

/// What [`Quota::grant`] allows a reservation at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Grant {
    /// A unit is left: the slot may be now (a burst within the quota).
    Now,
    /// Nothing is left: a slot spaced at the rate, no earlier than this instant (the reset
    /// plus the clock error), if any.
    After(Option<Instant>),
}

/// One unanswered slot.
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    reserved_at: Instant,
    slot: Instant,
}

/// The advertised quota as the pacer spends it.
#[derive(Debug)]
pub(super) struct Quota {
    /// The policy in force: name, units per window, window (if advertised).
    policy: Option<(Option<String>, u64, Option<Duration>)>,
    /// The window, or where none is advertised the longest reset seen (`X-RateLimit-*`).
    span: Duration,
    /// Units that may still be handed out before `reset`.
    avail: u64,
    /// Upper bound of the instant the current window's quota comes back.
    reset: Option<Instant>,
    /// The units were spent: the first answer after the reset tells a step from a trickle.
    waiting: bool,
    /// A unit of the current window was handed out ahead of the spacing.
    burst: bool,
    /// The reset that began the current window (an answer to a slot before it is stale).
    start: Option<Instant>,
    pub(super) refill: Refill,
    outstanding: VecDeque<Outstanding>,
    /// When the answers of the last [`LOST_AFTER`] arrived, oldest first.
    answers: VecDeque<Instant>,
}

impl Default for Quota {
    fn default() -> Self {
        Self {
            policy: None,
            avail: 0,
            reset: None,
            waiting: false,
            burst: false,
            start: None,
            span: Duration::ZERO,
            refill: Refill::Unknown,
            outstanding: VecDeque::new(),
            answers: VecDeque::new(),
        }
    }
}

impl Quota {
    /// Is the pacer spending an advertised quota (an answer carried one)?
    pub(super) fn active(&self) -> bool {
        self.policy.is_some()
    }

    /// What a reservation at `now` may take, without taking it; `None` when no quota is
    /// advertised.
    pub(super) fn peek(&self, now: Instant) -> Option<Grant> {
        let (_, limit, _) = self.policy.as_ref()?;
        // Under a gradual refill the units left are a bucket's burst, and what they are
        // worth changes with the bucket's rate: a GCRA whose limit rises keeps its TAT, so
        // the same state leaves fewer units at the new rate, and a burst read at the old
        // one is refused (`abide sim --scenario limit-changes`, 10/s -> 20/s). There the
        // spacing alone paces, as where no count is advertised.
        if self.avail > 0 && self.refill != Refill::Gradual && self.reset.is_some_and(|r| now < r) {
            return Some(Grant::Now);
        }
        let bound = match self.refill {
            Refill::Gradual => None,
            Refill::Stepped => self.reset.map(|r| r + CLOCK_ERROR),
            // After a burst, one interval more: what a sliding window then admits.
            Refill::Unknown if self.burst => self
                .reset
                .map(|r| r + CLOCK_ERROR + interval(*limit, self.span)),
            Refill::Unknown => self.reset.map(|r| r + CLOCK_ERROR),
        };
        Some(Grant::After(bound))
    }

    /// As [`Quota::peek`], taking the unit when one is left.
    pub(super) fn grant(&mut self, now: Instant) -> Option<Grant> {
        let g = self.peek(now)?;
        if g == Grant::Now {
            self.avail -= 1;
            self.waiting = self.avail == 0;
            self.burst = true;
        }
        Some(g)
    }

    /// A slot at `slot` was handed out at `reserved_at`.
    pub(super) fn record(&mut self, reserved_at: Instant, slot: Instant) {
        if self.outstanding.len() >= MAX_OUTSTANDING {
            self.outstanding.pop_front();
        }
        self.outstanding
            .push_back(Outstanding { reserved_at, slot });
    }

    /// The slot at `slot` will not be used.
    pub(super) fn release(&mut self, slot: Instant) {
        if let Some(i) = self.outstanding.iter().rposition(|o| o.slot == slot) {
            self.outstanding.remove(i);
        }
    }

    /// An answer arrived at `now` for the slot reserved at `reserved_at` (`None`: not
    /// known; the oldest slot due is taken), carrying `rl` if the server sent rate-limit
    /// fields.
    pub(super) fn on_answer(
        &mut self,
        now: Instant,
        reserved_at: Option<Instant>,
        rl: Option<&RateLimitInfo>,
    ) {
        while self
            .outstanding
            .front()
            .is_some_and(|o| o.slot + LOST_AFTER < now)
        {
            self.outstanding.pop_front();
        }
        while self.answers.front().is_some_and(|a| *a + LOST_AFTER < now)
            || self.answers.len() >= MAX_OUTSTANDING
        {
            self.answers.pop_front();
        }
        let found = match reserved_at {
            Some(r) => self.outstanding.iter().position(|o| o.reserved_at == r),
            None => self.outstanding.iter().position(|o| o.slot <= now),
        };
        // Without its reservation, every answer remembered may have been processed after it.
        let slot = found
            .and_then(|i| self.outstanding.remove(i))
            .map_or_else(|| self.answers.front().copied().unwrap_or(now), |o| o.slot);
        // Answers that arrived by the time it was sent were processed before it: counted.
        let answered_since =
            (self.answers.len() - self.answers.partition_point(|a| *a <= slot)) as u64;
        self.answers.push_back(now);
        let Some((rl, remaining, reset, limit, window)) =
            rl.and_then(|rl| Some((rl, rl.remaining?, rl.reset?, rl.limit?, rl.window)))
        else {
            // Nothing (or not all of it) said: what the last answers said stands until its
            // reset (a throttle from another layer may carry no fields), then the spacing.
            return;
        };
        if limit == 0 || window.is_some_and(|w| w.is_zero()) {
            self.policy = None;
            return;
        }
        let policy = (rl.policy.clone(), limit, window);
        if self.policy.as_ref() != Some(&policy) {
            // A new policy: what was learned of the old one's refill does not carry over.
            *self = Self {
                outstanding: std::mem::take(&mut self.outstanding),
                answers: std::mem::take(&mut self.answers),
                ..Self::default()
            };
            self.policy = Some(policy);
        }
        if self.start.is_some_and(|s| slot < s) {
            // Sent before the current window began: it speaks of the last one.
            return;
        }
        self.span = window.unwrap_or(self.span.max(reset));
        let bound = now.checked_add(reset.min(self.span)).unwrap_or(now);
        // Slots after the reset spend the next window's units, not these.
        let reset_after = match self.reset {
            Some(r) if slot < r => r.min(bound),
            _ => bound,
        };
        let unanswered = self
            .outstanding
            .iter()
            .filter(|o| o.slot < reset_after)
            .count() as u64;
        let left = remaining.saturating_sub(unanswered + answered_since);
        if self.refill == Refill::Unknown
            && self.reset.is_none()
            && remaining.saturating_add(unanswered + answered_since + 1) < limit / 2
        {
            // The first answer: less than half the quota left with next to nothing spent
            // is a bucket with a smaller burst than its quota.
            self.refill = Refill::Gradual;
        }
        match self.reset {
            Some(r) if slot < r => self.reset = Some(r.min(bound)),
            passed => {
                // Sent after the reset: the first answer of a new window.
                if passed.is_some() && self.waiting && self.refill == Refill::Unknown {
                    self.refill = if remaining.saturating_mul(2) >= limit {
                        Refill::Stepped
                    } else {
                        Refill::Gradual
                    };
                }
                self.start = passed;
                self.reset = Some(bound);
                self.burst = false;
            }
        }
        self.avail = left;
        self.waiting = left == 0;
    }
}

/// One interval at `limit` per `window`.
fn interval(limit: u64, window: Duration) -> Duration {
    window / u32::try_from(limit.max(1)).unwrap_or(u32::MAX)
}
