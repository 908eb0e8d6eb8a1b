//! Rate-limit headers: IETF `RateLimit` / `RateLimit-Policy` structured fields
//! (draft-ietf-httpapi-ratelimit-headers), legacy `RateLimit-Limit/-Remaining/-Reset`, and
//! common `X-RateLimit-*` variants. Every value is clamped before use.
//!
//! OWNER NOTE (remove when implemented): types below are the agreed API; bodies are stubs.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use serde::Serialize;

/// Which header family a [`RateLimitInfo`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RateLimitSource {
    /// IETF `RateLimit` / `RateLimit-Policy` structured fields.
    Ietf,
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`.
    LegacyDraft,
    /// `X-RateLimit-*` variants.
    XRateLimit,
}

/// What the server advertised about its quota, clamped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateLimitInfo {
    /// Header family.
    pub source: RateLimitSource,
    /// Policy name (IETF), if given.
    pub policy: Option<String>,
    /// Quota units per window.
    pub limit: Option<u64>,
    /// Units left in the current window.
    pub remaining: Option<u64>,
    /// Time until the window resets, clamped to at most [`MAX_RESET`].
    #[serde(rename = "reset_secs", serialize_with = "crate::serde_secs::opt")]
    pub reset: Option<Duration>,
    /// Window length, if advertised (IETF `w`), clamped.
    #[serde(rename = "window_secs", serialize_with = "crate::serde_secs::opt")]
    pub window: Option<Duration>,
}

/// Longest reset or window we believe (one day).
pub const MAX_RESET: Duration = Duration::from_secs(86_400);

impl RateLimitInfo {
    /// True when the server says no quota is left (`remaining == 0`).
    pub fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }

    /// The sustainable request rate this advertises, in requests per second, if it can be
    /// derived (limit / window). Clamped to a sane range.
    pub fn advertised_rate(&self) -> Option<f64> {
        todo!("helper A")
    }
}

/// Read rate-limit information from response headers; `now` converts epoch-second resets.
/// Returns `None` when no recognised header is present or none parses.
pub fn parse_rate_limit(headers: &HeaderMap, now: SystemTime) -> Option<RateLimitInfo> {
    let _ = (headers, now);
    todo!("helper A")
}
