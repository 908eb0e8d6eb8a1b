//! Discord: per-route buckets, a global limit and scopes.
//!
//! Source: Discord Developer Documentation, "Rate Limits" (sections "Header Format" and
//! "Exceeding A Rate Limit"), read 2026.
//!
//! - `X-RateLimit-Limit`, `-Remaining`; `-Reset` (epoch seconds, fractional) and
//!   `-Reset-After` (seconds, fractional; preferred: it needs no clock agreement).
//! - `X-RateLimit-Bucket`: the bucket id, reported as the policy (routes sharing a bucket
//!   share its limit).
//! - `X-RateLimit-Global: true` on a 429 from the global limit; `X-RateLimit-Scope`:
//!   `user`, `global` or `shared` (a per-resource limit that does not count against the
//!   caller). Every 429 also carries `Retry-After` in seconds, which the classifier reads.
//!
//! No window is sent, so no advertised rate. Detected automatically by `X-RateLimit-Bucket`,
//! `-Scope` or `-Global`.

use super::fields::Fields;
use super::info::{RateLimitInfo, RateLimitSource};
use super::x_ratelimit::{read_prefix, ResetForm};

/// Headers only Discord sends.
pub const MARKERS: [&str; 3] = [
    "x-ratelimit-bucket",
    "x-ratelimit-scope",
    "x-ratelimit-global",
];

/// What Discord's headers say.
#[derive(Debug, Default)]
pub(crate) struct DiscordReading {
    pub(crate) info: Option<RateLimitInfo>,
    pub(crate) scope: Option<String>,
}

/// Longest bucket or scope kept, in bytes.
const MAX_NAME: usize = 64;

pub(crate) fn read(f: &mut Fields<'_>) -> DiscordReading {
    let r = read_prefix(
        f,
        "x-ratelimit-",
        ResetForm::EpochSecs,
        RateLimitSource::Discord,
    );
    let bucket = f.text("x-ratelimit-bucket").map(|b| cut(&b));
    let global = match f.text("x-ratelimit-global") {
        Some(v) if v.trim().eq_ignore_ascii_case("true") => true,
        Some(v) if v.trim().eq_ignore_ascii_case("false") => false,
        Some(v) => {
            f.bad("x-ratelimit-global", v.as_bytes());
            false
        }
        None => false,
    };
    let scope = match f.text("x-ratelimit-scope") {
        Some(s) => Some(cut(&s.trim().to_ascii_lowercase())),
        None => global.then(|| "global".to_owned()),
    };
    let mut info = r.info;
    if let Some(b) = bucket {
        info.get_or_insert_with(|| RateLimitInfo::new(RateLimitSource::Discord))
            .policy = Some(b);
    }
    DiscordReading { info, scope }
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_NAME).collect()
}
