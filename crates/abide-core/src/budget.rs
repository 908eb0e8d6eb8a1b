//! A retry budget shared by every worker talking to one provider.
//!
//! # Why a budget and not a retry count
//! A per-request cap ("at most 5 retries") bounds one request but not the fleet: when a
//! provider slows down, *every* request fails and retries, so N workers with 5 retries each
//! send up to 6× the normal traffic to a provider that is already struggling. A budget bounds
//! the *ratio*: retries may be at most `retry_ratio` of recent first attempts, plus a small
//! floor of `min_per_sec` so a quiet system can still retry. This is the design of Finagle's
//! `RetryBudget` and tower's `retry::budget`.
//!
//! # How
//! First attempts [`deposit`](RetryBudget::deposit); retries
//! [`try_withdraw`](RetryBudget::try_withdraw). Both are counted in a sliding window of
//! `ttl`, kept in [`BUCKETS`] buckets over the monotonic `now` passed in (no clock is read).
//! A retry is allowed when, counting it,
//! `retries ≤ retry_ratio × first_attempts + min_per_sec × ttl` over the window.
//! The window spans between `ttl` and `ttl + ttl / BUCKETS` (the current bucket is partly
//! elapsed), so the floor is never exceeded per second and the ratio holds over a long run.
//!
//! # Recovery: a retry that succeeds pays for itself
//! The budget exists to stop retries multiplying traffic while a provider *fails*. Counting
//! every retry, it also throttled the recovery: after an outage every waiting item is a
//! retry and there are no first attempts left to earn allowance, so a queue of 100 items
//! drained at the floor (1/s) long after the provider answered again. Yet a retry that
//! succeeded added no failing traffic: it delivered work that was owed. So a successful
//! retry is [`refund`](RetryBudget::refund)ed: its withdrawal is taken out of the bucket it
//! was counted in, and the next retry may go. What the window counts is then the retries
//! still *unproven or failed*, and the bound reads: retries that did not succeed
//! ≤ `retry_ratio × first_attempts + min_per_sec × ttl` per window.
//!
//! - Under a sustained failure nothing is refunded: exactly the old bound.
//! - Once the provider answers, retries flow at the pacer's rate, with at most the
//!   allowance outstanding (sent, answer not yet seen) at any moment.
//! - A refund only returns a withdrawal, it never adds credit (unlike gRPC's retry
//!   throttling, where each success adds tokens to a bucket): a long run of successes
//!   cannot bank allowance for the next outage, and a refund whose withdrawal has left
//!   the window changes nothing.
//! - Why not exempt retries whose timing the server set with a `Retry-After`: a server in
//!   trouble may answer every request with `Retry-After: 1`, and every waiting item would
//!   then retry each second. The pacer's pause already spaces such retries; the budget is
//!   the bound on how many of them may fail.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Number of buckets the `ttl` window is cut into.
pub const BUCKETS: u32 = 10;

/// Shortest `ttl` accepted (shorter values are raised to it), as in tower.
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// Longest `ttl` accepted (longer values are lowered to it), as in tower.
pub const MAX_TTL: Duration = Duration::from_secs(60);
/// Largest `retry_ratio` accepted.
pub const MAX_RETRY_RATIO: f64 = 1000.0;

/// Configuration of a [`RetryBudget`].
///
/// # Default
/// - ttl: 10 s
/// - min_per_sec: 1 retry per second
/// - retry_ratio: 0.1 (retries ≤ 10 % of first attempts)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBudgetConfig {
    /// How long a first attempt counts towards the budget; clamped to [1 s, 60 s].
    pub ttl: Duration,
    /// Retries per second always allowed, even without first attempts.
    pub min_per_sec: u32,
    /// Retries allowed per first attempt; clamped to [0, 1000], NaN means 0.
    pub retry_ratio: f64,
}

impl Default for RetryBudgetConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(10),
            min_per_sec: 1,
            retry_ratio: 0.1,
        }
    }
}

/// A thread-safe retry budget. Methods take `&self`; share one budget between all workers
/// of a provider with `Arc`.
///
/// # Examples
/// ```
/// use abide_core::budget::{RetryBudget, RetryBudgetConfig};
/// use abide_core::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let clock = ManualClock::new(UNIX_EPOCH);
/// let cfg = RetryBudgetConfig { ttl: Duration::from_secs(10), min_per_sec: 0, retry_ratio: 0.5 };
/// let budget = RetryBudget::new(cfg, clock.monotonic());
/// for _ in 0..4 {
///     budget.deposit(clock.monotonic());
/// }
/// assert!(budget.try_withdraw(clock.monotonic()));
/// assert!(budget.try_withdraw(clock.monotonic()));
/// assert!(!budget.try_withdraw(clock.monotonic())); // 2 retries for 4 first attempts
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    ratio: f64,
    floor: f64,
    state: Mutex<Buckets>,
}

/// What the budget holds right now, for progress displays and logs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BudgetSnapshot {
    /// First attempts counted in the window.
    pub first_attempts: u64,
    /// Retries counted in the window.
    pub retries: u64,
    /// Retries the window allows in total (`ratio × first_attempts + floor`).
    pub allowance: f64,
}

impl RetryBudget {
    /// A budget with an empty window starting at `now`.
    pub fn new(cfg: RetryBudgetConfig, now: Instant) -> Self {
        let ttl = cfg.ttl.clamp(MIN_TTL, MAX_TTL);
        let ratio = if cfg.retry_ratio.is_nan() {
            0.0
        } else {
            cfg.retry_ratio.clamp(0.0, MAX_RETRY_RATIO)
        };
        Self {
            ratio,
            floor: f64::from(cfg.min_per_sec) * ttl.as_secs_f64(),
            state: Mutex::new(Buckets::new(ttl, BUCKETS, now)),
        }
    }

    /// Record one first attempt at `now`.
    pub fn deposit(&self, now: Instant) {
        self.lock().add(now, 1, 0);
    }

    /// Ask to spend one retry at `now`. Returns `true` (and counts the retry) when the budget
    /// allows it, `false` otherwise (the caller then gives up or parks the item).
    pub fn try_withdraw(&self, now: Instant) -> bool {
        let mut b = self.lock();
        let (first, retries) = b.sums(now);
        // u64 → f64 is exact below 2^53; counts in one window never get near that.
        #[allow(clippy::cast_precision_loss)]
        let allowed = (retries + 1) as f64 <= self.ratio * first as f64 + self.floor;
        if allowed {
            b.add(now, 0, 1);
        }
        allowed
    }

    /// Return the retry withdrawn at `withdrawn_at` (the `now` of the successful
    /// [`try_withdraw`](RetryBudget::try_withdraw)) because it succeeded: it no longer
    /// counts against the budget (see the module docs). Call it once per successful retry,
    /// never for a failed one. A withdrawal that has already left the window is not counted
    /// any more, so refunding it changes nothing.
    pub fn refund(&self, withdrawn_at: Instant) {
        self.lock().sub(withdrawn_at, 0, 1);
    }

    /// The counts in the window ending at `now`.
    pub fn snapshot(&self, now: Instant) -> BudgetSnapshot {
        let (first_attempts, retries) = self.lock().sums(now);
        #[allow(clippy::cast_precision_loss)]
        let allowance = self.ratio * first_attempts as f64 + self.floor;
        BudgetSnapshot {
            first_attempts,
            retries,
            allowance,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        // The counts stay consistent even if a holder panicked: every update is one add.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A sliding window of (a, b) counters in `n + 1` buckets of `width`, over monotonic time
/// measured from `base`. Shared by the budget and the pacer's throttle window.
#[derive(Debug, Clone)]
pub(crate) struct Buckets {
    base: Instant,
    width: Duration,
    /// `(epoch, a, b)`; a slot whose epoch is outside the window is stale.
    slots: Vec<(u64, u64, u64)>,
    /// Highest epoch seen; an earlier `now` (callers racing) counts in the latest bucket.
    latest: u64,
}

impl Buckets {
    /// A window of `span` cut into `n` buckets (at least 1).
    pub(crate) fn new(span: Duration, n: u32, base: Instant) -> Self {
        let n = n.max(1);
        let width = (span / n).max(Duration::from_micros(1));
        Self {
            base,
            width,
            slots: vec![(u64::MAX, 0, 0); n as usize + 1],
            latest: 0,
        }
    }

    fn epoch(&mut self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.base);
        let e = u64::try_from(since.as_nanos() / self.width.as_nanos()).unwrap_or(u64::MAX);
        self.latest = self.latest.max(e);
        self.latest
    }

    pub(crate) fn add(&mut self, now: Instant, a: u64, b: u64) {
        let e = self.epoch(now);
        let len = self.slots.len() as u64;
        let slot = &mut self.slots[usize::try_from(e % len).unwrap_or(0)];
        if slot.0 != e {
            *slot = (e, 0, 0);
        }
        slot.1 = slot.1.saturating_add(a);
        slot.2 = slot.2.saturating_add(b);
    }

    /// Take `(a, b)` back out of the bucket that counted `at`, if it is still in the window
    /// (saturating at zero). Does not move the window.
    pub(crate) fn sub(&mut self, at: Instant, a: u64, b: u64) {
        let since = at.saturating_duration_since(self.base);
        let Ok(e) = u64::try_from(since.as_nanos() / self.width.as_nanos()) else {
            return;
        };
        let len = self.slots.len() as u64;
        if e > self.latest || self.latest - e >= len {
            return;
        }
        let slot = &mut self.slots[usize::try_from(e % len).unwrap_or(0)];
        if slot.0 == e {
            slot.1 = slot.1.saturating_sub(a);
            slot.2 = slot.2.saturating_sub(b);
        }
    }

    /// Forget every count (the window restarts empty).
    pub(crate) fn clear(&mut self) {
        self.slots.fill((u64::MAX, 0, 0));
    }

    /// Sums over the buckets of epochs `(e − n, e]`, i.e. the last `span` plus the elapsed
    /// part of the current bucket.
    pub(crate) fn sums(&mut self, now: Instant) -> (u64, u64) {
        let e = self.epoch(now);
        let len = self.slots.len() as u64;
        self.slots
            .iter()
            .filter(|s| s.0 != u64::MAX && s.0 <= e && e - s.0 < len)
            .fold((0, 0), |(a, b), s| {
                (a.saturating_add(s.1), b.saturating_add(s.2))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Clock, ManualClock};
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    fn cfg(ttl_secs: u64, min_per_sec: u32, retry_ratio: f64) -> RetryBudgetConfig {
        RetryBudgetConfig {
            ttl: Duration::from_secs(ttl_secs),
            min_per_sec,
            retry_ratio,
        }
    }

    #[test]
    fn long_run_admits_no_more_than_fraction_plus_floor() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let budget = RetryBudget::new(cfg(10, 1, 0.1), clock.monotonic());
        // 1000 s at 50 first attempts/s, every one failing and wanting a retry.
        let (mut first, mut retries) = (0u64, 0u64);
        for _ in 0..50_000 {
            budget.deposit(clock.monotonic());
            first += 1;
            if budget.try_withdraw(clock.monotonic()) {
                retries += 1;
            }
            clock.advance(Duration::from_millis(20));
        }
        let ceiling = 0.1 * first as f64 + 1.0 * 1000.0 + 10.0;
        assert!(
            (retries as f64) <= ceiling,
            "{retries} retries for {first} first attempts"
        );
        // And the budget is not needlessly stingy: it gets close to its allowance.
        assert!(
            (retries as f64) >= 0.9 * (0.1 * first as f64 + 900.0),
            "{retries}"
        );
    }

    #[test]
    fn zero_first_attempts_admit_only_the_floor_per_second() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let budget = RetryBudget::new(cfg(10, 2, 0.5), clock.monotonic());
        let mut admitted = 0u64;
        // 100 s of 100 retry requests per second, no first attempts at all.
        for _ in 0..10_000 {
            if budget.try_withdraw(clock.monotonic()) {
                admitted += 1;
            }
            clock.advance(Duration::from_millis(10));
        }
        assert!(admitted <= 2 * 100 + 20, "{admitted}");
        assert!(admitted >= 150, "{admitted}");
        // Within any one ttl window the floor holds exactly.
        let snap = budget.snapshot(clock.monotonic());
        assert!(snap.retries as f64 <= snap.allowance);
        assert_eq!(snap.first_attempts, 0);
    }

    #[test]
    fn deposits_expire_after_ttl() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let budget = RetryBudget::new(cfg(10, 0, 1.0), clock.monotonic());
        for _ in 0..5 {
            budget.deposit(clock.monotonic());
        }
        clock.advance(Duration::from_secs(12));
        assert!(!budget.try_withdraw(clock.monotonic()));
        budget.deposit(clock.monotonic());
        assert!(budget.try_withdraw(clock.monotonic()));
        assert!(!budget.try_withdraw(clock.monotonic()));
    }

    #[test]
    fn shared_between_threads_counts_every_withdrawal_once() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let now = clock.monotonic();
        let budget = Arc::new(RetryBudget::new(cfg(10, 0, 0.5), now));
        for _ in 0..100 {
            budget.deposit(now);
        }
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = Arc::clone(&budget);
                std::thread::spawn(move || (0..100).filter(|_| b.try_withdraw(now)).count())
            })
            .collect();
        let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, 50);
    }

    /// Regression: after an outage every waiting item is a retry; once the provider answers
    /// again they drained at the floor (1/s). A retry that succeeds pays for the next.
    #[test]
    fn successful_retries_refund_so_a_backlog_drains_after_recovery() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let budget = RetryBudget::new(RetryBudgetConfig::default(), clock.monotonic());
        // An outage: 30 s of failing retries exhausts the window.
        let mut failed = 0;
        for _ in 0..3000 {
            if budget.try_withdraw(clock.monotonic()) {
                failed += 1;
            }
            clock.advance(Duration::from_millis(10));
        }
        assert!(failed <= 40, "{failed}");
        assert!(!budget.try_withdraw(clock.monotonic()));
        // Recovery: 100 waiting retries at 100/s, each answered 20 ms after it is sent.
        clock.advance(Duration::from_secs(1));
        let start = clock.monotonic();
        let mut delivered = 0;
        let mut denied = 0;
        let mut in_flight: Vec<(Instant, Instant)> = Vec::new();
        while delivered < 100 && clock.monotonic() < start + Duration::from_secs(10) {
            let now = clock.monotonic();
            in_flight.retain(|&(at, answered)| {
                if answered <= now {
                    budget.refund(at);
                    delivered += 1;
                    false
                } else {
                    true
                }
            });
            if delivered + in_flight.len() < 100 {
                if budget.try_withdraw(now) {
                    in_flight.push((now, now + Duration::from_millis(20)));
                } else {
                    denied += 1;
                }
            }
            clock.advance(Duration::from_millis(10));
        }
        let took = clock.monotonic() - start;
        assert_eq!(delivered, 100, "{denied} denied");
        // The outage's failed retries still fill the window at first and leave it at the
        // floor's pace, but every freed token is reused every 30 ms: a few seconds, where
        // drawing at the floor took 100.
        assert!(took <= Duration::from_secs(5), "took {took:?}");
    }

    #[test]
    fn refunds_never_let_failing_retries_exceed_the_allowance() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let clock = ManualClock::new(UNIX_EPOCH);
        let budget = RetryBudget::new(cfg(10, 1, 0.1), clock.monotonic());
        // 10 s ttl in 1 s buckets: count failures per second, check every window of 11.
        let mut failed_per_sec = vec![0u64; 300];
        let mut first_per_sec = vec![0u64; 300];
        let mut refunded = 0u64;
        for ms in (0..300_000u64).step_by(5) {
            let sec = usize::try_from(ms / 1000).unwrap();
            // Success comes and goes in 20 s phases; first attempts at 20/s.
            let healthy = (ms / 20_000) % 2 == 1;
            if ms % 50 == 0 {
                budget.deposit(clock.monotonic());
                first_per_sec[sec] += 1;
            }
            let withdrawn = clock.monotonic();
            if budget.try_withdraw(withdrawn) {
                if healthy && rng.random_bool(0.9) {
                    budget.refund(withdrawn);
                    refunded += 1;
                } else {
                    failed_per_sec[sec] += 1;
                }
            }
            clock.advance(Duration::from_millis(5));
        }
        for end in 11..300 {
            let failed: u64 = failed_per_sec[end - 11..end].iter().sum();
            let first: u64 = first_per_sec[end - 11..end].iter().sum();
            assert!(
                failed as f64 <= 0.1 * first as f64 + 10.0 + 2.0,
                "window ending {end}s: {failed} failed retries for {first} first attempts"
            );
        }
        // And healthy phases let retries through far beyond the allowance (300 s of it
        // admit 0.1 × 6000 + 300 = 900 retries without refunds).
        assert!(refunded > 2000, "{refunded}");
    }

    #[test]
    fn a_refund_outside_the_window_changes_nothing() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let budget = RetryBudget::new(cfg(10, 1, 0.0), clock.monotonic());
        let early = clock.monotonic();
        assert!(budget.try_withdraw(early));
        clock.advance(Duration::from_secs(12));
        for _ in 0..10 {
            assert!(budget.try_withdraw(clock.monotonic()));
        }
        assert!(!budget.try_withdraw(clock.monotonic()));
        budget.refund(early);
        assert!(!budget.try_withdraw(clock.monotonic()));
        assert_eq!(budget.snapshot(clock.monotonic()).retries, 10);
    }

    #[test]
    fn hostile_config_is_clamped() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let b = RetryBudget::new(cfg(0, 0, f64::NAN), clock.monotonic());
        b.deposit(clock.monotonic());
        assert!(!b.try_withdraw(clock.monotonic()));
        let b = RetryBudget::new(cfg(u64::MAX, 0, f64::INFINITY), clock.monotonic());
        b.deposit(clock.monotonic());
        assert_eq!(b.snapshot(clock.monotonic()).allowance, MAX_RETRY_RATIO);
    }
}
