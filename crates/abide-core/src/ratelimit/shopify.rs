//! Shopify's REST Admin API call limit: a leaky bucket.
//!
//! Source: Shopify developer documentation, "REST Admin API rate limits" and "API rate
//! limits" (leaky bucket algorithm), read 2026.
//!
//! `X-Shopify-Shop-Api-Call-Limit: 32/40` means 32 requests in a bucket of 40. The bucket
//! leaks at a fixed rate per plan: 40 at 2/s, 80 at 4/s, 400 at 20/s (Shopify Plus); each
//! drains in 20 s, so the window is taken as 20 s and the advertised rate as size / 20 s
//! (an under-estimate only on plans that leak faster, the safe side). `remaining` is
//! `size - used`; when it is 0, `reset` is the time until one request leaks out of the way.
//! A throttled request gets 429 with `Retry-After`, which the classifier reads.

use std::time::Duration;

use super::fields::{clamp_reset, digits, Fields};
use super::info::{RateLimitInfo, RateLimitSource};

/// The header name.
pub const CALL_LIMIT: &str = "x-shopify-shop-api-call-limit";

/// Time the documented buckets take to drain completely.
pub const DRAIN_TIME: Duration = Duration::from_secs(20);

/// What the call limit says.
#[derive(Debug, Default)]
pub(crate) struct ShopifyReading {
    pub(crate) info: Option<RateLimitInfo>,
    pub(crate) used: Option<u64>,
}

pub(crate) fn read(f: &mut Fields<'_>) -> ShopifyReading {
    let Some(v) = f.text(CALL_LIMIT) else {
        return ShopifyReading::default();
    };
    let parsed = v.split_once('/').and_then(|(u, s)| {
        let used = digits(u.trim_matches([' ', '\t']))?;
        let size = digits(s.trim_matches([' ', '\t'])).filter(|s| *s > 0)?;
        Some((used, size))
    });
    let Some((used, size)) = parsed else {
        f.bad(CALL_LIMIT, v.as_bytes());
        return ShopifyReading::default();
    };
    let mut info = RateLimitInfo::new(RateLimitSource::Shopify);
    info.limit = Some(size);
    info.remaining = Some(size.saturating_sub(used));
    info.window = Some(DRAIN_TIME);
    if used >= size {
        // One request fits once `used - size + 1` have leaked, at size / DRAIN_TIME each.
        let over = used.saturating_sub(size).saturating_add(1);
        let per = DRAIN_TIME.as_secs_f64() / size as f64;
        let d = Duration::try_from_secs_f64(over as f64 * per).unwrap_or(Duration::MAX);
        info.reset = Some(clamp_reset(d));
    }
    ShopifyReading {
        info: Some(info),
        used: Some(used),
    }
}
