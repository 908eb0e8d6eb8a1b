// The module's documentation, how the pacer works and why, is design.md beside this file
// (rendered by rustdoc as the module page).
#![doc = include_str!("design.md")]

//!
//! # Files
//! - `config.rs`: [`PacerConfig`], its defaults and clamps.
//! - `schedule.rs`: spacing (GCRA) and the queue of reserved slots.
//! - `pauses.rs`: pauses of the host, the pacer's own after a throttle without a delay.
//! - `estimate.rs`: the ceiling estimate, cubic recovery and slow start: the rate.
//! - `estimate/known_noise.rs`: the estimate with noise known: throttles within it ignored.
//! - `estimate/trial.rs`: a cut on trial, undone when the throttles did not fall.
//! - `noise.rs`: throttles that do not follow the rate, told from a limit by what a cut does.
//! - `quota.rs`: an advertised count of units left, spent at once, and the wait for its reset.
//! - `tests.rs`, `search_tests.rs`: unit tests; the latter runs senders against model
//!   limiters in virtual time (GCRA with a burst of 10 or of a second's quota, fixed
//!   window, sliding window counter): cold start, the search.
//! - `quota_tests.rs`: quota-exact pacing, unit by unit and against the same model limiters.
//! - this file: [`Pacer`], which feeds each verdict to the four.

mod config;
mod estimate;
mod noise;
mod pauses;
mod quota;
mod schedule;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::classify::{Verdict, VerdictClass};

pub use config::{PacerConfig, MAX_PAUSE, MAX_RATE, MIN_RATE};
use estimate::{fraction, Estimate};
use pauses::Pauses;
use quota::{Grant, Quota};
use schedule::Schedule;
pub use schedule::SlotCounts;

/// A per-host pacer. Methods take `&self`; share one pacer per remote host between all
/// workers with `Arc`.
///
/// # Examples
/// ```
/// use abide_core::pacer::{Pacer, PacerConfig};
/// use abide_core::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let clock = ManualClock::new(UNIX_EPOCH);
/// let t0 = clock.monotonic();
/// let pacer = Pacer::new(PacerConfig { initial_rate: 4.0, ..PacerConfig::default() }, t0);
/// let slot = pacer.reserve(t0);
/// assert_eq!(slot, t0);
/// assert_eq!(pacer.reserve(t0), t0 + Duration::from_millis(250));
/// // When the slot arrives: still allowed to send? (A pause may have begun since.)
/// assert_eq!(pacer.admit(slot), Ok(()));
/// ```
#[derive(Debug)]
pub struct Pacer {
    cfg: PacerConfig,
    state: Mutex<State>,
}

/// Everything a pacer knows, in its three parts.
#[derive(Debug)]
struct State {
    schedule: Schedule,
    pauses: Pauses,
    estimate: Estimate,
    quota: Quota,
}

/// A point-in-time view of a [`Pacer`], for progress displays and logs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerSnapshot {
    /// Current rate, requests per second.
    pub rate: f64,
    /// Target set from advertised rate-limit headers (already × headroom), if any.
    pub target: Option<f64>,
    /// End of the current pause, if the host is paused at `now`.
    pub paused_until: Option<Instant>,
    /// Fraction of responses over the last window that were throttles.
    pub throttle_rate: f64,
    /// Decreases applied so far.
    pub decreases: u64,
    /// Estimated limit learned from throttles (requests per second), if any yet.
    pub ceiling: Option<f64>,
}

/// Why [`Pacer::reserve_within`] reserved nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotYet {
    /// The next slot is beyond the slot horizon: ask again at this instant.
    AskAgainAt(Instant),
    /// The next slot (this instant) lies after the caller's deadline.
    PastDeadline(Instant),
}

impl Pacer {
    /// A pacer at `cfg.initial_rate`, with its first slot free at `now`.
    pub fn new(cfg: PacerConfig, now: Instant) -> Self {
        let cfg = cfg.sanitized();
        Self {
            state: Mutex::new(State {
                schedule: Schedule::new(now),
                pauses: Pauses::default(),
                estimate: Estimate::new(&cfg, now),
                quota: Quota::default(),
            }),
            cfg,
        }
    }

    /// The configuration in use, after clamping.
    pub fn config(&self) -> &PacerConfig {
        &self.cfg
    }

    /// Reserve the next send slot and return the instant at which the caller may send:
    /// never earlier than `now` nor the end of a pause known at the time of the call.
    /// A pause that begins after a reservation does not move it: call [`Pacer::admit`] when
    /// the slot arrives.
    pub fn reserve(&self, now: Instant) -> Instant {
        self.lock().slot(&self.cfg, now, true)
    }

    /// Reserve the next slot only if the caller can use it now: `Ok(slot)` as
    /// [`Pacer::reserve`], or, with nothing reserved:
    /// - [`NotYet::AskAgainAt`]: during the first search, the next slot lies beyond the slot
    ///   horizon of `now` (see "How far ahead" in the module docs). A caller that sleeps
    ///   until a slot seconds away holds it at the rate of the moment it asked: when the
    ///   rate rises, slots already handed out keep their spacing, and what the host sees
    ///   lags the rate by the whole queue (40 senders at 10/s hold 4 s of slots).
    /// - [`NotYet::PastDeadline`]: the slot lies after `deadline` (a lease ending). A slot
    ///   the caller cannot use and gives up would still push every later slot back, and
    ///   callers giving up slot after slot would push the queue ahead of themselves for ever.
    ///
    /// # Errors
    /// [`NotYet`] when no slot was reserved.
    pub fn reserve_within(
        &self,
        now: Instant,
        deadline: Option<Instant>,
    ) -> Result<Instant, NotYet> {
        let s = &mut *self.lock();
        let rate = s.estimate.rate;
        let next = s.slot(&self.cfg, now, false);
        if deadline.is_some_and(|d| next > d) {
            return Err(NotYet::PastDeadline(next));
        }
        if s.quota.active() {
            // Spending an advertised quota: a slot taken far ahead at the rate could not be
            // moved up when units come back (at the reset, or as a sliding window slides).
            let horizon = slot_horizon(rate, false);
            if next > now + horizon {
                return Err(NotYet::AskAgainAt(next - horizon));
            }
        } else if s.estimate.first_search() {
            let horizon = slot_horizon(rate, s.estimate.target.is_some());
            if next > now + horizon {
                return Err(NotYet::AskAgainAt(next - horizon));
            }
        }
        Ok(s.slot(&self.cfg, now, true))
    }

    /// The slot [`Pacer::reserve`] would hand out at `now`, without taking it: `now` itself
    /// when neither the pace nor a pause holds a caller back.
    pub fn next_slot(&self, now: Instant) -> Instant {
        self.lock().slot(&self.cfg, now, false)
    }

    /// A slot handed out at `slot` that will not be used (its item goes back unsent): it
    /// no longer holds back a unit of an advertised quota.
    pub fn release(&self, slot: Instant) {
        self.lock().quota.release(slot);
    }

    /// How the slots handed out so far were granted (free at once or held back).
    pub fn slot_counts(&self) -> SlotCounts {
        self.lock().schedule.counts
    }

    /// May a caller whose reserved slot has arrived send at `now`? `Err(until)` when the host
    /// is paused until `until` (a pause that began after the slot was handed out): the slot is
    /// void; call [`Pacer::reserve`] again (it returns no earlier than `until`).
    ///
    /// # Errors
    /// The end of the pause in force at `now`.
    pub fn admit(&self, now: Instant) -> Result<(), Instant> {
        match self.paused_until(now) {
            Some(until) => Err(until),
            None => Ok(()),
        }
    }

    /// Feed the verdict of a response from this host, observed at `now`, when the caller does
    /// not know when the request was reserved. Answers arriving within `window / 10` after
    /// the end of the reservation queue at the last decrease are assumed to be for requests
    /// reserved before it (see the module docs); prefer [`Pacer::on_verdict_for`].
    pub fn on_verdict(&self, now: Instant, verdict: &Verdict) {
        let s = &mut *self.lock();
        let fresh = s.estimate.fresh_at(now);
        let after_pause = s.pauses.after_own(now);
        s.quota.on_answer(now, None, verdict.rate_limit.as_ref());
        self.apply(s, now, fresh, after_pause, verdict);
    }

    /// Feed the verdict of a response observed at `now` to a request whose slot was reserved
    /// at `reserved_at` (the `now` passed to the [`Pacer::reserve`] call that gave the slot
    /// it was sent in). A throttle for a request reserved before the last decrease was spaced
    /// at the old rate: it is counted (and its `Retry-After` obeyed) but cannot cause another
    /// decrease, so one overshoot costs one decrease however long the queue of slots was.
    pub fn on_verdict_for(&self, now: Instant, reserved_at: Instant, verdict: &Verdict) {
        let s = &mut *self.lock();
        let fresh = s.estimate.fresh_reserved(reserved_at);
        // Not `reserved_at`: a slot reserved before the pause but admitted after it is a
        // request sent after it, and its throttle is news.
        let after_pause = s.pauses.after_own(now);
        s.quota
            .on_answer(now, Some(reserved_at), verdict.rate_limit.as_ref());
        self.apply(s, now, fresh, after_pause, verdict);
    }

    /// `fresh`: the request was spaced at the current rate (may decrease it).
    /// `after_pause`: the answer arrived after the pacer's own last throttle pause ended
    /// (may grow or reset the consecutive-throttle count).
    fn apply(
        &self,
        s: &mut State,
        now: Instant,
        fresh: bool,
        after_pause: bool,
        verdict: &Verdict,
    ) {
        let cfg = &self.cfg;
        if let Some(rl) = &verdict.rate_limit {
            if let Some(adv) = rl.advertised_rate().filter(|r| r.is_finite() && *r > 0.0) {
                s.estimate.adopt_advertised(cfg, adv, &mut s.schedule, now);
            }
            let admitted = verdict.class == VerdictClass::Success;
            if let Some(pause) = rl.exhausted_pause(admitted) {
                s.pauses.extend(Some(now), now + pause.min(MAX_PAUSE));
            }
        }
        // A refusal by a concurrency quota says nothing about the rate (the session's limit
        // on requests in flight shrinks instead): its `Retry-After` is obeyed, nothing else.
        let concurrency_refusal = verdict.class == VerdictClass::Throttle
            && verdict
                .rate_limit
                .as_ref()
                .is_some_and(|rl| rl.concurrency_refused());
        if concurrency_refusal {
            s.schedule.note_traffic(now);
            if let Some(ra) = &verdict.retry_after {
                s.pauses.extend(Some(now), now + ra.delay.min(MAX_PAUSE));
            }
            return;
        }

        // A caller that never reserves: the traffic began at its first answer, at the latest.
        s.schedule.note_traffic(now);
        let throttled = verdict.class == VerdictClass::Throttle;
        s.estimate.observe(now, throttled);
        // A throttle within the noise (see `noise.rs`) sends back only its own item, which
        // waits its own `Retry-After`: pausing the host for each would cost the whole host
        // a pause per twenty requests at a 5 % share, whatever the rate.
        // So does one after a cut on trial that keeps to the share seen before the cut
        // (`estimate/trial.rs`): until the answers say whether the cut found a limit.
        let spared = s.estimate.within_noise(cfg, now)
            || s.estimate.trial_spares(cfg, now, fresh, &s.pauses);
        if throttled && !spared {
            let server_reset = verdict
                .rate_limit
                .as_ref()
                .is_some_and(|rl| rl.exhausted() && rl.reset.is_some());
            if let Some(ra) = &verdict.retry_after {
                s.pauses.extend(Some(now), now + ra.delay.min(MAX_PAUSE));
            } else if !server_reset && after_pause {
                // No delay from the server: our own, growing while throttles keep coming.
                s.pauses.own_throttle(cfg, now);
            }
        } else if verdict.class == VerdictClass::Success && after_pause {
            s.pauses.reset_streak();
        }
        if verdict.class == VerdictClass::Success {
            s.estimate.restore_after_outage(cfg);
        }
        if !fresh {
            // An answer to a request spaced at the old rate: no evidence about the new one.
            return;
        }
        match verdict.class {
            VerdictClass::Throttle => {
                s.estimate
                    .on_fresh_throttle(cfg, now, verdict, &mut s.pauses, &mut s.schedule);
            }
            VerdictClass::Success => {
                s.estimate
                    .on_fresh_success(cfg, now, &mut s.pauses, &mut s.schedule);
            }
            _ => s.estimate.on_fresh_other(now),
        }
    }

    /// Several nodes share this host's limit and this one sends `share` of the traffic
    /// (clamped to [0.01, 1]; 1 alone, the default): what it sees accepted is divided by it
    /// when the pacer estimates the host's limit. Set by a coordination layer.
    pub fn set_share(&self, share: f64) {
        let share = if share.is_nan() {
            1.0
        } else {
            share.clamp(0.01, 1.0)
        };
        self.lock().estimate.share = share;
    }

    /// This node's fraction of the host's traffic (see [`Pacer::set_share`]).
    pub fn share(&self) -> f64 {
        self.lock().estimate.share
    }

    /// Take a rate decided elsewhere at `now`: another node sharing this host's limit
    /// decreased to `rate` (requests per second) with the ceiling estimate `ceiling`, or
    /// this node joins late and starts from the shared estimate. It acts as a decrease of
    /// this pacer (requests reserved before `now` were spaced at the old rate) but is not
    /// counted in [`PacerSnapshot::decreases`], which counts this pacer's own. Both numbers
    /// are clamped to the configured rates, and the rate to an advertised target.
    pub fn adopt_shared(&self, now: Instant, rate: f64, ceiling: Option<f64>) {
        if !rate.is_finite() || rate <= 0.0 {
            return;
        }
        let ceiling = ceiling.filter(|c| c.is_finite() && *c > 0.0);
        let s = &mut *self.lock();
        s.estimate
            .adopt_shared(&self.cfg, now, rate, ceiling, &mut s.schedule);
    }

    /// Pause the whole host from `now` until `until`, a pause heard by another node: like
    /// a pause of its own, the time is left out of what the host could accept.
    pub fn adopt_pause(&self, now: Instant, until: Instant) {
        self.lock()
            .pauses
            .extend(Some(now), until.min(now + MAX_PAUSE));
    }

    /// Pause the whole host until `until` (a pause only ever extends; a shorter one is
    /// ignored).
    pub fn pause_until(&self, until: Instant) {
        self.lock().pauses.extend(None, until);
    }

    /// The end of the current pause, if the host is paused at `now`.
    pub fn paused_until(&self, now: Instant) -> Option<Instant> {
        self.lock().pauses.until(now)
    }

    /// Current rate in requests per second.
    pub fn rate(&self) -> f64 {
        self.lock().estimate.rate
    }

    /// Target rate from advertised rate-limit headers (already × headroom), if any.
    pub fn target(&self) -> Option<f64> {
        self.lock().estimate.target
    }

    /// The limit estimated at the last decrease (requests per second), if any yet.
    pub fn ceiling(&self) -> Option<f64> {
        self.lock().estimate.ceiling
    }

    /// Fraction of responses over the last `window` before `now` that were throttles
    /// (0 when there were none), counting everything the remote sent.
    pub fn throttle_rate(&self, now: Instant) -> f64 {
        let (total, throttles) = self.lock().estimate.observed.sums(now);
        fraction(throttles, total)
    }

    /// Everything a progress display needs, at `now`.
    pub fn snapshot(&self, now: Instant) -> PacerSnapshot {
        let mut s = self.lock();
        let (total, throttles) = s.estimate.observed.sums(now);
        PacerSnapshot {
            rate: s.estimate.rate,
            target: s.estimate.target,
            paused_until: s.pauses.until(now),
            throttle_rate: fraction(throttles, total),
            decreases: s.estimate.decreases,
            ceiling: s.estimate.ceiling,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update leaves the state consistent, so a panicked holder is harmless.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Shortest slot horizon while searching blind: under one [`estimate`] search round
/// (250 ms), so each doubling reaches the host within the round that decides the next.
const SEARCH_HORIZON: Duration = Duration::from_millis(100);
/// Shortest slot horizon under an advertised target: the rate rises only when the server
/// raises its limit, and 800 ms bounds the lag then without 40 senders polling every 100 ms.
const TARGET_HORIZON: Duration = Duration::from_millis(800);
/// The slot horizon in send intervals, when that is longer (a caller at a low rate takes a
/// slot two intervals ahead, not a poll per 100 ms).
const HORIZON_INTERVALS: u32 = 2;

/// How far ahead of `now` slots are handed out at `rate` (requests per second), with or
/// without an advertised target.
fn slot_horizon(rate: f64, target: bool) -> Duration {
    schedule::interval(rate)
        .saturating_mul(HORIZON_INTERVALS)
        .max(if target {
            TARGET_HORIZON
        } else {
            SEARCH_HORIZON
        })
}

impl State {
    /// The slot a reservation at `now` gets, taken (`take`) or only looked at.
    pub(super) fn slot(&mut self, cfg: &PacerConfig, now: Instant, take: bool) -> Instant {
        let pause_end = self.pauses.end();
        let rate = self.estimate.rate;
        let grant = if take {
            self.quota.grant(now)
        } else {
            self.quota.peek(now)
        };
        let at = match grant {
            Some(Grant::Now) => {
                // The server's count bounds the burst; the user's hard cap still spaces it
                // (a count is input: `remaining = 10^9` must not mean "as fast as possible").
                let at = pause_end
                    .map_or(now, |p| p.max(now))
                    .max(self.schedule.cap_next());
                if take {
                    self.schedule.take_at(now, at, rate, cfg.max_rate);
                }
                at
            }
            Some(Grant::After(bound)) => {
                let not_before = match (pause_end, bound) {
                    (Some(p), Some(b)) => Some(p.max(b)),
                    (p, b) => p.or(b),
                };
                if take {
                    self.schedule.reserve(now, rate, cfg.burst, not_before)
                } else {
                    self.schedule.peek(now, rate, cfg.burst, not_before)
                }
            }
            None if take => self.schedule.reserve(now, rate, cfg.burst, pause_end),
            None => self.schedule.peek(now, rate, cfg.burst, pause_end),
        };
        if take {
            self.quota.record(now, at);
        }
        at
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod search_tests;

#[cfg(test)]
mod convergence_tests;

#[cfg(test)]
mod noise_tests;

#[cfg(test)]
mod header_tests;

#[cfg(test)]
mod quota_tests;
