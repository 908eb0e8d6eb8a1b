//! [`SessionConfig::validate`]: every setting within its documented range ([`super::limits`]),
//! with an error naming the setting, the value and the range.
//!
//! The one validator: the providers file, the in-process client builder and any other
//! caller that takes settings from people check with it, and prefix
//! [`SettingError::setting`] with where the settings came from (`provider "sms": ...`).
//!
//! # For callers
//! Build the [`SessionConfig`] from the input, call [`SessionConfig::validate`], and name
//! the setting in the caller's own words where they differ; a providers file writes
//! units into its keys:
//!
//! | [`SettingError::setting`] | providers file |
//! |---|---|
//! | `retry.max_age` | `retry.max_age_secs` |
//! | `retry.backoff.base`, `retry.backoff.cap` | `retry.backoff_base_ms`, `retry.backoff_cap_secs` |
//! | `budget.ttl` | `budget.ttl_secs` |
//! | `pacer.throttle_pause`, `pacer.max_throttle_pause` | `pacer.throttle_pause_ms`, `pacer.max_throttle_pause_secs` |
//! | `pacer.initial_rate` | `rate_hint` |
//! | any other | the same path |
//!
//! A value kept outside [`SessionConfig`] that feeds it is checked against its constant
//! with [`Limits::check`] (`limits::RATE_HINT.check("rate_hint", v)`, `limits::SENDERS`),
//! which gives the same error.

use std::borrow::Cow;
use std::time::Duration;

use super::config::SessionConfig;
use super::limits::{self, Limits, SettingValue};
use super::setting_error::SettingError;

fn check<T: SettingValue>(setting: &'static str, v: T, l: Limits<T>) -> Result<(), SettingError> {
    l.check(setting, v)
}

/// `v` within `other ..= l.max` (and within `l`), where `other` is the value of the setting
/// `other_name` that bounds it from below.
fn check_at_least<T: SettingValue>(
    setting: &'static str,
    v: T,
    l: Limits<T>,
    other_name: &'static str,
    other: T,
) -> Result<(), SettingError> {
    check(setting, v, l)?;
    if v >= other {
        return Ok(());
    }
    Err(SettingError::OutOfRange {
        setting: Cow::Borrowed(setting),
        value: v.shown(),
        range: format!("{other_name} ({})..={}", other.shown(), l.max.shown()),
    })
}

fn duration(setting: &'static str, v: Duration, l: Limits<Duration>) -> Result<(), SettingError> {
    check(setting, v, l)
}

impl SessionConfig {
    /// Check every setting against its documented range ([`super::limits`]): numbers,
    /// durations, settings bounded by others (a backoff cap below its base, a maximum pause
    /// below the first), and classification overrides (statuses 100–599; a success stays a
    /// success). Settings are checked in declaration order; the first one outside its
    /// range is reported.
    ///
    /// A [`Session`](super::Session) built from a configuration that passes uses every
    /// value as written; one built without this check clamps what it must to stay safe.
    ///
    /// # Errors
    /// [`SettingError`] naming the setting by its path (`retry.max_attempts`), the value and
    /// the range.
    ///
    /// # Examples
    /// ```
    /// use abide_core::SessionConfig;
    /// use std::time::Duration;
    ///
    /// assert_eq!(SessionConfig::default().validate(), Ok(()));
    /// let mut cfg = SessionConfig::default();
    /// cfg.retry.backoff.cap = Duration::from_secs(1 << 63);
    /// let e = cfg.validate().unwrap_err();
    /// assert_eq!(e.setting(), "retry.backoff.cap");
    /// assert_eq!(e.to_string(), "retry.backoff.cap: 9223372036854775808s is outside 1ms..=86400s");
    /// ```
    pub fn validate(&self) -> Result<(), SettingError> {
        self.validate_retry()?;
        self.validate_budget()?;
        self.validate_pacer()?;
        self.validate_retry_after()?;
        self.validate_host()?;
        self.validate_classify()
    }

    fn validate_retry(&self) -> Result<(), SettingError> {
        let r = &self.retry;
        check("retry.max_attempts", r.max_attempts, limits::MAX_ATTEMPTS)?;
        check(
            "retry.unknown_max_attempts",
            r.unknown_max_attempts,
            limits::UNKNOWN_MAX_ATTEMPTS,
        )?;
        duration("retry.max_age", r.max_age, limits::MAX_AGE)?;
        duration("retry.backoff.base", r.backoff.base, limits::BACKOFF_BASE)?;
        check_at_least(
            "retry.backoff.cap",
            r.backoff.cap,
            limits::BACKOFF_CAP,
            "retry.backoff.base",
            r.backoff.base,
        )
    }

    fn validate_budget(&self) -> Result<(), SettingError> {
        let b = &self.budget;
        duration("budget.ttl", b.ttl, limits::BUDGET_TTL)?;
        check(
            "budget.min_per_sec",
            b.min_per_sec,
            limits::BUDGET_MIN_PER_SEC,
        )?;
        check(
            "budget.retry_ratio",
            b.retry_ratio,
            limits::BUDGET_RETRY_RATIO,
        )
    }

    fn validate_pacer(&self) -> Result<(), SettingError> {
        let p = &self.pacer;
        check(
            "pacer.initial_rate",
            p.initial_rate,
            limits::PACER_INITIAL_RATE,
        )?;
        check("pacer.min_rate", p.min_rate, limits::PACER_MIN_RATE)?;
        check_at_least(
            "pacer.max_rate",
            p.max_rate,
            limits::PACER_MAX_RATE,
            "pacer.min_rate",
            p.min_rate,
        )?;
        check("pacer.burst", p.burst, limits::PACER_BURST)?;
        check(
            "pacer.decrease_factor",
            p.decrease_factor,
            limits::PACER_DECREASE_FACTOR,
        )?;
        check(
            "pacer.increase_per_sec",
            p.increase_per_sec,
            limits::PACER_INCREASE_PER_SEC,
        )?;
        check(
            "pacer.throttle_threshold",
            p.throttle_threshold,
            limits::PACER_THROTTLE_THRESHOLD,
        )?;
        duration("pacer.window", p.window, limits::PACER_WINDOW)?;
        check("pacer.headroom", p.headroom, limits::PACER_HEADROOM)?;
        duration("pacer.recovery", p.recovery, limits::PACER_RECOVERY)?;
        duration(
            "pacer.throttle_pause",
            p.throttle_pause,
            limits::PACER_THROTTLE_PAUSE,
        )?;
        check_at_least(
            "pacer.max_throttle_pause",
            p.max_throttle_pause,
            limits::PACER_MAX_THROTTLE_PAUSE,
            "pacer.throttle_pause",
            p.throttle_pause,
        )
    }

    fn validate_retry_after(&self) -> Result<(), SettingError> {
        let a = &self.retry_after;
        duration("retry_after.floor", a.floor, limits::RETRY_AFTER_FLOOR)?;
        check_at_least(
            "retry_after.cap",
            a.cap,
            limits::RETRY_AFTER_CAP,
            "retry_after.floor",
            a.floor,
        )?;
        duration(
            "retry_after.unparseable_wait",
            a.unparseable_wait,
            limits::UNPARSEABLE_WAIT,
        )?;
        duration(
            "retry_after.unparseable_jitter",
            a.unparseable_jitter,
            limits::UNPARSEABLE_JITTER,
        )
    }

    fn validate_host(&self) -> Result<(), SettingError> {
        duration(
            "budget_denied_delay",
            self.budget_denied_delay,
            limits::BUDGET_DENIED_DELAY,
        )?;
        duration(
            "hold_through_pause",
            self.hold_through_pause,
            limits::HOLD_THROUGH_PAUSE,
        )?;
        check(
            "max_admit_rounds",
            self.max_admit_rounds,
            limits::MAX_ADMIT_ROUNDS,
        )?;
        duration("outage_pause", self.outage_pause, limits::OUTAGE_PAUSE)?;
        check_at_least(
            "max_outage_pause",
            self.max_outage_pause,
            limits::MAX_OUTAGE_PAUSE,
            "outage_pause",
            self.outage_pause,
        )?;
        check(
            "refusal_streak",
            self.refusal_streak,
            limits::REFUSAL_STREAK,
        )?;
        duration("refusal_span", self.refusal_span, limits::REFUSAL_SPAN)?;
        duration("refusal_pause", self.refusal_pause, limits::REFUSAL_PAUSE)
    }

    fn validate_classify(&self) -> Result<(), SettingError> {
        self.classify.validate()
    }
}

#[cfg(test)]
mod tests;
