//! The session's rules of one provider as the providers file writes them
//! (`[provider.retry]`, `[provider.budget]`, `[provider.pacer]`), and their bounds.
//!
//! These bounds are the session's, not the file's: they are the one place that is to
//! hand its checks to `abide_core::SessionConfig::validate` (named bounds, errors naming
//! the setting), mapping each setting it names to the key written here
//! (`retry.backoff_base_ms`, `pacer.headroom`, ...). Everything else in the file is
//! checked by `super::file` and the transports.

use std::time::Duration;

use abide_core::{Backoff, Jitter, RetryBudgetConfig};
use serde::Deserialize;

use super::{PacerSettings, RetryConfig};
use crate::error::{Error, Result};

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

/// The retry caps, the retry budget and the pacer settings of provider `n` (without its
/// `rate_hint`), each checked against its bounds.
///
/// # Errors
/// [`Error::Config`] naming `n` and the key.
pub(super) fn rules(
    n: &str,
    r: &FileRetry,
    b: &FileBudget,
    p: &FilePacer,
) -> Result<(RetryConfig, RetryBudgetConfig, PacerSettings)> {
    let bad = |field: &str, why: &str| Err(Error::config(n, field, why));
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
    if retry.max_attempts == 0 {
        return bad("retry.max_attempts", "must be at least 1");
    }
    if retry.unknown_max_attempts == 0 {
        return bad("retry.unknown_max_attempts", "must be at least 1");
    }
    if retry.max_age.is_zero() {
        return bad("retry.max_age_secs", "must be positive");
    }
    if retry.backoff.base.is_zero() || retry.backoff.base > retry.backoff.cap {
        let why = "must be positive and at most backoff_cap_secs";
        return bad("retry.backoff_base_ms", why);
    }
    let db = RetryBudgetConfig::default();
    let budget = RetryBudgetConfig {
        ttl: b.ttl_secs.map_or(db.ttl, Duration::from_secs),
        min_per_sec: b.min_per_sec.unwrap_or(db.min_per_sec),
        retry_ratio: b.retry_ratio.unwrap_or(db.retry_ratio),
    };
    if !(budget.retry_ratio.is_finite() && budget.retry_ratio >= 0.0) {
        return bad("budget.retry_ratio", "must be a finite number >= 0");
    }
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
    if !(pacer.headroom.is_finite() && pacer.headroom > 0.0 && pacer.headroom <= 1.0) {
        return bad("pacer.headroom", "must be in (0, 1]");
    }
    let max = abide_core::pacer::MAX_PAUSE;
    if !(Duration::from_millis(100)..=max).contains(&pacer.throttle_pause) {
        return bad("pacer.throttle_pause_ms", "must be in [100, 600000]");
    }
    if !(pacer.throttle_pause..=max).contains(&pacer.max_throttle_pause) {
        return bad(
            "pacer.max_throttle_pause_secs",
            "must be in [throttle_pause, 600]",
        );
    }
    Ok((retry, budget, pacer))
}
