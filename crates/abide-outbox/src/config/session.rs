//! The session's rules of one provider as the providers file writes them
//! (`[provider.retry]`, `[provider.budget]`, `[provider.pacer]`, `rate_hint`), and their
//! check: abide-core's one validator ([`abide_core::SessionConfig::validate`], named
//! bounds), its setting paths said as the file's keys.

use std::time::Duration;

use abide_core::{Backoff, Jitter, RetryBudgetConfig, SettingError};
use serde::Deserialize;

use super::{PacerSettings, ProviderConfig, RetryConfig};
use crate::error::Error;
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileRetry {
    max_attempts: Option<u32>,
    unknown_max_attempts: Option<u32>,
    max_age_secs: Option<u64>,
    backoff_base_ms: Option<u64>,
    backoff_cap_secs: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileBudget {
    ttl_secs: Option<u64>,
    min_per_sec: Option<u32>,
    retry_ratio: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePacer {
    headroom: Option<f64>,
    pub(super) use_rate_limit_headers: Option<bool>,
    throttle_pause_ms: Option<u64>,
    max_throttle_pause_secs: Option<u64>,
}

/// The retry caps, the retry budget and the pacer settings as written (defaults where a
/// key is absent); checked with the rest of the session by [`check`].
pub(super) fn rules(
    r: &FileRetry,
    b: &FileBudget,
    p: &FilePacer,
) -> (RetryConfig, RetryBudgetConfig, PacerSettings) {
    let d = RetryConfig::default();
    let retry = RetryConfig {
        max_attempts: r.max_attempts.unwrap_or(d.max_attempts),
        unknown_max_attempts: r.unknown_max_attempts.unwrap_or(d.unknown_max_attempts),
        max_age: r.max_age_secs.map_or(d.max_age, Duration::from_secs),
        backoff: Backoff {
            base: r
                .backoff_base_ms
                .map_or(d.backoff.base, Duration::from_millis),
            cap: r
                .backoff_cap_secs
                .map_or(d.backoff.cap, Duration::from_secs),
            jitter: Jitter::Full,
        },
    };
    let db = RetryBudgetConfig::default();
    let budget = RetryBudgetConfig {
        ttl: b.ttl_secs.map_or(db.ttl, Duration::from_secs),
        min_per_sec: b.min_per_sec.unwrap_or(db.min_per_sec),
        retry_ratio: b.retry_ratio.unwrap_or(db.retry_ratio),
    };
    let dp = PacerSettings::default();
    let pacer = PacerSettings {
        rate_hint: None,
        headroom: p.headroom.unwrap_or(dp.headroom),
        use_rate_limit_headers: p
            .use_rate_limit_headers
            .unwrap_or(dp.use_rate_limit_headers),
        throttle_pause: p
            .throttle_pause_ms
            .map_or(dp.throttle_pause, Duration::from_millis),
        max_throttle_pause: p
            .max_throttle_pause_secs
            .map_or(dp.max_throttle_pause, Duration::from_secs),
    };
    (retry, budget, pacer)
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
        other => other,
    };
    let message = match e {
        SettingError::OutOfRange { value, range, .. } => format!("{value} is outside {range}"),
        SettingError::Classify { problem, .. } => problem.to_string(),
        other => other.to_string(),
    };
    Error::config(&p.name, key, message)
}
