//! What a server advertised about its quota, clamped: [`RateLimitInfo`] and the bounds
//! every dialect clamps to.

use std::time::Duration;

use serde::Serialize;

/// Which header family a [`RateLimitInfo`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RateLimitSource {
    /// IETF `RateLimit` / `RateLimit-Policy` structured fields.
    Ietf,
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`.
    LegacyDraft,
    /// `X-RateLimit-*` or `X-Rate-Limit-*` variants.
    XRateLimit,
    /// Azure's `x-ms-ratelimit-remaining-*`.
    Azure,
    /// Shopify's `X-Shopify-Shop-Api-Call-Limit` leaky bucket.
    Shopify,
    /// Discord's `X-RateLimit-*` with buckets and scopes.
    Discord,
    /// GitHub's `X-RateLimit-*` with resources.
    Github,
}

/// What the server advertised about its quota, clamped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateLimitInfo {
    /// Header family.
    pub source: RateLimitSource,
    /// Policy name: the IETF policy, GitHub's resource (`core`, `search`), Discord's bucket.
    pub policy: Option<String>,
    /// Quota units per window, at most [`MAX_QUOTA`].
    pub limit: Option<u64>,
    /// Units left in the current window, at most [`MAX_QUOTA`].
    pub remaining: Option<u64>,
    /// Time until the window resets (for a leaky bucket: until one more request fits),
    /// clamped to at most [`MAX_RESET`].
    #[serde(rename = "reset_secs", serialize_with = "crate::serde_secs::opt")]
    pub reset: Option<Duration>,
    /// Window length, if advertised (IETF `w`) or documented for the dialect, clamped.
    #[serde(rename = "window_secs", serialize_with = "crate::serde_secs::opt")]
    pub window: Option<Duration>,
    /// A quota on requests in flight (IETF `qu="concurrent-requests"`, or a policy without a
    /// window), read apart from the rate: the fields above never come from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyQuota>,
}

/// A server's quota on requests in flight at once (draft-ietf-httpapi-ratelimit-headers,
/// quota unit `concurrent-requests`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConcurrencyQuota {
    /// Policy name.
    pub policy: Option<String>,
    /// Requests allowed in flight, at most [`MAX_QUOTA`] (see [`ConcurrencyQuota::allowed`]).
    pub limit: Option<u64>,
    /// Places left at the time of the answer, at most [`MAX_QUOTA`].
    pub remaining: Option<u64>,
}

/// Most requests in flight a server's concurrency quota is believed for (one host).
pub const MAX_CONCURRENCY: u32 = 1024;

impl ConcurrencyQuota {
    /// The advertised quota as a number of requests in flight, within
    /// [1, [`MAX_CONCURRENCY`]]; `None` without a quota.
    pub fn allowed(&self) -> Option<u32> {
        let q = self.limit?;
        Some(q.clamp(1, u64::from(MAX_CONCURRENCY)) as u32)
    }

    /// No place was left (`remaining == 0`): on a refusal, the concurrency quota refused.
    pub fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }
}

/// Longest reset or window we believe (one day).
pub const MAX_RESET: Duration = Duration::from_secs(86_400);

/// Largest limit or remaining count we believe (10⁹ units).
pub const MAX_QUOTA: u64 = 1_000_000_000;

/// Lowest rate [`RateLimitInfo::advertised_rate`] returns, in requests per second.
pub const MIN_ADVERTISED_RATE: f64 = 0.001;

/// Highest rate [`RateLimitInfo::advertised_rate`] returns, in requests per second.
pub const MAX_ADVERTISED_RATE: f64 = 100_000.0;

impl RateLimitInfo {
    /// True when the server says no quota is left (`remaining == 0`).
    pub fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }

    /// True when this answer is a concurrency refusal's: the concurrency quota has no place
    /// left while the rate quota (if any) is not exhausted. Such a refusal says nothing
    /// about the rate.
    pub fn concurrency_refused(&self) -> bool {
        !self.exhausted() && self.concurrency.as_ref().is_some_and(|c| c.exhausted())
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

    /// How long a host should hold back after an answer that says no quota is left
    /// (`remaining == 0` with a reset); `None` otherwise. `admitted`: the answer was a
    /// success, not a throttle.
    ///
    /// A throttle's reset is the wait the server demands: the whole of it. A success with
    /// `remaining = 0` says the quota is used up *at this instant*, and a reset in whole
    /// seconds was rounded up (RFC 9110 delay-seconds; the IETF `t`), so the wait it stands
    /// for may be up to 1 s shorter (a fractional reset was not rounded: all of it). With a
    /// known policy the hold is that least wait, at least one interval at the advertised
    /// rate (`window / limit`) and at most the policy's window, within which a success says
    /// the quota comes back (a longer reset is conservative and must not hold the sender
    /// back for the run): `t=1` holds back 25 ms under `q=40;w=1`, `t=3600` of a daily
    /// quota 3,599 s. Waiting out the rounded reset cost a whole window each time: a sender
    /// paced at 0.97 × 40/s against a sliding window counter sees `r=0` on most windows
    /// (its estimate right after an admission is about 39.3 of 40) and delivered 0.34–0.57
    /// of the limit (BENCHMARKS.md, "Sliding window at 40/s"). A fixed window still full
    /// after the hold answers the next request with a 429 that carries its own delay.
    /// The same rule frees a sender behind a token bucket: `abide provider` at 200/s, burst 2,
    /// says `r=0;t=1` whenever two requests land within 5 ms, and obeyed whole that held
    /// abide at 2 requests a second. Without a policy, the whole reset.
    pub fn exhausted_pause(&self, admitted: bool) -> Option<Duration> {
        if !self.exhausted() {
            return None;
        }
        let reset = self.reset?.min(MAX_RESET);
        let Some(rate) = self.advertised_rate().filter(|_| admitted) else {
            return Some(reset);
        };
        let least = if reset.subsec_nanos() == 0 {
            reset.saturating_sub(Duration::from_secs(1))
        } else {
            reset
        };
        let window = self.window.unwrap_or(MAX_RESET);
        Some(
            least
                .max(Duration::from_secs_f64(1.0 / rate))
                .min(reset)
                .min(window),
        )
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.limit.is_none()
            && self.remaining.is_none()
            && self.reset.is_none()
            && self.window.is_none()
            && self.concurrency.is_none()
    }

    pub(crate) fn new(source: RateLimitSource) -> Self {
        Self {
            source,
            policy: None,
            limit: None,
            remaining: None,
            reset: None,
            window: None,
            concurrency: None,
        }
    }

    /// `None` when nothing was read.
    pub(crate) fn non_empty(self) -> Option<Self> {
        (!self.is_empty()).then_some(self)
    }
}
