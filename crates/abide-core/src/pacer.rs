//! Per-host send pacing that learns the provider's limit (AIMD) and obeys its instructions.
//!
//! # Why
//! Retrying politely is not enough: a throttle says the *sender* is too fast, so every later
//! request to that host must slow down too, not just the one that was refused. One [`Pacer`]
//! per remote host, shared by all workers, turns verdicts into a send rate:
//!
//! - **Spacing** (GCRA, "virtual scheduling" of ITU-T I.371): a theoretical arrival time
//!   (TAT) advances by `1 / rate` per reservation; [`Pacer::reserve`] hands out
//!   `max(now, TAT − burst tolerance, pause end)`.
//! - **Multiplicative decrease**: when the fraction of throttled responses over `window`
//!   exceeds `throttle_threshold`, `rate × decrease_factor`. Requests already in flight were
//!   sent at the old rate and will keep coming back throttled; like TCP's once-per-RTT rule,
//!   verdicts arriving within a cooldown of `window / 10` after a decrease are not counted
//!   towards the next one, and the counts restart empty, so a burst of in-flight throttles
//!   halves the rate once rather than collapsing it to the floor.
//! - **Additive increase**: on a success, when no throttle was seen in the last `window`,
//!   `rate + increase_per_sec × clean seconds since the last success` (at most 1 s of credit
//!   per success, so an idle host does not jump to full speed on its first reply), up to
//!   `max_rate` or the advertised target.
//! - **Server instructions win**: a `Retry-After` on a throttle pauses the whole host until
//!   `now + delay`; rate-limit headers set a target of `headroom × advertised rate` (the rate
//!   drops to it at once and never climbs above it); `remaining = 0` with a reset pauses the
//!   host until the reset. Every remote number is floored and capped ([`MAX_PAUSE`], rate
//!   limits) before it reaches a sleep or a rate.
//!
//! Time is the monotonic `now: Instant` passed in; the pacer never reads a clock.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::budget::Buckets;
use crate::classify::{Verdict, VerdictClass};

/// Lowest rate ever used: one request per hour (requests per second).
pub const MIN_RATE: f64 = 1.0 / 3600.0;
/// Highest rate ever used (requests per second).
pub const MAX_RATE: f64 = 1_000_000.0;
/// Longest pause a remote can impose through one `Retry-After` or rate-limit reset.
pub const MAX_PAUSE: Duration = Duration::from_secs(600);
/// Additive-increase credit per success, at most.
const MAX_CREDIT: Duration = Duration::from_secs(1);

/// Configuration of a [`Pacer`]. Rates are in requests per second. Out-of-range or NaN
/// values are clamped by [`Pacer::new`].
///
/// # Default
/// - initial_rate: 10/s, min_rate: 0.1/s, max_rate: 1000/s
/// - burst: 1 (requests that may go back to back)
/// - decrease_factor: 0.5, increase_per_sec: 1/s per clean second
/// - throttle_threshold: 0.02 (2 % throttled over the window)
/// - window: 10 s
/// - headroom: 0.9 (aim at 90 % of an advertised limit)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerConfig {
    /// Rate at start.
    pub initial_rate: f64,
    /// Lowest rate AIMD may reach.
    pub min_rate: f64,
    /// Highest rate AIMD may reach.
    pub max_rate: f64,
    /// How many requests may be sent back to back (≥ 1).
    pub burst: f64,
    /// Rate multiplier on a decrease, in (0, 1].
    pub decrease_factor: f64,
    /// Rate added per clean second (requests per second, per second).
    pub increase_per_sec: f64,
    /// Throttled fraction of responses over `window` above which the rate decreases.
    pub throttle_threshold: f64,
    /// Sliding window over which throttles are counted.
    pub window: Duration,
    /// Fraction of an advertised rate we aim at, in (0, 1].
    pub headroom: f64,
}

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            initial_rate: 10.0,
            min_rate: 0.1,
            max_rate: 1000.0,
            burst: 1.0,
            decrease_factor: 0.5,
            increase_per_sec: 1.0,
            throttle_threshold: 0.02,
            window: Duration::from_secs(10),
            headroom: 0.9,
        }
    }
}

impl PacerConfig {
    fn sanitized(self) -> Self {
        let d = Self::default();
        let num = |v: f64, dflt: f64, lo: f64, hi: f64| {
            if v.is_nan() {
                dflt.clamp(lo, hi)
            } else {
                v.clamp(lo, hi)
            }
        };
        let min_rate = num(self.min_rate, d.min_rate, MIN_RATE, MAX_RATE);
        let max_rate = num(self.max_rate, d.max_rate, min_rate, MAX_RATE);
        Self {
            initial_rate: num(self.initial_rate, d.initial_rate, min_rate, max_rate),
            min_rate,
            max_rate,
            burst: num(self.burst, d.burst, 1.0, MAX_RATE),
            decrease_factor: num(self.decrease_factor, d.decrease_factor, 0.01, 1.0),
            increase_per_sec: num(self.increase_per_sec, d.increase_per_sec, 0.0, MAX_RATE),
            throttle_threshold: num(self.throttle_threshold, d.throttle_threshold, 0.0, 1.0),
            window: self
                .window
                .clamp(Duration::from_millis(100), Duration::from_secs(3600)),
            headroom: num(self.headroom, d.headroom, 0.01, 1.0),
        }
    }
}

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
/// assert_eq!(pacer.reserve(t0), t0);
/// assert_eq!(pacer.reserve(t0), t0 + Duration::from_millis(250));
/// ```
#[derive(Debug)]
pub struct Pacer {
    cfg: PacerConfig,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    rate: f64,
    target: Option<f64>,
    tat: Instant,
    pause_end: Option<Instant>,
    /// Counts that drive decreases: (responses, throttles); cleared on each decrease.
    decide: Buckets,
    /// Every response and throttle the remote sent, for display; never cleared.
    observed: Buckets,
    last_throttle: Option<Instant>,
    cooldown_until: Option<Instant>,
    last_success: Option<Instant>,
    decreases: u64,
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
    /// Multiplicative decreases applied so far.
    pub decreases: u64,
}

impl Pacer {
    /// A pacer at `cfg.initial_rate`, with its first slot free at `now`.
    pub fn new(cfg: PacerConfig, now: Instant) -> Self {
        let cfg = cfg.sanitized();
        Self {
            state: Mutex::new(State {
                rate: cfg.initial_rate,
                target: None,
                tat: now,
                pause_end: None,
                decide: Buckets::new(cfg.window, 10, now),
                observed: Buckets::new(cfg.window, 10, now),
                last_throttle: None,
                cooldown_until: None,
                last_success: None,
                decreases: 0,
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
    /// A pause that begins after a reservation does not move it: check
    /// [`Pacer::paused_until`] again before sending.
    pub fn reserve(&self, now: Instant) -> Instant {
        let mut s = self.lock();
        let interval = interval(s.rate);
        let tolerance = interval.mul_f64(self.cfg.burst - 1.0);
        let mut at = now;
        if let Some(t) = s.tat.checked_sub(tolerance) {
            at = at.max(t);
        }
        if let Some(p) = s.pause_end {
            at = at.max(p);
        }
        s.tat = s.tat.max(at) + interval;
        at
    }

    /// Feed the verdict of a response from this host, observed at `now`.
    pub fn on_verdict(&self, now: Instant, verdict: &Verdict) {
        let cfg = &self.cfg;
        let mut s = self.lock();

        if let Some(rl) = &verdict.rate_limit {
            if let Some(adv) = rl.advertised_rate().filter(|r| r.is_finite() && *r > 0.0) {
                let target = (cfg.headroom * adv).clamp(cfg.min_rate, cfg.max_rate);
                s.target = Some(target);
                s.rate = s.rate.min(target);
            }
            if rl.exhausted() {
                if let Some(reset) = rl.reset {
                    s.pause(now + reset.min(MAX_PAUSE));
                }
            }
        }

        let throttled = verdict.class == VerdictClass::Throttle;
        s.observed.add(now, 1, u64::from(throttled));
        if throttled {
            if let Some(ra) = &verdict.retry_after {
                s.pause(now + ra.delay.min(MAX_PAUSE));
            }
            s.last_throttle = Some(now);
        }
        if s.cooldown_until.is_some_and(|c| now < c) {
            // Answers to requests sent at the old rate: no evidence about the new one.
            return;
        }
        s.decide.add(now, 1, u64::from(throttled));

        if throttled {
            let (total, throttles) = s.decide.sums(now);
            if fraction(throttles, total) > cfg.throttle_threshold {
                s.rate = (s.rate * cfg.decrease_factor).clamp(cfg.min_rate, cfg.max_rate);
                s.decreases += 1;
                s.decide.clear();
                s.cooldown_until = Some(now + cfg.window / 10);
            }
        } else if verdict.class == VerdictClass::Success {
            let clean_from = s.last_throttle.map(|t| t + cfg.window);
            if clean_from.is_none_or(|c| now >= c) {
                let since = [s.last_success, clean_from].into_iter().flatten().max();
                let credit = since.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
                let ceiling = s.target.unwrap_or(cfg.max_rate).min(cfg.max_rate);
                let raised = s.rate + cfg.increase_per_sec * credit.min(MAX_CREDIT).as_secs_f64();
                s.rate = raised.min(ceiling);
            }
            s.last_success = Some(now);
        }
    }

    /// Pause the whole host until `until` (a pause only ever extends; a shorter one is
    /// ignored).
    pub fn pause_until(&self, until: Instant) {
        self.lock().pause(until);
    }

    /// The end of the current pause, if the host is paused at `now`.
    pub fn paused_until(&self, now: Instant) -> Option<Instant> {
        self.lock().pause_end.filter(|p| *p > now)
    }

    /// Current rate in requests per second.
    pub fn rate(&self) -> f64 {
        self.lock().rate
    }

    /// Target rate from advertised rate-limit headers (already × headroom), if any.
    pub fn target(&self) -> Option<f64> {
        self.lock().target
    }

    /// Fraction of responses over the last `window` before `now` that were throttles
    /// (0 when there were none), counting everything the remote sent.
    pub fn throttle_rate(&self, now: Instant) -> f64 {
        let (total, throttles) = self.lock().observed.sums(now);
        fraction(throttles, total)
    }

    /// Everything a progress display needs, at `now`.
    pub fn snapshot(&self, now: Instant) -> PacerSnapshot {
        let mut s = self.lock();
        let (total, throttles) = s.observed.sums(now);
        PacerSnapshot {
            rate: s.rate,
            target: s.target,
            paused_until: s.pause_end.filter(|p| *p > now),
            throttle_rate: fraction(throttles, total),
            decreases: s.decreases,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update leaves the state consistent, so a panicked holder is harmless.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn pause(&mut self, until: Instant) {
        self.pause_end = Some(self.pause_end.map_or(until, |p| p.max(until)));
    }
}

/// Time between sends at `rate` (requests per second, already within [MIN_RATE, MAX_RATE]).
fn interval(rate: f64) -> Duration {
    Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::from_secs(3600))
}

#[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
fn fraction(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ratelimit::{RateLimitInfo, RateLimitSource};
    use crate::retry_after::{DelayReason, RetryDelay};
    use crate::{Clock, ManualClock};
    use proptest::prelude::*;
    use std::time::UNIX_EPOCH;

    fn verdict(class: VerdictClass) -> Verdict {
        Verdict {
            class,
            reason: class.as_str().to_owned(),
            retry_after: None,
            rate_limit: None,
        }
    }

    fn throttle_with_retry_after(delay: Duration) -> Verdict {
        Verdict {
            retry_after: Some(RetryDelay {
                delay,
                reason: DelayReason::Honoured,
                raw: Some(delay.as_secs().to_string()),
                retry_after: Some(delay),
            }),
            ..verdict(VerdictClass::Throttle)
        }
    }

    fn rate_limit(limit: u64, remaining: u64, window_secs: u64) -> RateLimitInfo {
        RateLimitInfo {
            source: RateLimitSource::Ietf,
            policy: None,
            limit: Some(limit),
            remaining: Some(remaining),
            reset: Some(Duration::from_secs(window_secs)),
            window: Some(Duration::from_secs(window_secs)),
        }
    }

    fn setup(initial_rate: f64) -> (ManualClock, Instant, Pacer) {
        let clock = ManualClock::new(UNIX_EPOCH);
        let t0 = clock.monotonic();
        let cfg = PacerConfig {
            initial_rate,
            ..PacerConfig::default()
        };
        (clock, t0, Pacer::new(cfg, t0))
    }

    #[test]
    fn reservations_are_spaced_by_one_over_rate() {
        let (_, t0, p) = setup(20.0);
        let slots: Vec<_> = (0..5).map(|_| p.reserve(t0) - t0).collect();
        let ms = Duration::from_millis;
        assert_eq!(slots, [ms(0), ms(50), ms(100), ms(150), ms(200)]);
        // After idling, the next slot is free at once but no credit piles up (burst 1).
        let later = t0 + Duration::from_secs(10);
        assert_eq!(p.reserve(later), later);
        assert_eq!(p.reserve(later), later + ms(50));
    }

    #[test]
    fn burst_lets_that_many_go_back_to_back() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let t0 = clock.monotonic();
        let cfg = PacerConfig {
            initial_rate: 10.0,
            burst: 3.0,
            ..PacerConfig::default()
        };
        let p = Pacer::new(cfg, t0);
        let slots: Vec<_> = (0..5).map(|_| p.reserve(t0) - t0).collect();
        let ms = Duration::from_millis;
        assert_eq!(slots, [ms(0), ms(0), ms(0), ms(100), ms(200)]);
    }

    #[test]
    fn halves_on_throttle_once_per_burst_and_climbs_back_while_clean() {
        let (clock, _, p) = setup(100.0);
        // A burst of 20 in-flight throttles within 50 ms: one decrease, not twenty.
        for _ in 0..20 {
            p.on_verdict(clock.monotonic(), &verdict(VerdictClass::Throttle));
            clock.advance(Duration::from_millis(2));
        }
        assert_eq!(p.rate(), 50.0);
        assert_eq!(p.snapshot(clock.monotonic()).decreases, 1);
        // Throttles keep coming after the cooldown: another halving.
        clock.advance(Duration::from_secs(2));
        p.on_verdict(clock.monotonic(), &verdict(VerdictClass::Throttle));
        assert_eq!(p.rate(), 25.0);
        // No increase while a throttle is within the window.
        clock.advance(Duration::from_secs(5));
        p.on_verdict(clock.monotonic(), &verdict(VerdictClass::Success));
        assert_eq!(p.rate(), 25.0);
        // Clean successes every 100 ms for 30 s: +1/s per clean second, after the window.
        for _ in 0..300 {
            clock.advance(Duration::from_millis(100));
            p.on_verdict(clock.monotonic(), &verdict(VerdictClass::Success));
        }
        let r = p.rate();
        assert!((r - (25.0 + 25.0)).abs() < 1.5, "rate {r}");
    }

    #[test]
    fn rare_throttles_below_threshold_do_not_decrease() {
        let (clock, _, p) = setup(10.0);
        for i in 0..1000 {
            let class = if i % 100 == 99 {
                VerdictClass::Throttle
            } else {
                VerdictClass::Success
            };
            clock.advance(Duration::from_millis(10));
            p.on_verdict(clock.monotonic(), &verdict(class));
        }
        assert_eq!(p.snapshot(clock.monotonic()).decreases, 0);
        let tr = p.throttle_rate(clock.monotonic());
        assert!((0.005..0.02).contains(&tr), "{tr}");
    }

    #[test]
    fn never_below_min_rate() {
        let (clock, _, p) = setup(1.0);
        for _ in 0..100 {
            clock.advance(Duration::from_secs(2));
            p.on_verdict(clock.monotonic(), &verdict(VerdictClass::Throttle));
        }
        assert_eq!(p.rate(), PacerConfig::default().min_rate);
    }

    #[test]
    fn retry_after_pauses_every_reservation_until_its_end() {
        let (clock, t0, p) = setup(10.0);
        p.on_verdict(t0, &throttle_with_retry_after(Duration::from_secs(30)));
        let end = t0 + Duration::from_secs(30);
        assert_eq!(p.paused_until(t0), Some(end));
        for i in 0..10 {
            let now = t0 + Duration::from_secs(i);
            assert!(p.reserve(now) >= end);
        }
        // A shorter pause does not shorten it; a remote cannot pause us for more than 10 min.
        p.pause_until(t0 + Duration::from_secs(1));
        assert_eq!(p.paused_until(t0), Some(end));
        p.on_verdict(t0, &throttle_with_retry_after(Duration::from_secs(86_400)));
        assert_eq!(p.paused_until(t0), Some(t0 + MAX_PAUSE));
        clock.advance(MAX_PAUSE);
        assert_eq!(p.paused_until(clock.monotonic()), None);
    }

    #[test]
    fn retry_after_on_a_non_throttle_does_not_pause_the_host() {
        let (_, t0, p) = setup(10.0);
        let v = Verdict {
            class: VerdictClass::Retry,
            ..throttle_with_retry_after(Duration::from_secs(30))
        };
        p.on_verdict(t0, &v);
        assert_eq!(p.paused_until(t0), None);
    }

    // Needs `RateLimitInfo::advertised_rate` (helper A).
    #[test]
    fn headers_set_target_below_advertised_limit() {
        let (clock, t0, p) = setup(50.0);
        // 100 per 10 s = 10/s advertised; aim at 90 %.
        let v = Verdict {
            rate_limit: Some(rate_limit(100, 60, 10)),
            ..verdict(VerdictClass::Success)
        };
        p.on_verdict(t0, &v);
        let target = p.target().unwrap();
        assert!((target - 9.0).abs() < 1e-9, "{target}");
        assert!((p.rate() - 9.0).abs() < 1e-9);
        for _ in 0..100 {
            clock.advance(Duration::from_millis(500));
            p.on_verdict(clock.monotonic(), &v);
        }
        assert!(p.rate() <= 9.0 + 1e-9);
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
    fn hostile_config_is_clamped() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let t0 = clock.monotonic();
        let cfg = PacerConfig {
            initial_rate: f64::NAN,
            min_rate: -1.0,
            max_rate: f64::INFINITY,
            burst: 0.0,
            decrease_factor: 0.0,
            ..PacerConfig::default()
        };
        let p = Pacer::new(cfg, t0);
        assert_eq!(p.rate(), 10.0);
        assert_eq!(p.config().min_rate, MIN_RATE);
        assert_eq!(p.config().max_rate, MAX_RATE);
        assert_eq!(p.reserve(t0), t0);
        assert!(p.reserve(t0) > t0);
    }

    proptest! {
        #[test]
        fn reserve_never_earlier_than_now_or_a_pause(
            ops in proptest::collection::vec((0u64..5_000, 0u8..4, 0u64..100_000), 1..200),
            rate in 0.01f64..10_000.0,
            burst in 1.0f64..20.0,
        ) {
            let clock = ManualClock::new(UNIX_EPOCH);
            let t0 = clock.monotonic();
            let cfg = PacerConfig { initial_rate: rate, burst, ..PacerConfig::default() };
            let p = Pacer::new(cfg, t0);
            let mut pause_end: Option<Instant> = None;
            for (step_ms, op, arg_ms) in ops {
                clock.advance(Duration::from_millis(step_ms));
                let now = clock.monotonic();
                match op {
                    0 => {
                        let until = now + Duration::from_millis(arg_ms);
                        p.pause_until(until);
                        pause_end = pause_end.max(Some(until));
                    }
                    1 => {
                        let d = Duration::from_millis(arg_ms);
                        p.on_verdict(now, &throttle_with_retry_after(d));
                        pause_end = pause_end.max(Some(now + d.min(MAX_PAUSE)));
                    }
                    2 => p.on_verdict(now, &verdict(VerdictClass::Success)),
                    _ => {
                        let at = p.reserve(now);
                        prop_assert!(at >= now);
                        if let Some(end) = pause_end {
                            prop_assert!(at >= end);
                        }
                    }
                }
                let r = p.rate();
                prop_assert!((MIN_RATE..=MAX_RATE).contains(&r));
            }
        }
    }
}
