//! Azure: millisecond retry delays and Resource Manager's remaining counts.
//!
//! Sources: Azure SDK design guidelines and azure-core's retry policy (the
//! `retry-after-ms` and `x-ms-retry-after-ms` headers, milliseconds, checked before
//! `Retry-After`; Azure OpenAI sends `retry-after-ms` too); Microsoft Learn, "Understand how
//! Azure Resource Manager throttles requests" (`x-ms-ratelimit-remaining-subscription-reads`,
//! `-writes`, `-deletes`, `-tenant-reads`, ...), read 2026.
//!
//! The `retry-after-ms` family is read in **every** dialect: the names mean one thing. When
//! several `x-ms-ratelimit-remaining-*` counts are sent, the smallest is reported (the
//! tightest limit binds).

use std::time::Duration;

use super::fields::{clamp_reset, first_element, parse_decimal_millis, Fields};
use super::info::{RateLimitInfo, RateLimitSource};

/// The millisecond delay headers, in order of preference.
pub const RETRY_AFTER_MS: [&str; 2] = ["retry-after-ms", "x-ms-retry-after-ms"];

/// Prefix of Resource Manager's remaining counts.
const REMAINING_PREFIX: &str = "x-ms-ratelimit-remaining-";

/// The first readable `retry-after-ms` family delay, at most [`super::MAX_RESET`].
pub(crate) fn retry_after_ms(f: &mut Fields<'_>) -> Option<Duration> {
    for name in RETRY_AFTER_MS {
        if let Some(v) = f.text(name) {
            match parse_decimal_millis(first_element(&v)) {
                Some(d) => return Some(clamp_reset(d)),
                None => f.bad(name, v.as_bytes()),
            }
        }
    }
    None
}

pub(crate) fn read(f: &mut Fields<'_>) -> Option<RateLimitInfo> {
    let names: Vec<String> = f
        .names()
        .filter(|n| n.starts_with(REMAINING_PREFIX))
        .map(str::to_owned)
        .collect();
    let mut info = RateLimitInfo::new(RateLimitSource::Azure);
    for name in names {
        if let Some(n) = f.count(&name) {
            if info.remaining.is_none_or(|r| n < r) {
                info.remaining = Some(n);
                info.policy = Some(name.trim_start_matches(REMAINING_PREFIX).to_owned());
            }
        }
    }
    info.non_empty()
}
