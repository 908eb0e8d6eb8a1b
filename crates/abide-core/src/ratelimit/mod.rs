//! Rate-limit dialects: every header family a client meets, read into one clamped
//! [`RateLimitInfo`] for the classifier and the pacer.
//!
//! One module per family, each citing its source:
//!
//! | dialect | headers | module |
//! |---|---|---|
//! | `ietf` | `RateLimit` / `RateLimit-Policy` structured fields (current draft), the earlier `RateLimit-Limit` / `-Remaining` / `-Reset` (with or without a policy header) | [`ietf`] |
//! | `x-ratelimit` | `X-RateLimit-*` and `X-Rate-Limit-*`: `-Limit`, `-Remaining`, `-Used`, `-Reset` (delta, epoch s or ms), `-Reset-After`; per unit `-Limit-Requests`, `-Reset-Tokens` (Go-style `6m0s`) | [`x_ratelimit`] |
//! | `azure` | `retry-after-ms`, `x-ms-retry-after-ms`, `x-ms-ratelimit-remaining-*` | [`azure`] |
//! | `shopify` | `X-Shopify-Shop-Api-Call-Limit: used/size` (leaky bucket) | [`shopify`] |
//! | `discord` | `X-RateLimit-Bucket`, `-Global`, `-Scope`, `-Reset-After` | [`discord`] |
//! | `github` | `X-RateLimit-Resource`, `-Used`, epoch `-Reset`; the 403 secondary limit (body text) | [`github`] |
//!
//! The IETF fields are also written here ([`RateLimitFields`]), in the form [`ietf`] reads,
//! for servers: the gates, the fake provider, the simulator.
//!
//! # Detection
//! [`Dialect::Auto`] decides only from names that mean one thing (compared
//! case-insensitively; `HeaderMap` stores them lower-case, as HTTP/2 sends them):
//! `X-Shopify-Shop-Api-Call-Limit` is Shopify; `X-RateLimit-Bucket`, `-Scope` or `-Global`
//! are Discord; `X-RateLimit-Resource` or `X-GitHub-Request-Id` are GitHub;
//! `retry-after-ms` / `x-ms-retry-after-ms` are read in every dialect. Otherwise the generic
//! families are tried in order (IETF, then `X-RateLimit-*`), and an `X-RateLimit-Reset`
//! is a delta below 10⁹, Unix epoch seconds below 10¹², epoch milliseconds above. Where the
//! same names mean different things per vendor (a GitHub 403 that is a throttle only by its
//! body text, a reset that is always epoch seconds), name the dialect: the providers file's
//! `rate_limit_dialect`, or `abide inspect --dialect`.
//!
//! # Clamps
//! Negative, fractional-where-integer or garbage values are ignored (that field is `None`)
//! and listed in [`Reading::malformed`]; nothing panics. Limit and remaining saturate at
//! [`MAX_QUOTA`]; reset and window at [`MAX_RESET`]; a zero window is ignored; a reset in
//! the past is zero. [`RateLimitInfo::advertised_rate`] lies within
//! [[`MIN_ADVERTISED_RATE`], [`MAX_ADVERTISED_RATE`]].

pub mod azure;
mod dialect;
pub mod discord;
mod fields;
pub mod github;
pub mod ietf;
mod info;
pub mod shopify;
mod write;
pub mod x_ratelimit;

pub use dialect::{parse_rate_limit, read, Dialect, Reader, Reading, UnknownDialect};
pub use fields::Malformed;
pub use info::{
    ConcurrencyQuota, RateLimitInfo, RateLimitSource, MAX_ADVERTISED_RATE, MAX_CONCURRENCY,
    MAX_QUOTA, MAX_RESET, MIN_ADVERTISED_RATE,
};
pub use write::{RateLimitFields, RATELIMIT, RATELIMIT_POLICY};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn info(limit: u64, window_s: u64, remaining: u64, reset_s: u64) -> RateLimitInfo {
        RateLimitInfo {
            limit: Some(limit),
            window: Some(Duration::from_secs(window_s)),
            remaining: Some(remaining),
            reset: Some(Duration::from_secs(reset_s)),
            ..RateLimitInfo::new(RateLimitSource::Ietf)
        }
    }

    #[test]
    fn an_admitted_last_unit_holds_back_what_the_rounded_reset_at_least_means() {
        // q=40;w=1, r=0;t=1 on a success: one interval (25 ms), not the rounded-up second.
        let i = info(40, 1, 0, 1);
        assert_eq!(i.exhausted_pause(true), Some(Duration::from_millis(25)));
        // A throttle's reset is obeyed whole.
        assert_eq!(i.exhausted_pause(false), Some(Duration::from_secs(1)));
        // t=2 (a full sliding window): more than 1 s is certain.
        assert_eq!(
            info(40, 1, 0, 2).exhausted_pause(true),
            Some(Duration::from_secs(1))
        );
        // An exhausted daily quota stays paused for all but the rounding.
        assert_eq!(
            info(1000, 86_400, 0, 3600).exhausted_pause(true),
            Some(Duration::from_secs(3599))
        );
        // A reset longer than the window after a success: the window.
        assert_eq!(
            info(40, 1, 0, 30).exhausted_pause(true),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            info(40, 1, 0, 30).exhausted_pause(false),
            Some(Duration::from_secs(30))
        );
        // A slow policy: an interval is longer than the reset, so the reset.
        assert_eq!(
            info(1, 3600, 0, 5).exhausted_pause(true),
            Some(Duration::from_secs(5))
        );
        // A fractional reset was not rounded: all of it.
        let exact = RateLimitInfo {
            reset: Some(Duration::from_millis(500)),
            ..info(40, 1, 0, 1)
        };
        assert_eq!(
            exact.exhausted_pause(true),
            Some(Duration::from_millis(500))
        );
    }

    #[test]
    fn no_pause_without_an_exhausted_quota_and_a_reset() {
        assert_eq!(info(40, 1, 1, 1).exhausted_pause(true), None);
        let no_reset = RateLimitInfo {
            reset: None,
            ..info(40, 1, 0, 1)
        };
        assert_eq!(no_reset.exhausted_pause(false), None);
        // Without a policy nothing bounds the reset but its clamp.
        let no_policy = RateLimitInfo {
            window: None,
            ..info(40, 1, 0, 200_000)
        };
        assert_eq!(no_policy.exhausted_pause(true), Some(MAX_RESET));
    }
}
