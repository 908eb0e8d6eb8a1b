//! The session's rules of one provider as the providers file writes them
//! (`[provider.retry]`, `[provider.budget]`, `[provider.pacer]`, `rate_hint`), and their
//! check: abide-core's one validator ([`abide_core::SessionConfig::validate`], named
//! bounds), its setting paths said as the file's keys.

use std::time::Duration;

use abide_core::session::limits::{self, Limits};
use abide_core::{Backoff, Jitter, RetryBudgetConfig, SettingError};
use serde::Deserialize;

use super::provider::{PacerSettings, ProviderConfig};
use crate::error::Error;
use abide_core::RetryConfig;
// Integers are read as TOML writes them (i64) and converted here, so a negative or
// oversized value is refused naming its key, like any other value outside its range.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileRetry {
    max_attempts: Option<i64>,
    unknown_max_attempts: Option<i64>,
    max_age_secs: Option<i64>,
    backoff_base_ms: Option<i64>,
    backoff_cap_secs: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileBudget {
    ttl_secs: Option<i64>,
    min_per_sec: Option<i64>,
    retry_ratio: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePacer {
    headroom: Option<f64>,
    pub(super) use_rate_limit_headers: Option<bool>,
    throttle_pause_ms: Option<i64>,
    max_throttle_pause_secs: Option<i64>,
}

/// A count as written, or `default`: a value no `u32` holds is outside `range` (abide-core's
/// [`Limits`] of the setting); one it holds is checked with the rest by [`check`].
fn count(
    n: &str,
    key: &str,
    v: Option<i64>,
    default: u32,
    range: Limits<u32>,
) -> Result<u32, Error> {
    v.map_or(Ok(default), |v| {
        u32::try_from(v).map_err(|_| Error::config(n, key, format!("{v} is outside {range}")))
    })
}

/// A duration as written in `unit`s, or `default`: negative is outside `range`.
pub(super) fn duration(
    n: &str,
    key: &str,
    v: Option<i64>,
    default: Duration,
    unit: fn(u64) -> Duration,
    range: Limits<Duration>,
) -> Result<Duration, Error> {
    v.map_or(Ok(default), |v| {
        u64::try_from(v)
            .map(unit)
            .map_err(|_| Error::config(n, key, format!("{v} is outside {range}")))
    })
}

/// The retry caps, the retry budget and the pacer settings of provider `n` as written
/// (defaults where a key is absent); checked with the rest of the session by [`check`].
///
/// # Errors
/// [`Error::Config`] naming the key of an integer no setting of its type holds.
pub(super) fn rules(
    n: &str,
    r: &FileRetry,
    b: &FileBudget,
    p: &FilePacer,
) -> Result<(RetryConfig, RetryBudgetConfig, PacerSettings), Error> {
    let d = RetryConfig::default();
    let secs = Duration::from_secs;
    let millis = Duration::from_millis;
    let retry = RetryConfig {
        max_attempts: count(
            n,
            "retry.max_attempts",
            r.max_attempts,
            d.max_attempts,
            limits::MAX_ATTEMPTS,
        )?,
        unknown_max_attempts: count(
            n,
            "retry.unknown_max_attempts",
            r.unknown_max_attempts,
            d.unknown_max_attempts,
            limits::UNKNOWN_MAX_ATTEMPTS,
        )?,
        max_age: duration(
            n,
            "retry.max_age_secs",
            r.max_age_secs,
            d.max_age,
            secs,
            limits::MAX_AGE,
        )?,
        backoff: Backoff {
            base: duration(
                n,
                "retry.backoff_base_ms",
                r.backoff_base_ms,
                d.backoff.base,
                millis,
                limits::BACKOFF_BASE,
            )?,
            cap: duration(
                n,
                "retry.backoff_cap_secs",
                r.backoff_cap_secs,
                d.backoff.cap,
                secs,
                limits::BACKOFF_CAP,
            )?,
            jitter: Jitter::Full,
        },
    };
    let db = RetryBudgetConfig::default();
    let budget = RetryBudgetConfig {
        ttl: duration(
            n,
            "budget.ttl_secs",
            b.ttl_secs,
            db.ttl,
            secs,
            limits::BUDGET_TTL,
        )?,
        min_per_sec: count(
            n,
            "budget.min_per_sec",
            b.min_per_sec,
            db.min_per_sec,
            limits::BUDGET_MIN_PER_SEC,
        )?,
        retry_ratio: b.retry_ratio.unwrap_or(db.retry_ratio),
    };
    let dp = PacerSettings::default();
    let pacer = PacerSettings {
        rate_hint: None,
        max_rate: None,
        headroom: p.headroom.unwrap_or(dp.headroom),
        use_rate_limit_headers: p
            .use_rate_limit_headers
            .unwrap_or(dp.use_rate_limit_headers),
        throttle_pause: duration(
            n,
            "pacer.throttle_pause_ms",
            p.throttle_pause_ms,
            dp.throttle_pause,
            millis,
            limits::PACER_THROTTLE_PAUSE,
        )?,
        max_throttle_pause: duration(
            n,
            "pacer.max_throttle_pause_secs",
            p.max_throttle_pause_secs,
            dp.max_throttle_pause,
            secs,
            limits::PACER_MAX_THROTTLE_PAUSE,
        )?,
    };
    Ok((retry, budget, pacer))
}

/// Check `p`'s session ([`ProviderConfig::session_config`]) with abide-core's validator.
///
/// # Errors
/// [`Error::Config`] naming the provider and the key as the file writes it.
pub(super) fn check(p: &ProviderConfig) -> Result<(), Error> {
    if let Some(hint) = p.pacer.rate_hint {
        abide_core::session::limits::RATE_HINT
            .check("rate_hint", hint)
            .map_err(|e| said(p, &e))?;
    }
    if let Some(cap) = p.pacer.max_rate {
        abide_core::session::limits::RATE_HINT
            .check("max_rate", cap)
            .map_err(|e| said(p, &e))?;
        if let Some(hint) = p.pacer.rate_hint.filter(|h| *h > cap) {
            return Err(Error::config(
                &p.name,
                "rate_hint",
                format!("{hint} is above max_rate {cap}: start at or below the cap"),
            ));
        }
    }
    p.session_config().validate().map_err(|e| said(p, &e))
}

/// `e` said of provider `p`, its setting named by the providers file's key.
fn said(p: &ProviderConfig, e: &SettingError) -> Error {
    let key = match e.setting() {
        "retry.max_age" => "retry.max_age_secs",
        "retry.backoff.base" => "retry.backoff_base_ms",
        "retry.backoff.cap" => "retry.backoff_cap_secs",
        "budget.ttl" => "budget.ttl_secs",
        "pacer.throttle_pause" => "pacer.throttle_pause_ms",
        "pacer.max_throttle_pause" => "pacer.max_throttle_pause_secs",
        "pacer.initial_rate" => "rate_hint",
        "pacer.max_rate" => "max_rate",
        other => other,
    };
    let message = match e {
        SettingError::OutOfRange { value, range, .. } => format!("{value} is outside {range}"),
        SettingError::Classify { problem, .. } => problem.to_string(),
        other => other.to_string(),
    };
    Error::config(&p.name, key, message)
}
