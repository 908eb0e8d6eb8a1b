//! Pauses of the whole host: the server's (`Retry-After`, an exhausted quota until its
//! reset), the pacer's own growing pause after a throttle that named no delay, and the
//! record of paused stretches the estimate leaves out of "time the host could accept".
//!
//! See "A throttle without a delay still pauses the host" in the [module docs](super).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::config::PacerConfig;
use crate::backoff::capped_doubling;

/// Every pause of one host.
#[derive(Debug, Default)]
pub(super) struct Pauses {
    /// End of the current (or last) pause; a pause only ever extends.
    end: Option<Instant>,
    /// Consecutive throttles without a server delay (each paused the host longer).
    streak: u32,
    /// Start and end of the last pause the pacer chose itself after such a throttle.
    own: Option<(Instant, Instant)>,
    /// Paused stretches of the last window, oldest first, not overlapping: time in which
    /// nothing could be accepted, so no evidence about the limit.
    stretches: VecDeque<(Instant, Instant)>,
}

impl Pauses {
    /// The end of the pause in force at `now`, if any.
    pub(super) fn until(&self, now: Instant) -> Option<Instant> {
        self.end.filter(|p| *p > now)
    }

    /// The end of the last pause known, even if it is over (a reservation never lands
    /// before it).
    pub(super) fn end(&self) -> Option<Instant> {
        self.end
    }

    /// An answer arriving while the pacer's own throttle pause lasts was sent before it
    /// began (nothing is admitted during a pause): an echo of the throttle that caused it.
    pub(super) fn after_own(&self, now: Instant) -> bool {
        self.own.is_none_or(|(_, end)| now >= end)
    }

    /// Extend the pause to `until`; with `now`, remember the stretch it adds for
    /// [`Pauses::within`].
    pub(super) fn extend(&mut self, now: Option<Instant>, until: Instant) {
        if let Some(now) = now {
            let from = self.end.filter(|p| *p > now).unwrap_or(now);
            if until > from {
                match self.stretches.back_mut() {
                    Some(last) if last.1 >= from => last.1 = last.1.max(until),
                    _ => self.stretches.push_back((from, until)),
                }
            }
        }
        self.end = Some(self.end.map_or(until, |p| p.max(until)));
    }

    /// A throttle without a server delay, arriving after the last own pause ended: pause
    /// for `throttle_pause`, doubled per consecutive one.
    pub(super) fn own_throttle(&mut self, cfg: &PacerConfig, now: Instant) {
        self.streak = self.streak.saturating_add(1);
        let d = throttle_pause(cfg, self.streak);
        self.own = Some((now, now + d));
        self.extend(Some(now), now + d);
    }

    /// A success sent after the last own pause: the next such throttle starts over.
    pub(super) fn reset_streak(&mut self) {
        self.streak = 0;
    }

    /// How much of `[from, to)` the host was paused.
    pub(super) fn within(&self, from: Instant, to: Instant) -> Duration {
        self.stretches
            .iter()
            .map(|&(a, b)| b.min(to).saturating_duration_since(a.max(from)))
            .sum()
    }

    /// Drop stretches that ended `span` or more before `now` (older than anything asked).
    pub(super) fn forget_older_than(&mut self, span: Duration, now: Instant) {
        while self.stretches.front().is_some_and(|p| p.1 + span <= now) {
            self.stretches.pop_front();
        }
    }
}

/// The pause after the `streak`-th consecutive throttle without a server delay:
/// `throttle_pause × 2^(streak − 1)`, at most `max_throttle_pause`.
fn throttle_pause(cfg: &PacerConfig, streak: u32) -> Duration {
    capped_doubling(
        cfg.throttle_pause,
        cfg.max_throttle_pause,
        streak.saturating_sub(1),
    )
}
