//! Rate-limit headers: IETF `RateLimit` / `RateLimit-Policy` structured fields
//! (draft-ietf-httpapi-ratelimit-headers), legacy `RateLimit-Limit/-Remaining/-Reset`, and
//! common `X-RateLimit-*` variants. Every value is clamped before use.
//!
//! # Families, in order of preference
//! When several families appear in one response, the first that yields anything wins:
//!
//! 1. **IETF** (draft-ietf-httpapi-ratelimit-headers, RFC 9651 structured fields):
//!    `RateLimit-Policy: "default";q=100;w=60` (quota `q` per window `w` seconds) and
//!    `RateLimit: "default";r=50;t=30` (`r` units remaining, reset in `t` seconds). With
//!    several policies, the `RateLimit` item with the fewest units remaining is reported,
//!    joined with the policy of the same name; with only `RateLimit-Policy`, the policy with
//!    the lowest quota per second. Names may be strings or tokens. The earlier draft's
//!    dictionary form (`RateLimit: limit=100, remaining=50, reset=30`) and integer policy
//!    items (`RateLimit-Policy: 100;w=60`) are read too.
//! 2. **Legacy draft**: `RateLimit-Limit: 100` (or `100, 100;w=60`: the first number is the
//!    limit, a `w` parameter gives the window), `RateLimit-Remaining: 0`,
//!    `RateLimit-Reset: 30` (delta seconds).
//! 3. **`X-RateLimit-*`**: `-Limit`, `-Remaining`, `-Reset` and `-Reset-After`.
//!    `-Reset-After` (fractional delta seconds, e.g. Discord's `1.234`) is preferred because
//!    it does not depend on our clock agreeing with theirs. `-Reset` is delta seconds,
//!    unless it is above 10⁹ (then Unix epoch seconds, converted against `now`) or above
//!    10¹² (then Unix epoch milliseconds).
//!
//! # Clamps
//! Negative, fractional-where-integer or garbage values are ignored (that field is `None`).
//! Limit and remaining saturate at [`MAX_QUOTA`]; reset and window at [`MAX_RESET`]; a zero
//! window is ignored; a reset in the past is zero. [`RateLimitInfo::advertised_rate`] lies
//! within [[`MIN_ADVERTISED_RATE`], [`MAX_ADVERTISED_RATE`]].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use serde::Serialize;
use sfv::{BareItem, Dictionary, List, ListEntry, Parameters, Parser};

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
    /// Quota units per window, at most [`MAX_QUOTA`].
    pub limit: Option<u64>,
    /// Units left in the current window, at most [`MAX_QUOTA`].
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

/// Largest limit or remaining count we believe (10⁹ units).
pub const MAX_QUOTA: u64 = 1_000_000_000;

/// Lowest rate [`RateLimitInfo::advertised_rate`] returns, in requests per second.
pub const MIN_ADVERTISED_RATE: f64 = 0.001;

/// Highest rate [`RateLimitInfo::advertised_rate`] returns, in requests per second.
pub const MAX_ADVERTISED_RATE: f64 = 100_000.0;

/// `X-RateLimit-Reset` above this many is Unix epoch seconds, not a delta.
const EPOCH_SECS_THRESHOLD: u64 = 1_000_000_000;
/// `X-RateLimit-Reset` above this many is Unix epoch milliseconds.
const EPOCH_MILLIS_THRESHOLD: u64 = 1_000_000_000_000;

impl RateLimitInfo {
    /// True when the server says no quota is left (`remaining == 0`).
    pub fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }

    /// The sustainable request rate this advertises, in requests per second, if it can be
    /// derived (limit / window). Clamped to
    /// [[`MIN_ADVERTISED_RATE`], [`MAX_ADVERTISED_RATE`]].
    pub fn advertised_rate(&self) -> Option<f64> {
        let limit = self.limit?;
        let window = self.window?.as_secs_f64();
        if window <= 0.0 {
            return None;
        }
        Some((limit as f64 / window).clamp(MIN_ADVERTISED_RATE, MAX_ADVERTISED_RATE))
    }

    fn is_empty(&self) -> bool {
        self.limit.is_none()
            && self.remaining.is_none()
            && self.reset.is_none()
            && self.window.is_none()
    }

    fn new(source: RateLimitSource) -> Self {
        Self {
            source,
            policy: None,
            limit: None,
            remaining: None,
            reset: None,
            window: None,
        }
    }
}

/// Read rate-limit information from response headers; `now` converts epoch-second resets.
/// Returns `None` when no recognised header is present or none parses.
pub fn parse_rate_limit(headers: &HeaderMap, now: SystemTime) -> Option<RateLimitInfo> {
    [ietf(headers), legacy(headers), x_ratelimit(headers, now)]
        .into_iter()
        .flatten()
        .find(|info| !info.is_empty())
}

/// All lines of `name` joined with ", " (RFC 9110 §5.3); lines that are not visible ASCII
/// are skipped. `None` when absent.
fn field(headers: &HeaderMap, name: &str) -> Option<String> {
    let mut out: Option<String> = None;
    for v in headers.get_all(name) {
        let Ok(s) = v.to_str() else { continue };
        match &mut out {
            Some(o) => {
                o.push_str(", ");
                o.push_str(s);
            }
            None => out = Some(s.to_owned()),
        }
    }
    out
}

/// One policy or limit item of the IETF fields.
#[derive(Debug, Default)]
struct SfItem {
    name: Option<String>,
    /// `q` in a policy, the bare integer of an older-draft policy item.
    quota: Option<u64>,
    window: Option<Duration>,
    remaining: Option<u64>,
    reset: Option<Duration>,
}

fn ietf(headers: &HeaderMap) -> Option<RateLimitInfo> {
    let policies: Vec<SfItem> = field(headers, "ratelimit-policy")
        .and_then(|v| Parser::new(&v).parse::<List>().ok())
        .map(|list| list.iter().filter_map(sf_item).collect())
        .unwrap_or_default();
    let limits: Vec<SfItem> = field(headers, "ratelimit")
        .and_then(|v| ietf_limits(&v))
        .unwrap_or_default();

    let mut info = RateLimitInfo::new(RateLimitSource::Ietf);
    let chosen_limit = limits.iter().min_by(|a, b| {
        let ra = a.remaining.unwrap_or(u64::MAX);
        let rb = b.remaining.unwrap_or(u64::MAX);
        // Fewest remaining first; on a tie, the longest reset.
        ra.cmp(&rb).then(b.reset.cmp(&a.reset))
    });
    let policy = match chosen_limit {
        Some(l) => {
            info.remaining = l.remaining;
            info.reset = l.reset;
            info.policy.clone_from(&l.name);
            if l.quota.is_some() {
                // Older dictionary form carries the limit itself.
                info.limit = l.quota;
            }
            policies
                .iter()
                .find(|p| p.name.is_some() && p.name == l.name)
                .or_else(|| (policies.len() == 1).then(|| &policies[0]))
        }
        None => policies.iter().min_by(|a, b| {
            let rate = |p: &SfItem| match (p.quota, p.window) {
                (Some(q), Some(w)) => q as f64 / w.as_secs_f64(),
                _ => f64::INFINITY,
            };
            rate(a).total_cmp(&rate(b))
        }),
    };
    if let Some(p) = policy {
        if info.policy.is_none() {
            info.policy.clone_from(&p.name);
        }
        info.limit = info.limit.or(p.quota);
        info.window = p.window;
    }
    Some(info)
}

/// `RateLimit` as a list of items (current draft) or, failing that, the earlier draft's
/// dictionary `limit=…, remaining=…, reset=…`.
fn ietf_limits(v: &str) -> Option<Vec<SfItem>> {
    if let Ok(list) = Parser::new(v).parse::<List>() {
        let items: Vec<SfItem> = list.iter().filter_map(sf_item).collect();
        if !items.is_empty() {
            return Some(items);
        }
    }
    let dict = Parser::new(v).parse::<Dictionary>().ok()?;
    let member = |k: &str| match dict.get(k) {
        Some(ListEntry::Item(i)) => Some(&i.bare_item),
        _ => None,
    };
    let item = SfItem {
        quota: member("limit").and_then(quota),
        remaining: member("remaining").and_then(quota),
        reset: member("reset").and_then(secs),
        ..SfItem::default()
    };
    Some(vec![item])
}

fn sf_item(entry: &ListEntry) -> Option<SfItem> {
    let ListEntry::Item(item) = entry else {
        return None;
    };
    let mut out = SfItem::default();
    match &item.bare_item {
        BareItem::String(s) => out.name = Some(s.as_str().to_owned()),
        BareItem::Token(t) => out.name = Some(t.as_str().to_owned()),
        other => out.quota = quota(other),
    }
    let p: &Parameters = &item.params;
    if let Some(q) = p.get("q").and_then(quota) {
        out.quota = Some(q);
    }
    out.window = p.get("w").and_then(window);
    out.remaining = p.get("r").and_then(quota);
    out.reset = p.get("t").and_then(secs);
    Some(out)
}

/// A non-negative integer count, saturating at [`MAX_QUOTA`].
fn quota(item: &BareItem) -> Option<u64> {
    let n = i64::from(item.as_integer()?);
    u64::try_from(n).ok().map(|n| n.min(MAX_QUOTA))
}

/// Non-negative seconds (integer or decimal), saturating at [`MAX_RESET`].
fn secs(item: &BareItem) -> Option<Duration> {
    let s = match item {
        BareItem::Integer(i) => i64::from(*i) as f64,
        BareItem::Decimal(d) => f64::from(*d),
        _ => return None,
    };
    (s >= 0.0).then(|| Duration::from_secs_f64(s.min(MAX_RESET.as_secs_f64())))
}

/// A positive window in seconds, saturating at [`MAX_RESET`].
fn window(item: &BareItem) -> Option<Duration> {
    secs(item).filter(|w| !w.is_zero())
}

fn legacy(headers: &HeaderMap) -> Option<RateLimitInfo> {
    let mut info = RateLimitInfo::new(RateLimitSource::LegacyDraft);
    if let Some(v) = field(headers, "ratelimit-limit") {
        info.limit = first_count(&v);
        if let Ok(list) = Parser::new(&v).parse::<List>() {
            let items: Vec<SfItem> = list.iter().filter_map(sf_item).collect();
            info.window = items
                .iter()
                .find(|i| i.window.is_some() && i.quota == info.limit)
                .or_else(|| items.iter().find(|i| i.window.is_some()))
                .and_then(|i| i.window);
        }
    }
    info.remaining = field(headers, "ratelimit-remaining").and_then(|v| first_count(&v));
    info.reset = field(headers, "ratelimit-reset")
        .and_then(|v| first_decimal(&v))
        .map(clamp_reset);
    Some(info)
}

fn x_ratelimit(headers: &HeaderMap, now: SystemTime) -> Option<RateLimitInfo> {
    let mut info = RateLimitInfo::new(RateLimitSource::XRateLimit);
    info.limit = field(headers, "x-ratelimit-limit").and_then(|v| first_count(&v));
    info.remaining = field(headers, "x-ratelimit-remaining").and_then(|v| first_count(&v));
    info.reset = field(headers, "x-ratelimit-reset-after")
        .and_then(|v| first_decimal(&v))
        .or_else(|| {
            let d = first_decimal(&field(headers, "x-ratelimit-reset")?)?;
            Some(x_reset(d, now))
        })
        .map(clamp_reset);
    Some(info)
}

/// Interpret an `X-RateLimit-Reset` number as a delta, epoch seconds or epoch milliseconds.
fn x_reset(value: Duration, now: SystemTime) -> Duration {
    let whole = value.as_secs();
    let at = if whole > EPOCH_MILLIS_THRESHOLD {
        // The number as written counts milliseconds.
        UNIX_EPOCH.checked_add(Duration::from_millis(whole))
    } else if whole > EPOCH_SECS_THRESHOLD {
        UNIX_EPOCH.checked_add(value)
    } else {
        return value;
    };
    // An unrepresentable instant is far in the future: the clamp makes it one day.
    at.map_or(MAX_RESET, |at| {
        at.duration_since(now).unwrap_or(Duration::ZERO)
    })
}

fn clamp_reset(d: Duration) -> Duration {
    if d > MAX_RESET {
        MAX_RESET
    } else {
        d
    }
}

/// The first list element, trimmed of OWS.
fn first_element(v: &str) -> &str {
    v.split(',').next().unwrap_or("").trim_matches([' ', '\t'])
}

/// The first element as a whole non-negative count (a `;param` suffix is ignored),
/// saturating at [`MAX_QUOTA`].
fn first_count(v: &str) -> Option<u64> {
    let e = first_element(v);
    let e = e.split(';').next().unwrap_or("").trim_matches([' ', '\t']);
    if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut n: u64 = 0;
    for b in e.bytes() {
        n = n.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    Some(n.min(MAX_QUOTA))
}

/// The first element as non-negative decimal seconds (`30`, `1.234`), saturating.
fn first_decimal(v: &str) -> Option<Duration> {
    parse_decimal_secs(first_element(v))
}

/// `1*DIGIT [ "." 1*DIGIT ]` as a duration, saturating on overflow; nanosecond precision.
pub(crate) fn parse_decimal_secs(s: &str) -> Option<Duration> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut secs: u64 = 0;
    for b in int.bytes() {
        secs = secs.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    let mut nanos: u32 = 0;
    if let Some(f) = frac {
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        for (i, b) in f.bytes().take(9).enumerate() {
            nanos += u32::from(b - b'0') * 10u32.pow(8 - i as u32);
        }
    }
    Some(Duration::new(secs, 0).saturating_add(Duration::from_nanos(u64::from(nanos))))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn decimal_seconds() {
        assert_eq!(
            parse_decimal_secs("1.234"),
            Some(Duration::from_millis(1234))
        );
        assert_eq!(parse_decimal_secs("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_decimal_secs("-1"), None);
        assert_eq!(parse_decimal_secs("1."), None);
        assert_eq!(parse_decimal_secs(".5"), None);
        assert_eq!(
            parse_decimal_secs("99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn x_reset_heuristic() {
        let now = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        assert_eq!(
            x_reset(Duration::from_secs(30), now),
            Duration::from_secs(30)
        );
        assert_eq!(
            x_reset(Duration::from_secs(1_750_000_042), now),
            Duration::from_secs(42)
        );
        assert_eq!(
            x_reset(Duration::from_secs(1_750_000_042_000), now),
            Duration::from_secs(42)
        );
        assert_eq!(
            x_reset(Duration::from_secs(1_600_000_000), now),
            Duration::ZERO
        );
    }
}
