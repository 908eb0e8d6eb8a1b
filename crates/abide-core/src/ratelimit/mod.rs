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

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use serde::{Deserialize, Serialize};

pub mod azure;
pub mod discord;
mod fields;
pub mod github;
pub mod ietf;
pub mod shopify;
mod write;
pub mod x_ratelimit;

pub use write::{RateLimitFields, RATELIMIT, RATELIMIT_POLICY};

use fields::Fields;

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

crate::named_enum! {
    /// How to read a host's rate-limit headers: one named [`Reader`], or [`Dialect::Auto`]
    /// to detect it. The setting (the providers file's `rate_limit_dialect`, `abide inspect
    /// --dialect`); what then read a response is [`Reading::reader`]. Parsed ignoring ASCII
    /// case and surrounding whitespace.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
    #[serde(try_from = "String", into = "&'static str")]
    #[non_exhaustive]
    pub enum Dialect("rate-limit dialect", ignore_ascii_case) {
        /// Detect from unambiguous header names, else try the generic families (module docs).
        #[default]
        Auto = "auto",
        /// IETF structured fields and the earlier `RateLimit-*` draft ([`ietf`]).
        Ietf = "ietf",
        /// `X-RateLimit-*` / `X-Rate-Limit-*` ([`x_ratelimit`]).
        XRateLimit = "x-ratelimit",
        /// `retry-after-ms`, `x-ms-retry-after-ms`, `x-ms-ratelimit-remaining-*` ([`azure`]).
        Azure = "azure",
        /// `X-Shopify-Shop-Api-Call-Limit` ([`shopify`]).
        Shopify = "shopify",
        /// Discord's buckets, scopes and `Reset-After` ([`discord`]).
        Discord = "discord",
        /// GitHub's resources and secondary limits ([`github`]).
        Github = "github",
    }
}

crate::named_enum! {
    /// The dialect module that read a response's headers (chosen, or detected by
    /// [`Dialect::Auto`]): one of the header families, never "auto".
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
    #[serde(into = "&'static str")]
    #[non_exhaustive]
    pub enum Reader("rate-limit reader") {
        /// [`ietf`].
        Ietf = "ietf",
        /// [`x_ratelimit`].
        XRateLimit = "x-ratelimit",
        /// [`azure`].
        Azure = "azure",
        /// [`shopify`].
        Shopify = "shopify",
        /// [`discord`].
        Discord = "discord",
        /// [`github`].
        Github = "github",
    }
}

/// A dialect name that is not one of [`Dialect::NAMES`].
pub type UnknownDialect = crate::names::UnknownName;

impl Dialect {
    /// The named reader; `None` for [`Dialect::Auto`].
    pub fn reader(self) -> Option<Reader> {
        match self {
            Dialect::Auto => None,
            Dialect::Ietf => Some(Reader::Ietf),
            Dialect::XRateLimit => Some(Reader::XRateLimit),
            Dialect::Azure => Some(Reader::Azure),
            Dialect::Shopify => Some(Reader::Shopify),
            Dialect::Discord => Some(Reader::Discord),
            Dialect::Github => Some(Reader::Github),
        }
    }
}

impl From<Reader> for Dialect {
    fn from(r: Reader) -> Self {
        match r {
            Reader::Ietf => Dialect::Ietf,
            Reader::XRateLimit => Dialect::XRateLimit,
            Reader::Azure => Dialect::Azure,
            Reader::Shopify => Dialect::Shopify,
            Reader::Discord => Dialect::Discord,
            Reader::Github => Dialect::Github,
        }
    }
}

impl From<Dialect> for &'static str {
    fn from(d: Dialect) -> Self {
        d.as_str()
    }
}

impl From<Reader> for &'static str {
    fn from(r: Reader) -> Self {
        r.as_str()
    }
}

/// A header that was present but could not be read; it was ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Malformed {
    /// Header name, lower-case.
    pub header: String,
    /// The value as received, escaped and cut (see [`crate::retry_after::escape_raw`]).
    pub raw: String,
}

/// Everything one dialect read from a response.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reading {
    /// The dialect module that read the headers: the one named, or the one
    /// [`Dialect::Auto`] chose; `None` when auto found nothing to read.
    pub reader: Option<Reader>,
    /// True when [`Dialect::Auto`] chose the reader.
    pub detected: bool,
    /// The quota, clamped; `None` when no header of the dialect was readable.
    pub info: Option<RateLimitInfo>,
    /// Units used in the window, when the dialect says (`X-RateLimit-Used`, Shopify).
    pub used: Option<u64>,
    /// Discord's `X-RateLimit-Scope` (`user`, `global`, `shared`), or `global` for
    /// `X-RateLimit-Global: true`.
    pub scope: Option<String>,
    /// True for a leaky bucket (Shopify): `reset` is then the time until one request fits.
    pub leaky_bucket: bool,
    /// A delay from the `retry-after-ms` family, at most [`MAX_RESET`] (not yet floored:
    /// the classifier's `Retry-After` policy does that).
    #[serde(serialize_with = "crate::serde_secs::opt")]
    pub retry_after_ms: Option<Duration>,
    /// Headers present but unreadable, ignored.
    pub malformed: Vec<Malformed>,
}

/// Read rate-limit information from response headers in the [`Dialect::Auto`] dialect;
/// `now` converts epoch resets. Returns `None` when no recognised header is present or
/// none parses.
pub fn parse_rate_limit(headers: &HeaderMap, now: SystemTime) -> Option<RateLimitInfo> {
    read(headers, now, Dialect::Auto).info
}

/// Read `headers` in `dialect` (see the [module docs](self) for detection); `now` converts
/// epoch resets. Never panics; every number is clamped.
pub fn read(headers: &HeaderMap, now: SystemTime, dialect: Dialect) -> Reading {
    let mut f = Fields::new(headers, now);
    let (chosen, detected) = match dialect.reader() {
        Some(r) => (Some(r), false),
        None => (detect(headers), true),
    };
    let mut reading = Reading {
        reader: chosen,
        detected,
        info: None,
        used: None,
        scope: None,
        leaky_bucket: false,
        retry_after_ms: azure::retry_after_ms(&mut f),
        malformed: Vec::new(),
    };
    match chosen {
        None => {
            // Generic: the first family that yields anything wins.
            reading.info = ietf::read(&mut f);
            if reading.info.is_none() {
                let x = x_ratelimit::read(&mut f, x_ratelimit::ResetForm::Guess);
                reading.info = x.info;
                reading.used = x.used;
            }
            reading.reader = match reading.info.as_ref().map(|i| i.source) {
                Some(RateLimitSource::Ietf | RateLimitSource::LegacyDraft) => Some(Reader::Ietf),
                Some(_) => Some(Reader::XRateLimit),
                None if reading.retry_after_ms.is_some() => Some(Reader::Azure),
                None => None,
            };
        }
        Some(Reader::Ietf) => reading.info = ietf::read(&mut f),
        Some(Reader::XRateLimit) => {
            let x = x_ratelimit::read(&mut f, x_ratelimit::ResetForm::Guess);
            reading.info = x.info;
            reading.used = x.used;
        }
        Some(Reader::Azure) => reading.info = azure::read(&mut f),
        Some(Reader::Shopify) => {
            let s = shopify::read(&mut f);
            reading.info = s.info;
            reading.used = s.used;
            reading.leaky_bucket = reading.info.is_some();
        }
        Some(Reader::Discord) => {
            let d = discord::read(&mut f);
            reading.info = d.info;
            reading.scope = d.scope;
        }
        Some(Reader::Github) => {
            let g = github::read(&mut f);
            reading.info = g.info;
            reading.used = g.used;
        }
    }
    reading.malformed = f.into_malformed();
    reading
}

/// The reader whose header names are present and mean one thing; `None` when none are
/// (the generic families are then tried).
fn detect(headers: &HeaderMap) -> Option<Reader> {
    let has = |n: &str| headers.contains_key(n);
    if has(shopify::CALL_LIMIT) {
        Some(Reader::Shopify)
    } else if discord::MARKERS.iter().any(|n| has(n)) {
        Some(Reader::Discord)
    } else if github::MARKERS.iter().any(|n| has(n)) {
        Some(Reader::Github)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
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
