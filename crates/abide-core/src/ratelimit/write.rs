//! Writing the IETF `RateLimit-Policy` and `RateLimit` fields
//! (draft-ietf-httpapi-ratelimit-headers §3 and §4, RFC 9651 structured-field lists), the
//! form [`super::ietf`] reads: `RateLimit-Policy: "key";q=10;w=1` names a policy with its
//! quota `q` and window `w` in seconds (no `w` for a concurrency quota), and
//! `RateLimit: "key";r=0;t=1` says `r` units remain and the quota resets in `t` seconds.
//!
//! Times are whole seconds rounded up (a client is never invited back early); a window is
//! at least 1 s. Policy names are sf-strings, escaped as RFC 9651 §4.1.6 says.
//!
//! Written straight into two strings rather than through `sfv`'s serializer: a gate writes
//! these on every response, and `sfv` would build a list of items per answer. The tests
//! parse the output with `sfv` and with this crate's reader.

use std::fmt::Write;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::retry_after::ceil_secs;

/// Field name `RateLimit-Policy` (lower-case, as `HeaderMap` stores it).
pub const RATELIMIT_POLICY: &str = "ratelimit-policy";
/// Field name `RateLimit`.
pub const RATELIMIT: &str = "ratelimit";

/// Both fields for one or more policies, written member by member.
///
/// # Examples
/// ```
/// use abide_core::ratelimit::RateLimitFields;
/// use std::time::Duration;
///
/// let mut f = RateLimitFields::new();
/// f.push("key", 10, Some(Duration::from_secs(1)), 0, Duration::from_millis(200));
/// f.push("conc", 4, None, 3, Duration::ZERO);
/// let (policy, limit) = f.values().unwrap();
/// assert_eq!(policy, r#""key";q=10;w=1, "conc";q=4"#);
/// assert_eq!(limit, r#""key";r=0;t=1, "conc";r=3;t=0"#);
/// ```
#[derive(Debug, Clone, Default)]
pub struct RateLimitFields {
    policy: String,
    limit: String,
}

impl RateLimitFields {
    /// No policy yet.
    pub fn new() -> Self {
        Self {
            policy: String::with_capacity(96),
            limit: String::with_capacity(96),
        }
    }

    /// Add the policy `name` with `quota` units per `window` (`None`: a concurrency quota,
    /// `quota` requests in flight), `remaining` units left and the quota whole again in
    /// `reset`.
    pub fn push(
        &mut self,
        name: &str,
        quota: u64,
        window: Option<Duration>,
        remaining: u64,
        reset: Duration,
    ) {
        if !self.policy.is_empty() {
            self.policy.push_str(", ");
            self.limit.push_str(", ");
        }
        sf_string(&mut self.policy, name);
        // Writing into a String cannot fail.
        let _ = write!(self.policy, ";q={quota}");
        if let Some(w) = window {
            let _ = write!(self.policy, ";w={}", ceil_secs(w).max(1));
        }
        sf_string(&mut self.limit, name);
        let _ = write!(self.limit, ";r={remaining};t={}", ceil_secs(reset));
    }

    /// The `RateLimit-Policy` value written so far (empty without a policy).
    pub fn policy(&self) -> &str {
        &self.policy
    }

    /// The `RateLimit` value written so far (empty without a policy).
    pub fn limit(&self) -> &str {
        &self.limit
    }

    /// `(RateLimit-Policy, RateLimit)` values; `None` without a policy.
    pub fn values(self) -> Option<(HeaderValue, HeaderValue)> {
        if self.policy.is_empty() {
            return None;
        }
        // sf-strings hold visible ASCII only (control and non-ASCII bytes are dropped).
        Some((
            HeaderValue::try_from(self.policy).ok()?,
            HeaderValue::try_from(self.limit).ok()?,
        ))
    }

    /// Insert both fields into `h` (replacing any there); nothing without a policy.
    pub fn insert_into(self, h: &mut HeaderMap) {
        if let Some((policy, limit)) = self.values() {
            h.insert(HeaderName::from_static(RATELIMIT_POLICY), policy);
            h.insert(HeaderName::from_static(RATELIMIT), limit);
        }
    }
}

/// `s` as an RFC 9651 sf-string: quoted, `"` and `\` escaped, anything outside visible
/// ASCII and space left out.
fn sf_string(out: &mut String, s: &str) {
    out.push('"');
    if s.bytes()
        .all(|b| matches!(b, b' '..=b'~') && b != b'"' && b != b'\\')
    {
        // The usual name (a token): nothing to escape.
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {}
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ratelimit::{read, Dialect};
    use proptest::prelude::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn names_are_escaped_sf_strings() {
        let mut f = RateLimitFields::new();
        f.push(
            "a\"b\\c\u{7f}é",
            1,
            Some(Duration::from_millis(1500)),
            1,
            Duration::ZERO,
        );
        let (policy, limit) = f.values().unwrap();
        assert_eq!(policy, r#""a\"b\\c";q=1;w=2"#);
        assert_eq!(limit, r#""a\"b\\c";r=1;t=0"#);
        for v in [&policy, &limit] {
            let list = sfv::Parser::new(v.to_str().unwrap())
                .parse::<sfv::List>()
                .unwrap();
            assert_eq!(list.len(), 1);
        }
        assert!(RateLimitFields::new().values().is_none());
    }

    proptest! {
        #[test]
        fn what_is_written_reads_back_the_same(
            quota in 1u64..1_000_000,
            window_s in 1u64..86_400,
            remaining in 0u64..1_000_000,
            reset_ms in 0u64..86_400_000,
            name in "[a-z][a-z0-9_-]{0,15}",
        ) {
            let reset = Duration::from_millis(reset_ms);
            let mut f = RateLimitFields::new();
            f.push(&name, quota, Some(Duration::from_secs(window_s)), remaining, reset);
            let mut h = HeaderMap::new();
            f.insert_into(&mut h);
            for n in [RATELIMIT_POLICY, RATELIMIT] {
                let v = h[n].to_str().unwrap();
                prop_assert!(sfv::Parser::new(v).parse::<sfv::List>().is_ok(), "{}", v);
            }
            let info = read(&h, UNIX_EPOCH, Dialect::Ietf).info.unwrap();
            prop_assert_eq!(info.policy.as_deref(), Some(name.as_str()));
            prop_assert_eq!(info.limit, Some(quota));
            prop_assert_eq!(info.window, Some(Duration::from_secs(window_s)));
            prop_assert_eq!(info.remaining, Some(remaining));
            prop_assert_eq!(info.reset, Some(Duration::from_secs(ceil_secs(reset))));
        }

        #[test]
        fn a_concurrency_quota_reads_back_apart_from_the_rate(
            rate in 1u64..10_000, slots in 1u64..1024, left in 0u64..1024,
        ) {
            let mut f = RateLimitFields::new();
            f.push("key", rate, Some(Duration::from_secs(1)), rate, Duration::ZERO);
            f.push("conc", slots, None, left, Duration::ZERO);
            let mut h = HeaderMap::new();
            f.insert_into(&mut h);
            let info = read(&h, UNIX_EPOCH, Dialect::Ietf).info.unwrap();
            prop_assert_eq!(info.limit, Some(rate));
            let c = info.concurrency.unwrap();
            prop_assert_eq!((c.limit, c.remaining), (Some(slots), Some(left)));
        }
    }
}
