//! Which dialect reads a response: the setting ([`Dialect`]), the module that read it
//! ([`Reader`]), detection, and everything read ([`Reading`]).

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use serde::{Deserialize, Serialize};

use super::fields::{Fields, Malformed};
use super::info::{RateLimitInfo, RateLimitSource};
use super::{azure, discord, github, ietf, shopify, x_ratelimit};

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
    /// A delay from the `retry-after-ms` family, at most [`MAX_RESET`](super::MAX_RESET) (not yet floored:
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

/// Read `headers` in `dialect` (see the [module docs](super) for detection); `now` converts
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
