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

use abide_core::ratelimit::RateLimitFields;
use abide_core::retry_after::delay_seconds;
use http::HeaderValue;

pub use abide_core::ratelimit::{RATELIMIT, RATELIMIT_POLICY};
pub(crate) use abide_core::retry_after::ceil_secs;

/// Whole seconds for a `Retry-After` delay (RFC 9110 §10.2.3): rounded up, at least 1
/// (`abide_core::retry_after::delay_seconds`, the writer every server of the workspace
/// uses).
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
    delay_seconds(wait)
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
        self.fields().policy().to_owned()
    }

    /// This gate's `RateLimit` list member, e.g. `"key";r=0;t=1`.
    pub fn limit_member(&self) -> String {
        self.fields().limit().to_owned()
    }

    fn fields(&self) -> RateLimitFields {
        let mut f = RateLimitFields::new();
        f.push(
            &self.name,
            u64::from(self.limit),
            self.window_secs.map(Duration::from_secs),
            u64::from(self.remaining),
            self.reset,
        );
        f
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

/// Both field values, written by `abide_core::ratelimit::RateLimitFields` (straight into
/// two strings, no per-member strings).
pub(crate) fn rate_limit_fields<'a>(
    members: impl Iterator<Item = Member<'a>>,
) -> Option<(HeaderValue, HeaderValue)> {
    let mut fields = RateLimitFields::new();
    for m in members {
        fields.push(
            m.name,
            u64::from(m.limit),
            m.window_secs.map(Duration::from_secs),
            u64::from(m.remaining),
            m.reset,
        );
    }
    fields.values()
}

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

    #[test]
    fn what_a_gate_writes_the_core_reads_back() {
        use abide_core::ratelimit::{read, Dialect};
        use abide_core::retry_after::{parse, RetryAfter};
        let statuses = [
            GateStatus {
                name: "key".into(),
                category: "key_rate".into(),
                limit: 10,
                remaining: 3,
                window_secs: Some(2),
                reset: Duration::from_millis(1200),
            },
            GateStatus {
                name: "conc".into(),
                category: "concurrency".into(),
                limit: 4,
                remaining: 1,
                window_secs: None,
                reset: Duration::ZERO,
            },
        ];
        let (policy, limit) = rate_limit_values(&statuses).unwrap();
        let mut h = http::HeaderMap::new();
        h.insert(RATELIMIT_POLICY, policy);
        h.insert(RATELIMIT, limit);
        let info = read(&h, std::time::UNIX_EPOCH, Dialect::Ietf).info.unwrap();
        assert_eq!(
            (info.limit, info.remaining, info.window, info.reset),
            (
                Some(10),
                Some(3),
                Some(Duration::from_secs(2)),
                Some(Duration::from_secs(2))
            )
        );
        let conc = info.concurrency.unwrap();
        assert_eq!((conc.limit, conc.remaining), (Some(4), Some(1)));
        let secs = retry_after_secs(Duration::from_millis(200));
        assert_eq!(
            parse(secs.to_string().as_bytes()),
            Ok(RetryAfter::Delay(Duration::from_secs(1)))
        );
    }
}
