//! IETF rate-limit fields, every draft generation still deployed.
//!
//! Sources: draft-ietf-httpapi-ratelimit-headers (current drafts, -08 and later: §3
//! `RateLimit-Policy`, §4 `RateLimit`, as RFC 9651 structured fields); its -07 dictionary form
//! `RateLimit: limit=100, remaining=50, reset=30`; and -06 and earlier (§5: separate
//! `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` in delta seconds, optionally
//! with `RateLimit-Policy: 100;w=60`), which popular middleware still emits (express-rate-limit
//! `standardHeaders: "draft-6"`).
//!
//! - **Current**: `RateLimit-Policy: "default";q=100;w=60` (quota `q` per window `w`
//!   seconds) and `RateLimit: "default";r=50;t=30` (`r` units remaining, reset in `t`
//!   seconds). With several policies the `RateLimit` item with the fewest units remaining is
//!   reported, joined with the policy of the same name; with only `RateLimit-Policy`, the
//!   policy with the lowest quota per second. Names may be strings or tokens; integer policy
//!   items (`100;w=60`) are read too.
//! - **Concurrency policies** (a named policy with quota unit `qu="concurrent-requests"`,
//!   the draft's quota unit for requests in flight, or with a quota and no window `w`:
//!   nothing to spread it over) are read apart, into [`RateLimitInfo::concurrency`], and
//!   never as the rate: `"key";q=75;w=1, "conc";q=6` is 75/s and 6 in flight. Reading
//!   the member with the fewest remaining across both read the `conc` member on nearly
//!   every answer of `abide demo` (its `r` counts requests in flight, 0..5), so the
//!   advertised 75/s was seen only rarely, and a concurrency refusal (`"conc";r=0;t=1`)
//!   paused the host as an exhausted rate quota (BENCHMARKS.md, "`abide demo`").
//! - **Older (-06)**: `RateLimit-Limit: 100` (or `100, 100;w=60`: the first number is the
//!   limit, a `w` parameter gives the window), `RateLimit-Remaining`, `RateLimit-Reset`
//!   (delta seconds). A `RateLimit-Policy` beside them supplies the window (and the limit
//!   when `RateLimit-Limit` is missing); the remaining and reset are never lost to it.

use std::time::Duration;

use sfv::{BareItem, Dictionary, List, ListEntry, Parameters, Parser};

use super::fields::{clamp_reset, first_count, Fields};
use super::info::{ConcurrencyQuota, RateLimitInfo, RateLimitSource, MAX_QUOTA, MAX_RESET};

/// The draft's quota unit for requests in flight (`qu` parameter of a policy).
const CONCURRENT_REQUESTS: &str = "concurrent-requests";

/// One policy or limit item of the structured fields.
#[derive(Debug, Default)]
struct SfItem {
    name: Option<String>,
    /// `q` in a policy, the bare integer of an older-draft policy item.
    quota: Option<u64>,
    window: Option<Duration>,
    remaining: Option<u64>,
    reset: Option<Duration>,
    /// A `w` parameter was present (even if unreadable or zero).
    has_w: bool,
    /// `qu="concurrent-requests"`.
    concurrent_unit: bool,
}

impl SfItem {
    /// A concurrency quota rather than a rate: `qu="concurrent-requests"`, or a named policy
    /// with a quota and no window (nothing to spread it over).
    fn is_concurrency_policy(&self) -> bool {
        self.concurrent_unit || (self.name.is_some() && self.quota.is_some() && !self.has_w)
    }
}

/// The IETF fields of any generation; `None` when none is present or readable.
pub(crate) fn read(f: &mut Fields<'_>) -> Option<RateLimitInfo> {
    let policies: Vec<SfItem> = match f.text("ratelimit-policy") {
        Some(v) => match Parser::new(&v).parse::<List>() {
            Ok(list) => list.iter().filter_map(sf_item).collect(),
            Err(_) => {
                f.bad("ratelimit-policy", v.as_bytes());
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    let limits: Vec<SfItem> = match f.text("ratelimit") {
        Some(v) => limits(&v).unwrap_or_else(|| {
            f.bad("ratelimit", v.as_bytes());
            Vec::new()
        }),
        None => Vec::new(),
    };
    let older = ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]
        .iter()
        .any(|n| f.has(n));
    // Concurrency policies apart: their `remaining` counts requests in flight, not a rate.
    let conc_names: Vec<String> = policies
        .iter()
        .filter(|p| p.is_concurrency_policy())
        .filter_map(|p| p.name.clone())
        .collect();
    let is_conc = |i: &SfItem| i.name.as_ref().is_some_and(|n| conc_names.contains(n));
    let (conc_limits, rate_limits): (Vec<SfItem>, Vec<SfItem>) =
        limits.into_iter().partition(|l| is_conc(l));
    let (conc_policies, rate_policies): (Vec<SfItem>, Vec<SfItem>) =
        policies.into_iter().partition(|p| is_conc(p));
    let mut info = if !rate_limits.is_empty() {
        current(&rate_limits, &rate_policies)
    } else if older {
        draft6(f, &rate_policies)
    } else {
        current(&[], &rate_policies)
    };
    info.concurrency = concurrency(&conc_limits, &conc_policies);
    info.non_empty()
}

/// The concurrency quota with the fewest units remaining (else the lowest), joined with
/// its `RateLimit` item.
fn concurrency(limits: &[SfItem], policies: &[SfItem]) -> Option<ConcurrencyQuota> {
    let item = |p: &SfItem| {
        let l = limits.iter().find(|l| l.name == p.name);
        ConcurrencyQuota {
            policy: p.name.clone(),
            limit: p.quota,
            remaining: l.and_then(|l| l.remaining),
        }
    };
    policies.iter().map(item).min_by(|a, b| {
        let key = |c: &ConcurrencyQuota| (c.remaining.unwrap_or(u64::MAX), c.limit);
        key(a).cmp(&key(b))
    })
}

fn current(limits: &[SfItem], policies: &[SfItem]) -> RateLimitInfo {
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
                // The -07 dictionary form carries the limit itself.
                info.limit = l.quota;
            }
            policies
                .iter()
                .find(|p| p.name.is_some() && p.name == l.name)
                .or_else(|| (policies.len() == 1).then(|| &policies[0]))
        }
        None => tightest(policies),
    };
    if let Some(p) = policy {
        if info.policy.is_none() {
            info.policy.clone_from(&p.name);
        }
        info.limit = info.limit.or(p.quota);
        info.window = p.window;
    }
    info
}

/// The policy with the lowest quota per second.
fn tightest(policies: &[SfItem]) -> Option<&SfItem> {
    policies.iter().min_by(|a, b| {
        let rate = |p: &SfItem| match (p.quota, p.window) {
            (Some(q), Some(w)) => q as f64 / w.as_secs_f64(),
            _ => f64::INFINITY,
        };
        rate(a).total_cmp(&rate(b))
    })
}

/// Draft -06: `RateLimit-Limit` / `-Remaining` / `-Reset`, with or without a policy field.
fn draft6(f: &mut Fields<'_>, policies: &[SfItem]) -> RateLimitInfo {
    let mut info = RateLimitInfo::new(RateLimitSource::LegacyDraft);
    if let Some(v) = f.text("ratelimit-limit") {
        info.limit = first_count(&v);
        if info.limit.is_none() {
            f.bad("ratelimit-limit", v.as_bytes());
        }
        if let Ok(list) = Parser::new(&v).parse::<List>() {
            let items: Vec<SfItem> = list.iter().filter_map(sf_item).collect();
            info.window = items
                .iter()
                .find(|i| i.window.is_some() && i.quota == info.limit)
                .or_else(|| items.iter().find(|i| i.window.is_some()))
                .and_then(|i| i.window);
        }
    }
    if info.window.is_none() {
        // The policy field names the window: the one whose quota is the limit, else the
        // tightest.
        let p = policies
            .iter()
            .find(|p| p.window.is_some() && info.limit.is_some() && p.quota == info.limit)
            .or_else(|| tightest(policies));
        if let Some(p) = p {
            info.window = p.window;
            info.limit = info.limit.or(p.quota);
            info.policy.clone_from(&p.name);
        }
    }
    info.remaining = f.count("ratelimit-remaining");
    info.reset = f.decimal("ratelimit-reset").map(clamp_reset);
    info
}

/// `RateLimit` as a list of items (current draft) or, failing that, the -07 dictionary
/// `limit=…, remaining=…, reset=…`. `None` when neither reads.
fn limits(v: &str) -> Option<Vec<SfItem>> {
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
    out.has_w = p.get("w").is_some();
    out.concurrent_unit = match p.get("qu") {
        Some(BareItem::String(u)) => u.as_str() == CONCURRENT_REQUESTS,
        Some(BareItem::Token(u)) => u.as_str() == CONCURRENT_REQUESTS,
        _ => false,
    };
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
