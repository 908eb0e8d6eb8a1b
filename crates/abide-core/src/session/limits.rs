//! The documented range of every numeric setting of a [`SessionConfig`](super::SessionConfig),
//! enforced by [`SessionConfig::validate`](super::SessionConfig::validate).
//!
//! A range holds every value a run can need and refuses the rest: a value outside it is a
//! typo or an attack on the loop it feeds (`backoff_cap_secs = 2^63`, `retry_ratio = 1e9`),
//! never a tuning. Where the crate also clamps a value it is given unchecked (the pacer, the
//! retry budget, the `Retry-After` floor), the range lies within that clamp, so a validated
//! value is used exactly as written.
//!
//! Each constant is named after the setting's path in [`SessionConfig`](super::SessionConfig); the providers
//! file writes the same settings with a unit suffix (`retry.max_age_secs`,
//! `retry.backoff_base_ms`, `pacer.throttle_pause_ms`).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::setting_error::SettingError;
use crate::budget::{MAX_RETRY_RATIO, MAX_TTL, MIN_TTL};
use crate::pacer::{MAX_PAUSE, MAX_RATE, MIN_RATE};
use crate::retry_after::MIN_FLOOR;

/// An inclusive range `min ..= max` of one setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits<T> {
    /// Smallest value accepted.
    pub min: T,
    /// Largest value accepted.
    pub max: T,
}

impl<T: PartialOrd> Limits<T> {
    const fn new(min: T, max: T) -> Self {
        Self { min, max }
    }

    /// Whether `v` lies in `min ..= max` (never for NaN).
    pub fn contains(&self, v: &T) -> bool {
        *v >= self.min && *v <= self.max
    }
}

impl<T: SettingValue> Limits<T> {
    /// `v` checked against this range, for a setting kept outside [`SessionConfig`](super::SessionConfig)
    /// (a rate hint, a sender count): the same error [`SessionConfig::validate`](super::SessionConfig::validate)
    /// gives, naming `setting`.
    ///
    /// # Errors
    /// [`SettingError::OutOfRange`] when `v` is outside (NaN included).
    ///
    /// # Examples
    /// ```
    /// use abide_core::session::limits::RATE_HINT;
    ///
    /// assert!(RATE_HINT.check("rate_hint", 200.0).is_ok());
    /// let e = RATE_HINT.check("rate_hint", 1e9).unwrap_err();
    /// assert_eq!(e.setting(), "rate_hint");
    /// ```
    pub fn check(&self, setting: &'static str, v: T) -> Result<(), SettingError> {
        if self.contains(&v) {
            return Ok(());
        }
        Err(SettingError::OutOfRange {
            setting: Cow::Borrowed(setting),
            value: v.shown(),
            range: self.to_string(),
        })
    }
}

/// A kind of value a setting holds, as an error shows it: numbers plainly, durations as
/// `Debug` does (`1.5s`, `100ms`).
pub trait SettingValue: PartialOrd + Copy {
    /// The value as shown in a [`SettingError`].
    fn shown(self) -> String;
}

impl SettingValue for u32 {
    fn shown(self) -> String {
        self.to_string()
    }
}

impl SettingValue for f64 {
    fn shown(self) -> String {
        self.to_string()
    }
}

impl SettingValue for Duration {
    fn shown(self) -> String {
        format!("{self:?}")
    }
}

impl<T: SettingValue> fmt::Display for Limits<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.min.shown(), self.max.shown())
    }
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const fn millis(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One hour.
const HOUR: Duration = secs(3600);
/// One day.
const DAY: Duration = secs(86_400);

// --- retry -----------------------------------------------------------------------------

/// `retry.max_attempts`: attempts per window before the item is deferred.
pub const MAX_ATTEMPTS: Limits<u32> = Limits::new(1, 10_000);
/// `retry.unknown_max_attempts`: attempts per window after an unrecognised answer.
pub const UNKNOWN_MAX_ATTEMPTS: Limits<u32> = Limits::new(1, 10_000);
/// `retry.max_age`: age after which a pending item is deferred; up to a year.
pub const MAX_AGE: Limits<Duration> = Limits::new(secs(1), secs(365 * 86_400));
/// `retry.backoff.base`: the first retry's delay ceiling.
pub const BACKOFF_BASE: Limits<Duration> = Limits::new(millis(1), HOUR);
/// `retry.backoff.cap`: the longest own backoff; at least `retry.backoff.base`.
pub const BACKOFF_CAP: Limits<Duration> = Limits::new(millis(1), DAY);

// --- budget ----------------------------------------------------------------------------

/// `budget.ttl`: how long a first attempt counts (the budget's clamp).
pub const BUDGET_TTL: Limits<Duration> = Limits::new(MIN_TTL, MAX_TTL);
/// `budget.min_per_sec`: retries per second always allowed.
pub const BUDGET_MIN_PER_SEC: Limits<u32> = Limits::new(0, 100_000);
/// `budget.retry_ratio`: retries allowed per first attempt (the budget's clamp).
pub const BUDGET_RETRY_RATIO: Limits<f64> = Limits::new(0.0, MAX_RETRY_RATIO);

// --- pacer -----------------------------------------------------------------------------

/// `pacer.initial_rate` (a rate hint), requests per second; then held within
/// `min_rate ..= max_rate`.
pub const PACER_INITIAL_RATE: Limits<f64> = Limits::new(MIN_RATE, MAX_RATE);
/// `pacer.min_rate`, requests per second.
pub const PACER_MIN_RATE: Limits<f64> = Limits::new(MIN_RATE, MAX_RATE);
/// `pacer.max_rate`, requests per second; at least `pacer.min_rate`.
pub const PACER_MAX_RATE: Limits<f64> = Limits::new(MIN_RATE, MAX_RATE);
/// `pacer.burst`: requests that may go back to back.
pub const PACER_BURST: Limits<f64> = Limits::new(1.0, 10_000.0);
/// `pacer.decrease_factor`: the rate after a decrease, as a share of the ceiling estimate.
pub const PACER_DECREASE_FACTOR: Limits<f64> = Limits::new(0.01, 1.0);
/// `pacer.increase_per_sec`: additive climb after a decrease, requests per second per
/// second.
pub const PACER_INCREASE_PER_SEC: Limits<f64> = Limits::new(0.0, MAX_RATE);
/// `pacer.throttle_threshold`: throttled share that decreases a rate at the ceiling.
pub const PACER_THROTTLE_THRESHOLD: Limits<f64> = Limits::new(0.0, 1.0);
/// `pacer.window`: the sliding window of throttles and acceptances.
pub const PACER_WINDOW: Limits<Duration> = Limits::new(millis(100), HOUR);
/// `pacer.headroom`: share of an advertised rate aimed at.
pub const PACER_HEADROOM: Limits<f64> = Limits::new(0.01, 1.0);
/// `pacer.recovery`: clean time back to the ceiling after a decrease.
pub const PACER_RECOVERY: Limits<Duration> = Limits::new(millis(100), HOUR);
/// `pacer.throttle_pause`: the host's first pause after a throttle that named no delay.
pub const PACER_THROTTLE_PAUSE: Limits<Duration> = Limits::new(millis(100), MAX_PAUSE);
/// `pacer.max_throttle_pause`: the longest such pause; at least `pacer.throttle_pause`.
pub const PACER_MAX_THROTTLE_PAUSE: Limits<Duration> = Limits::new(millis(100), MAX_PAUSE);

// --- Retry-After ------------------------------------------------------------------------

/// `retry_after.floor`: shortest delay ever chosen (at least [`MIN_FLOOR`]).
pub const RETRY_AFTER_FLOOR: Limits<Duration> = Limits::new(MIN_FLOOR, HOUR);
/// `retry_after.cap`: longest delay ever chosen; at least `retry_after.floor`.
pub const RETRY_AFTER_CAP: Limits<Duration> = Limits::new(MIN_FLOOR, DAY);
/// `retry_after.unparseable_wait`: the wait when a value cannot be read (then within
/// floor and cap).
pub const UNPARSEABLE_WAIT: Limits<Duration> = Limits::new(MIN_FLOOR, DAY);
/// `retry_after.unparseable_jitter`: random wait added to it.
pub const UNPARSEABLE_JITTER: Limits<Duration> = Limits::new(Duration::ZERO, HOUR);

// --- session ---------------------------------------------------------------------------

/// `budget_denied_delay`: least wait of a retry the budget refused.
pub const BUDGET_DENIED_DELAY: Limits<Duration> = Limits::new(millis(100), HOUR);
/// `hold_through_pause`: longest host pause a delivery waits through (0: none).
pub const HOLD_THROUGH_PAUSE: Limits<Duration> = Limits::new(Duration::ZERO, MAX_PAUSE);
/// `max_admit_rounds`: slots voided by new pauses before the item is handed back.
pub const MAX_ADMIT_ROUNDS: Limits<u32> = Limits::new(1, 1000);
/// `outage_pause`: host pause after the first transport failure of an outage.
pub const OUTAGE_PAUSE: Limits<Duration> = Limits::new(millis(100), HOUR);
/// `max_outage_pause`: the longest such pause; at least `outage_pause`.
pub const MAX_OUTAGE_PAUSE: Limits<Duration> = Limits::new(millis(100), HOUR);
/// `refusal_streak`: terminal `403`s in a row that mean a refused credential (0: never).
pub const REFUSAL_STREAK: Limits<u32> = Limits::new(0, 10_000);
/// `refusal_span`: longest gap between two refusals of such a streak.
pub const REFUSAL_SPAN: Limits<Duration> = Limits::new(secs(1), DAY);
/// `refusal_pause`: host pause when a refused credential is recognised.
pub const REFUSAL_PAUSE: Limits<Duration> = Limits::new(millis(100), DAY);

// --- settings that feed a session ------------------------------------------------------

/// A rate hint (the providers file's `rate_hint`), requests per second: the pacer's
/// `initial_rate`, and its `max_rate` when above the default.
pub const RATE_HINT: Limits<f64> = Limits::new(MIN_RATE, MAX_RATE);
/// Concurrent senders to one host (a providers file's `concurrency`, `--workers`): what
/// [`PacerConfig::cold_start_rate`](crate::PacerConfig::cold_start_rate) is sized for, and
/// the most requests in flight a concurrency quota is believed for.
pub const SENDERS: Limits<u32> = Limits::new(1, crate::ratelimit::MAX_CONCURRENCY);

/// A fail-over wait (the providers file's `failover.after_pending_secs`): how long an item
/// waits at a provider before it moves on; at least a second, at most `retry.max_age`'s
/// longest (a year).
pub const FAILOVER_AFTER_PENDING: Limits<Duration> = Limits::new(secs(1), secs(365 * 86_400));

// --- classify --------------------------------------------------------------------------

/// `classify.http` keys: HTTP status codes (RFC 9110 §15: three digits, 100–599).
pub const HTTP_STATUS: Limits<u32> = Limits::new(100, 599);
