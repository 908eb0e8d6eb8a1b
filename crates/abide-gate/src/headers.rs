//! Header values a gate sends: `Retry-After` and the IETF `RateLimit` fields.
//!
//! `Retry-After` (RFC 9110 §10.2.3) carries whole seconds. Rounding a 0.2 s wait down gives
//! `0`, which clients read as "retry now" and which turns a rejection into a hot loop, so a
//! gate always rounds **up** and never says less than one second.
//!
//! `RateLimit-Policy` and `RateLimit` follow draft-ietf-httpapi-ratelimit-headers (structured
//! fields, RFC 9651): `RateLimit-Policy: "key";q=10;w=1` names a policy with its quota `q`
//! and window `w` in seconds; `RateLimit: "key";r=0;t=1` says `r` units remain and the
//! quota resets in `t` seconds.
//!
//! What `t` means per algorithm, always in whole seconds rounded up: GCRA, the time until
//! the bucket is full (at most the window when the burst is the whole quota); fixed window,
//! the window's end; sliding window, the window's end while units are left and otherwise
//! the wait until one more is admitted (the same `t` a 429 at that instant carries). So
//! with units left `t` never exceeds `w`, and `r` spread evenly over `t` is admitted.

use std::time::Duration;

use http::HeaderValue;

/// Whole seconds for a `Retry-After` delay (RFC 9110 §10.2.3): rounded up, at least 1.
///
/// # Examples
/// ```
/// use abide_gate::retry_after_secs;
/// use std::time::Duration;
///
/// assert_eq!(retry_after_secs(Duration::from_millis(200)), 1);
/// assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
/// assert_eq!(retry_after_secs(Duration::from_millis(1010)), 2);
/// assert_eq!(retry_after_secs(Duration::ZERO), 1);
/// ```
pub fn retry_after_secs(wait: Duration) -> u64 {
    ceil_secs(wait).max(1)
}

/// Whole seconds, rounded up (0 stays 0).
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The state of one gate as advertised in the `RateLimit` fields.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GateStatus {
    /// Gate name; the policy name in the headers (e.g. `key`).
    pub name: String,
    /// Stable, non-sensitive reason category (e.g. `key_rate`).
    pub category: String,
    /// Quota units per window (`q`); for a concurrency gate the number of slots.
    pub limit: u32,
    /// Units left now (`r`).
    pub remaining: u32,
    /// Window of a rate gate in whole seconds (`w`); `None` for a concurrency gate.
    pub window_secs: Option<u64>,
    /// Time until the quota is back (`t`), serialised as whole seconds rounded up.
    #[serde(rename = "reset_secs", serialize_with = "ser_ceil_secs")]
    pub reset: Duration,
}

fn ser_ceil_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(ceil_secs(*d))
}

impl GateStatus {
    /// This gate's `RateLimit-Policy` list member, e.g. `"key";q=10;w=1`.
    pub fn policy_member(&self) -> String {
        match self.window_secs {
            Some(w) => format!("\"{}\";q={};w={}", self.name, self.limit, w),
            None => format!("\"{}\";q={}", self.name, self.limit),
        }
    }

    /// This gate's `RateLimit` list member, e.g. `"key";r=0;t=1`.
    pub fn limit_member(&self) -> String {
        format!(
            "\"{}\";r={};t={}",
            self.name,
            self.remaining,
            ceil_secs(self.reset)
        )
    }
}

/// `RateLimit-Policy` and `RateLimit` values for several gates (structured-field lists).
/// Returns `None` when `statuses` is empty.
pub fn rate_limit_values(statuses: &[GateStatus]) -> Option<(HeaderValue, HeaderValue)> {
    rate_limit_fields(statuses.iter().map(|s| Member {
        name: &s.name,
        limit: s.limit,
        window_secs: s.window_secs,
        remaining: s.remaining,
        reset: s.reset,
    }))
}

/// One gate's part of the `RateLimit` fields.
pub(crate) struct Member<'a> {
    pub(crate) name: &'a str,
    pub(crate) limit: u32,
    pub(crate) window_secs: Option<u64>,
    pub(crate) remaining: u32,
    pub(crate) reset: Duration,
}

/// Both field values written straight into two strings (no per-member strings).
pub(crate) fn rate_limit_fields<'a>(
    members: impl Iterator<Item = Member<'a>>,
) -> Option<(HeaderValue, HeaderValue)> {
    use std::fmt::Write;
    let (mut policy, mut limit) = (String::with_capacity(96), String::with_capacity(96));
    for m in members {
        if !policy.is_empty() {
            policy.push_str(", ");
            limit.push_str(", ");
        }
        // Writing into a String cannot fail.
        let _ = match m.window_secs {
            Some(w) => write!(policy, "\"{}\";q={};w={w}", m.name, m.limit),
            None => write!(policy, "\"{}\";q={}", m.name, m.limit),
        };
        let _ = write!(
            limit,
            "\"{}\";r={};t={}",
            m.name,
            m.remaining,
            ceil_secs(m.reset)
        );
    }
    if policy.is_empty() {
        return None;
    }
    // Names are validated to be lowercase tokens at build time, so both are visible ASCII.
    Some((
        HeaderValue::try_from(policy).ok()?,
        HeaderValue::try_from(limit).ok()?,
    ))
}

/// Field name `RateLimit-Policy`.
pub const RATELIMIT_POLICY: &str = "ratelimit-policy";
/// Field name `RateLimit`.
pub const RATELIMIT: &str = "ratelimit";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_and_never_says_zero() {
        assert_eq!(retry_after_secs(Duration::from_millis(200)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1010)), 2);
        assert_eq!(retry_after_secs(Duration::from_nanos(1)), 1);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(60)), 60);
    }

    #[test]
    fn members_follow_the_draft_syntax() {
        let s = GateStatus {
            name: "key".into(),
            category: "key_rate".into(),
            limit: 10,
            remaining: 0,
            window_secs: Some(1),
            reset: Duration::from_millis(200),
        };
        assert_eq!(s.policy_member(), "\"key\";q=10;w=1");
        assert_eq!(s.limit_member(), "\"key\";r=0;t=1");
    }
}
