//! GitHub's REST API: primary limits per resource, and secondary limits.
//!
//! Source: GitHub Docs, "Rate limits for the REST API" (sections "Checking the status of
//! your rate limit" and "Exceeding the rate limit", "Handle rate limit errors
//! appropriately"), read 2026.
//!
//! - `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (**always** UTC epoch seconds)
//!   and `-resource` (`core`, `search`, `graphql`, `code_search`, ...), reported as the
//!   policy. The window is not sent; the documented ones are an hour, and a minute for
//!   `search` and `code_search`, so the pacer gets an advertised rate.
//! - A **secondary** limit answers 403 or 429 whose body says "secondary rate limit"
//!   (`x-ratelimit-remaining` may well be non-zero). It is a throttle: honour
//!   `retry-after` if sent; else if `x-ratelimit-remaining` is 0, wait until
//!   `x-ratelimit-reset`; else wait **at least one minute** ([`SECONDARY_MIN_WAIT`]), and
//!   longer on repeats (the pacer's pauses grow with consecutive throttles).
//!
//! Detected automatically by `x-ratelimit-resource` or `x-github-request-id`.

use std::time::Duration;

use super::fields::Fields;
use super::info::RateLimitSource;
use super::x_ratelimit::{read_prefix, ResetForm, XReading};

/// Headers only GitHub sends.
pub const MARKERS: [&str; 2] = ["x-ratelimit-resource", "x-github-request-id"];

/// The documented minimum wait after a secondary limit without a `retry-after` or an
/// exhausted primary limit: one minute.
pub const SECONDARY_MIN_WAIT: Duration = Duration::from_secs(60);

/// Longest wait after repeated secondary limits: [`SECONDARY_MIN_WAIT`] doubled per
/// attempt of the item, up to 16 minutes (and never above the `Retry-After` cap).
pub const SECONDARY_MAX_WAIT: Duration = Duration::from_secs(16 * 60);

/// The body text of a secondary limit, matched case-insensitively.
const SECONDARY_TEXT: &[u8] = b"secondary rate limit";

/// Most body bytes searched for [`SECONDARY_TEXT`].
const MAX_BODY_SCAN: usize = 4096;

/// True when a `status` 403 or 429 response's `body` (a prefix is enough) reports a
/// secondary rate limit.
pub fn is_secondary_limit(status: u16, body: &[u8]) -> bool {
    if !matches!(status, 403 | 429) {
        return false;
    }
    let body = &body[..body.len().min(MAX_BODY_SCAN)];
    body.windows(SECONDARY_TEXT.len())
        .any(|w| w.eq_ignore_ascii_case(SECONDARY_TEXT))
}

/// The documented window of a resource: a minute for the search resources, else an hour.
fn window(resource: &str) -> Duration {
    match resource {
        "search" | "code_search" => Duration::from_secs(60),
        _ => Duration::from_secs(3600),
    }
}

pub(crate) fn read(f: &mut Fields<'_>) -> XReading {
    let mut r = read_prefix(
        f,
        "x-ratelimit-",
        ResetForm::EpochSecs,
        RateLimitSource::Github,
    );
    let resource = f.text("x-ratelimit-resource");
    if let Some(info) = r.info.as_mut() {
        let res = resource.as_deref().unwrap_or("core");
        info.window = info.limit.map(|_| window(res));
        info.policy = resource;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secondary_text_on_403_and_429_only() {
        let body = br#"{"message":"You have exceeded a Secondary Rate Limit. Please wait."}"#;
        assert!(is_secondary_limit(403, body));
        assert!(is_secondary_limit(429, body));
        assert!(!is_secondary_limit(404, body));
        assert!(!is_secondary_limit(
            403,
            b"{\"message\":\"Resource not accessible\"}"
        ));
        assert!(!is_secondary_limit(403, b""));
    }
}
