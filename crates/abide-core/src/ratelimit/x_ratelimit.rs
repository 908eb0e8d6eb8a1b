//! `X-RateLimit-*` and `X-Rate-Limit-*`: the de facto family before the IETF draft.
//!
//! No standard defines it; the draft's §1.1 and appendix list the variants in use. What is
//! read, under either prefix (`x-ratelimit-` first, then `x-rate-limit-`, as X/Twitter's API
//! v2 "Rate limits" documentation spells it):
//!
//! - `-Limit`: units per window; `-Remaining`: units left; `-Used`: units spent (GitHub's
//!   "Rate limits for the REST API"), giving `remaining = limit - used` when `-Remaining`
//!   is missing.
//! - `-Reset-After`: fractional delta seconds (Discord's "Rate Limits" page, `1.234`),
//!   preferred because it does not depend on our clock agreeing with theirs.
//! - `-Reset`: delta seconds, unless it is above 10⁹ (then Unix epoch seconds, converted
//!   against `now`, as GitHub and X send it) or above 10¹² (epoch milliseconds). A dialect
//!   that always means epoch seconds says so ([`ResetForm::EpochSecs`]).
//! - Without those, one limit per unit, as OpenAI sends them: `-Limit-Requests`,
//!   `-Remaining-Requests`, `-Reset-Requests` and the same for `-Tokens`, the resets as
//!   Go-style durations (`1s`, `6m0s`, `20ms`). The requests quota is read, unless the
//!   tokens quota is the one spent (`remaining` 0): then that one, since it is what
//!   refuses. Source: <https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers>.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::fields::{clamp_reset, Fields};
use super::info::{RateLimitInfo, RateLimitSource, MAX_RESET};

/// The two prefixes, in order of preference.
pub const PREFIXES: [&str; 2] = ["x-ratelimit-", "x-rate-limit-"];

/// How to read `X-RateLimit-Reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetForm {
    /// By magnitude: delta seconds, epoch seconds above 10⁹, epoch ms above 10¹².
    Guess,
    /// Always Unix epoch seconds (GitHub, Discord), possibly fractional.
    EpochSecs,
}

/// `X-RateLimit-Reset` above this many is Unix epoch seconds, not a delta.
const EPOCH_SECS_THRESHOLD: u64 = 1_000_000_000;
/// `X-RateLimit-Reset` above this many is Unix epoch milliseconds.
const EPOCH_MILLIS_THRESHOLD: u64 = 1_000_000_000_000;

/// What the family read.
#[derive(Debug, Default)]
pub(crate) struct XReading {
    pub(crate) info: Option<RateLimitInfo>,
    pub(crate) used: Option<u64>,
}

/// Read the first prefix that yields anything.
pub(crate) fn read(f: &mut Fields<'_>, form: ResetForm) -> XReading {
    for prefix in PREFIXES {
        // Every field below is named `<prefix>…`: without one, skip the lookups (each a
        // formatted name) that nearly every response, carrying none, would pay.
        if !f.names().any(|n| n.starts_with(prefix)) {
            continue;
        }
        let r = read_prefix(f, prefix, form, RateLimitSource::XRateLimit);
        if r.info.is_some() {
            return r;
        }
        let info = per_unit(f, prefix);
        if info.is_some() {
            return XReading { info, used: None };
        }
    }
    XReading::default()
}

/// The `-<field>-requests` / `-<field>-tokens` quotas under `prefix`: the tokens one when
/// it is spent, else the requests one.
fn per_unit(f: &mut Fields<'_>, prefix: &str) -> Option<RateLimitInfo> {
    let mut unit = |u: &str| {
        let mut info = RateLimitInfo::new(RateLimitSource::XRateLimit);
        info.policy = Some(u.to_owned());
        info.limit = f.count(&format!("{prefix}limit-{u}"));
        info.remaining = f.count(&format!("{prefix}remaining-{u}"));
        info.reset = f
            .go_duration(&format!("{prefix}reset-{u}"))
            .map(clamp_reset);
        info.non_empty()
    };
    let requests = unit("requests");
    match unit("tokens") {
        Some(t) if t.exhausted() => Some(t),
        tokens => requests.or(tokens),
    }
}

/// Read the fields under one prefix, labelled `source`.
pub(crate) fn read_prefix(
    f: &mut Fields<'_>,
    prefix: &str,
    form: ResetForm,
    source: RateLimitSource,
) -> XReading {
    let name = |s: &str| format!("{prefix}{s}");
    let mut info = RateLimitInfo::new(source);
    info.limit = f.count(&name("limit"));
    let used = f.count(&name("used"));
    info.remaining = f
        .count(&name("remaining"))
        .or_else(|| Some(info.limit?.saturating_sub(used?)));
    let now = f.now;
    info.reset = f
        .decimal(&name("reset-after"))
        .or_else(|| Some(reset(f.decimal(&name("reset"))?, now, form)))
        .map(clamp_reset);
    XReading {
        info: info.non_empty(),
        used,
    }
}

/// Interpret an `X-RateLimit-Reset` number as a delta, epoch seconds or epoch milliseconds.
pub(crate) fn reset(value: Duration, now: SystemTime, form: ResetForm) -> Duration {
    let whole = value.as_secs();
    let at = match form {
        ResetForm::EpochSecs => UNIX_EPOCH.checked_add(value),
        // The number as written counts milliseconds.
        ResetForm::Guess if whole > EPOCH_MILLIS_THRESHOLD => {
            UNIX_EPOCH.checked_add(Duration::from_millis(whole))
        }
        ResetForm::Guess if whole > EPOCH_SECS_THRESHOLD => UNIX_EPOCH.checked_add(value),
        ResetForm::Guess => return value,
    };
    // An unrepresentable instant is far in the future: the clamp makes it one day.
    at.map_or(MAX_RESET, |at| {
        at.duration_since(now).unwrap_or(Duration::ZERO)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_per_unit_quotas_with_go_durations() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", "149984"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ] {
            h.insert(k, http::HeaderValue::from_static(v));
        }
        let now = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        let r = read(&mut Fields::new(&h, now), ResetForm::Guess)
            .info
            .unwrap();
        assert_eq!(
            (r.policy.as_deref(), r.limit, r.remaining),
            (Some("requests"), Some(60), Some(59))
        );
        assert_eq!(r.reset, Some(Duration::from_secs(1)));
        // The tokens quota spent: it is the one that refuses.
        h.insert(
            "x-ratelimit-remaining-tokens",
            http::HeaderValue::from_static("0"),
        );
        let r = read(&mut Fields::new(&h, now), ResetForm::Guess)
            .info
            .unwrap();
        assert_eq!(
            (r.policy.as_deref(), r.remaining),
            (Some("tokens"), Some(0))
        );
        assert_eq!(r.reset, Some(Duration::from_secs(360)));
        // A reset that is no duration is malformed, never zero: no reset is known.
        h.insert(
            "x-ratelimit-reset-tokens",
            http::HeaderValue::from_static("soon"),
        );
        let mut f = Fields::new(&h, now);
        let r = read(&mut f, ResetForm::Guess).info.unwrap();
        assert_eq!((r.policy.as_deref(), r.reset), (Some("tokens"), None));
        assert_eq!(f.into_malformed().len(), 1);
    }

    #[test]
    fn reset_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        let s = Duration::from_secs;
        let guess = |v| reset(v, now, ResetForm::Guess);
        assert_eq!(guess(s(30)), s(30));
        assert_eq!(guess(s(1_750_000_042)), s(42));
        assert_eq!(guess(s(1_750_000_042_000)), s(42));
        assert_eq!(guess(s(1_600_000_000)), Duration::ZERO);
        // A dialect that means epoch reads a small number as long past: zero, not a delta.
        assert_eq!(reset(s(30), now, ResetForm::EpochSecs), Duration::ZERO);
        assert_eq!(
            reset(
                Duration::from_millis(1_750_000_001_500),
                now,
                ResetForm::EpochSecs
            ),
            Duration::from_millis(1500)
        );
    }
}
