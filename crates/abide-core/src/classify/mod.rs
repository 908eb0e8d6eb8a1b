//! Response classification: what a response means for the next attempt.
//!
//! Classify before retrying: *not ever* (terminal), *not like this* (refresh credentials),
//! *not right now* (throttle / retry with a delay). Retrying a malformed request wastes the
//! provider's quota; treating a throttle like a 502 retries into the very limit that refused
//! us; treating a throttle like a malformed payload drops messages that would have gone
//! through a minute later. The [`Classifier`] turns one observation into a [`Verdict`] with a
//! stable reason code, the server's clamped `Retry-After` and its rate-limit headers.
//!
//! # Reason codes
//! Stable strings, safe to match on in logs, metrics and scripts:
//! - `http_<status>`, e.g. `http_429`, `http_503`;
//! - `http_<status>_retry_after` / `http_<status>_rate_limit_exhausted` when that header
//!   turned a status into a throttle (e.g. `http_403_retry_after`; `retry-after-ms` counts
//!   as `Retry-After`);
//! - `http_<status>_secondary_rate_limit`: GitHub's secondary limit, told by the body text
//!   (dialect `github`, given or detected; see [`crate::ratelimit::github`]);
//! - `http_<status>_<vendor shape>` when a vendor's error body or header decided the class
//!   (e.g. `http_200_graphql_throttled`, `http_403_salesforce_request_limit_exceeded`,
//!   `http_429_openai_insufficient_quota`; see [`vendors`]);
//! - `smpp_0x<hex>_<name>`, e.g. `smpp_0x58_throttled`, `smpp_0x0b_invdstadr`
//!   (`unrecognised` for codes without a name);
//! - `connect_error`, `timeout_after_send_replay_safe`,
//!   `timeout_after_send_not_replay_safe`;
//! - any of the above with `_override` appended when a provider override decided the class.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::SystemTime;

use http::{HeaderMap, StatusCode};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::ratelimit::{self, github, Dialect, RateLimitInfo, Reading};
use crate::retry_after::{escape_raw, RetryAfterPolicy, RetryDelay};
use crate::session::SettingError;

mod codes;
pub mod duration;
pub mod rules;
pub mod smpp;
pub mod vendors;
mod verdict;

pub use rules::{BodyRule, HeaderRule};
pub use verdict::{Observation, TransportFailure, Verdict, VerdictClass, MAX_CLASSIFY_BODY};

/// Per-provider replacements for the default tables. An override decides the class outright
/// (a `Retry-After` no longer upgrades it to a throttle); `Retry-After` and rate-limit headers
/// are still read and reported. Body and header [`rules`] come first, then the status
/// overrides, then the built-in tables.
///
/// Deserialises from a provider file; keys are strings (TOML keys always are), SMPP codes
/// in decimal or `0x` hex:
/// ```toml
/// [classify.http]
/// 409 = "retry"
/// [classify.smpp]
/// "0x45" = "retry"
/// [[classify.body]]
/// json = "/errors/0/extensions/code"
/// equals = "THROTTLED"
/// verdict = "throttle"
/// delay_json = "/retry_after"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifyOverrides {
    /// HTTP status → class.
    #[serde(
        serialize_with = "codes::ser_http",
        deserialize_with = "codes::de_http"
    )]
    pub http: BTreeMap<u16, VerdictClass>,
    /// SMPP `command_status` → class.
    #[serde(
        serialize_with = "codes::ser_smpp",
        deserialize_with = "codes::de_smpp"
    )]
    pub smpp: BTreeMap<u32, VerdictClass>,
    /// Rules on JSON body fields, tried first, in order (see [`rules`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<BodyRule>,
    /// Rules on response headers, tried after the body rules, in order (see [`rules`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub header: Vec<HeaderRule>,
}

impl ClassifyOverrides {
    /// Check every override and rule, as at start.
    ///
    /// # Errors
    /// [`SettingError::Classify`] naming the first bad one and its key
    /// (`classify.http.999`, `classify.body[2].json`, `classify.header.busy.equals`): a
    /// status outside 100–599, a 2xx (or SMPP `ESME_ROK`) made anything but a success, a
    /// pointer that is no RFC 6901 JSON pointer, a compared value that is no string,
    /// number or boolean, a header name that is none, a delay on a verdict that does not
    /// wait, more than [`rules::MAX_RULES`] rules.
    pub fn validate(&self) -> Result<(), SettingError> {
        let bad = |setting: String, problem: &'static str| SettingError::Classify {
            setting: Cow::Owned(setting),
            problem: Cow::Borrowed(problem),
        };
        for (&status, &class) in &self.http {
            let setting = || format!("classify.http.{status}");
            if !(100..=599).contains(&status) {
                return Err(bad(setting(), "not an HTTP status code (100-599)"));
            }
            if (200..300).contains(&status) && class != VerdictClass::Success {
                return Err(bad(
                    setting(),
                    "a 2xx answer is a success: it cannot be classified otherwise",
                ));
            }
        }
        if let Some(&class) = self.smpp.get(&0) {
            if class != VerdictClass::Success {
                return Err(bad(
                    "classify.smpp.0x0".to_owned(),
                    "command_status 0 (ESME_ROK) is a success: it cannot be classified otherwise",
                ));
            }
        }
        rules::validate(&self.body, &self.header)
    }
}

/// Classifies observations. Tables can be overridden per provider; the rate-limit header
/// [`Dialect`] can be named per provider.
///
/// # Default
/// HTTP (RFC 9110 §15): 2xx success; 401 refresh credentials; 429 throttle; 503 with
/// `Retry-After` throttle; 408, 425, 500, 502, 503, 504 and other 5xx retry; 400, 403, 404,
/// 405, 409, 410, 422 and other 4xx terminal, **except** that a 4xx (but 401) carrying
/// `Retry-After` (any value, even `0` or garbage) or an exhausted rate-limit header is a
/// throttle; 3xx terminal (a redirect is not followed, and the same request would get the
/// same answer: a `304` to a conditional `GET` is the answer itself); 1xx and anything outside
/// 100–599 unknown. With the `github` dialect (given
/// or detected), a 403 or 429 whose body says "secondary rate limit" is a throttle that waits
/// at least a minute. Otherwise a vendor's error shape recognised by structure decides (a
/// GraphQL `200` that says `THROTTLED`, a `403` `REQUEST_LIMIT_EXCEEDED`, a `503` S3
/// `SlowDown`, a `429` `insufficient_quota` that is out of quota; see [`vendors`]); a delay
/// the body names applies when no header named one. An exhausted rate limit without a reset takes its reset from
/// `Retry-After` (on any status, successes included). Dialect: [`Dialect::Auto`].
/// SMPP: see [`smpp::TABLE`]; codes not in it are unknown.
/// Transport: connect errors retry; after-send failures retry only when replay-safe,
/// otherwise terminal (a replay could duplicate the message).
///
/// # Examples
/// ```
/// use abide_core::{Classifier, Observation, VerdictClass};
/// use http::{HeaderMap, StatusCode};
/// use rand::SeedableRng;
/// use std::time::SystemTime;
///
/// let classifier = Classifier::default().with_http(409, VerdictClass::Retry);
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
/// let headers = HeaderMap::new();
/// let obs = Observation::Http { status: StatusCode::CONFLICT, headers: &headers, body: b"" };
/// let v = classifier.classify(&obs, SystemTime::UNIX_EPOCH, &mut rng);
/// assert_eq!(v.class, VerdictClass::Retry);
/// assert_eq!(v.reason, "http_409_override");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    /// How `Retry-After` is clamped.
    pub retry_after: RetryAfterPolicy,
    /// Per-provider table overrides.
    pub overrides: ClassifyOverrides,
    /// How rate-limit headers are read.
    pub dialect: Dialect,
}

impl Classifier {
    /// Override the class of HTTP `status`.
    #[must_use]
    pub fn with_http(mut self, status: u16, class: VerdictClass) -> Self {
        self.overrides.http.insert(status, class);
        self
    }

    /// Override the class of SMPP `command_status` `code`.
    #[must_use]
    pub fn with_smpp(mut self, code: u32, class: VerdictClass) -> Self {
        self.overrides.smpp.insert(code, class);
        self
    }

    /// Read rate-limit headers in `dialect` (default [`Dialect::Auto`]).
    #[must_use]
    pub fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Replace how `Retry-After` is clamped.
    #[must_use]
    pub fn with_retry_after_policy(mut self, policy: RetryAfterPolicy) -> Self {
        self.retry_after = policy;
        self
    }

    /// Add every override in `overrides` (later entries replace earlier ones).
    #[must_use]
    pub fn with_overrides(mut self, overrides: ClassifyOverrides) -> Self {
        self.overrides.http.extend(overrides.http);
        self.overrides.smpp.extend(overrides.smpp);
        self.overrides.body.extend(overrides.body);
        self.overrides.header.extend(overrides.header);
        self
    }

    /// Classify one observation at wall time `now`. `rng` jitters unparseable waits.
    pub fn classify(
        &self,
        obs: &Observation<'_>,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Verdict {
        match *obs {
            Observation::Http {
                status,
                headers,
                body,
            } => self.http(status, headers, body, now, rng),
            Observation::Smpp { command_status } => self.smpp(command_status),
            Observation::Transport(t) => transport(t),
        }
    }

    /// The server's own delay, floored and capped: `retry-after-ms` / `x-ms-retry-after-ms`
    /// when readable (more precise, and checked first by the Azure SDKs), else
    /// `Retry-After`. `None` when neither is sent. `rng` jitters an unparseable value.
    pub fn server_delay(
        &self,
        headers: &HeaderMap,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Option<RetryDelay> {
        let reading = ratelimit::read(headers, now, Dialect::Auto);
        self.server_delay_with(headers, &reading, now, rng)
    }

    fn server_delay_with(
        &self,
        headers: &HeaderMap,
        reading: &Reading,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Option<RetryDelay> {
        if let Some(d) = reading.retry_after_ms {
            let raw = ratelimit::azure::RETRY_AFTER_MS
                .iter()
                .find_map(|n| headers.get(*n))
                .map(|v| escape_raw(v.as_bytes()));
            return Some(self.retry_after.from_server_delay(d, raw, rng));
        }
        self.retry_after.from_headers(headers, now, rng)
    }

    /// GitHub's documented minimum after a secondary limit that named no wait: one minute,
    /// within [floor, cap]. The server asked for nothing, so no raw value; labelled floored.
    fn secondary_wait(&self, rng: &mut dyn RngCore) -> RetryDelay {
        let d = self
            .retry_after
            .from_server_delay(github::SECONDARY_MIN_WAIT, None, rng);
        RetryDelay {
            reason: crate::retry_after::DelayReason::Floored,
            retry_after: None,
            ..d
        }
    }

    fn http(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Verdict {
        let code = status.as_u16();
        let reading = ratelimit::read(headers, now, self.dialect);
        for m in &reading.malformed {
            tracing::warn!(
                header = %m.header,
                raw = %m.raw,
                dialect = %reading.reader.map_or(Dialect::Auto, Dialect::from),
                "malformed rate-limit header ignored"
            );
        }
        let o = &self.overrides;
        // A success body is parsed only when something could read it: a user's body rule,
        // or the members the 2xx shapes have (GraphQL's `errors`, Slack's `ok`); the
        // structure still decides, the scan only spares parsing every accepted answer.
        let parse = !(200..300).contains(&code)
            || !o.body.is_empty()
            || vendors::mentions_member(body, b"errors")
            || vendors::mentions_member(body, b"ok");
        let json = parse.then(|| vendors::parse_json(body)).flatten();
        let rule = rules::first_match(&o.body, &o.header, code, headers, json.as_ref());
        // A user's rule decides outright: GitHub's text is not looked for then.
        let secondary = rule.is_none()
            && reading.reader == Some(ratelimit::Reader::Github)
            && github::is_secondary_limit(code, body);
        let found = vendors::find(code, headers, body, json.as_ref());
        let mut rate_limit = reading.info.clone();
        let exhausted = rate_limit.as_ref().is_some_and(RateLimitInfo::exhausted);
        let (class, reason, found) = match rule {
            Some(r) => (
                r.class,
                format!("http_{code}_{}", r.tail),
                Some(vendors::Finding {
                    class: r.class,
                    tail: r.tail,
                    delay: r.delay,
                }),
            ),
            None => {
                let (class, reason) =
                    self.by_status(code, headers, &reading, secondary, &found, exhausted);
                (class, reason, found)
            }
        };
        let keeps_delay = class.waits();
        let needs_reset = rate_limit
            .as_ref()
            .is_some_and(|i| i.exhausted() && i.reset.is_none());
        let said = (keeps_delay || needs_reset)
            .then(|| self.server_delay_with(headers, &reading, now, rng))
            .flatten();
        // No header named a delay: the body may (a vendor's cost model, `retry_after`).
        let said = match said {
            None if keeps_delay => found
                .and_then(|f| f.delay)
                .or_else(|| json.as_ref().and_then(vendors::body_delay))
                .map(|d| self.body_delay(d, rng)),
            said => said,
        };
        if let Some(info) = rate_limit.as_mut().filter(|_| needs_reset) {
            // No quota left and no reset sent: the server's delay is when it comes back.
            info.reset = said.as_ref().map(|d| d.delay);
        }
        let retry_after = match said {
            _ if !keeps_delay => None,
            None if secondary && !exhausted => Some(self.secondary_wait(rng)),
            said => said,
        };
        Verdict {
            class,
            reason,
            retry_after,
            rate_limit,
            // An override decides the class outright: its verdict is no secondary limit.
            secondary_limit: secondary && !o.http.contains_key(&code),
        }
    }

    /// The class without a user rule: a status override, GitHub's secondary limit, a
    /// vendor's shape, then the default table.
    fn by_status(
        &self,
        code: u16,
        headers: &HeaderMap,
        reading: &Reading,
        secondary: bool,
        found: &Option<vendors::Finding>,
        exhausted: bool,
    ) -> (VerdictClass, String) {
        match (self.overrides.http.get(&code), found) {
            (Some(&class), _) => (class, format!("http_{code}_override")),
            (None, _) if secondary => (
                VerdictClass::Throttle,
                format!("http_{code}_secondary_rate_limit"),
            ),
            (None, Some(f)) => (f.class, format!("http_{code}_{}", f.tail)),
            (None, None) => {
                let has_retry_after = headers.contains_key(http::header::RETRY_AFTER)
                    || reading.retry_after_ms.is_some();
                http_default(code, has_retry_after, exhausted)
            }
        }
    }

    /// A delay read from the body, floored and capped like a `Retry-After` of that length;
    /// an unreadable one is an unparseable delay (long, jittered, logged raw).
    fn body_delay(&self, d: vendors::BodyDelay, rng: &mut dyn RngCore) -> RetryDelay {
        match d {
            vendors::BodyDelay::Given { delay, raw } => {
                self.retry_after.from_server_delay(delay, Some(raw), rng)
            }
            vendors::BodyDelay::Unreadable { raw } => {
                tracing::warn!(raw = %raw, "unreadable delay in the response body");
                self.retry_after.unparseable(raw, rng)
            }
        }
    }

    fn smpp(&self, code: u32) -> Verdict {
        let suffix = smpp::name(code).map_or_else(
            || "unrecognised".to_owned(),
            |n| n.trim_start_matches("ESME_R").to_ascii_lowercase(),
        );
        let (class, tail) = match self.overrides.smpp.get(&code) {
            Some(&class) => (class, "_override"),
            None => (smpp::default_class(code), ""),
        };
        Verdict {
            class,
            reason: format!("smpp_0x{code:02x}_{suffix}{tail}"),
            retry_after: None,
            rate_limit: None,
            secondary_limit: false,
        }
    }
}

/// The default HTTP table, given whether `Retry-After` is present and the rate limit is
/// exhausted.
fn http_default(code: u16, has_retry_after: bool, exhausted: bool) -> (VerdictClass, String) {
    use VerdictClass::{RefreshCredentials, Retry, Success, Terminal, Throttle, Unknown};
    let plain = |class| (class, format!("http_{code}"));
    // The server telling us *when* to come back means "not now", not "never".
    let upgraded = || {
        if has_retry_after {
            Some((Throttle, format!("http_{code}_retry_after")))
        } else if exhausted {
            Some((Throttle, format!("http_{code}_rate_limit_exhausted")))
        } else {
            None
        }
    };
    match code {
        200..=299 => plain(Success),
        300..=399 => plain(Terminal),
        401 => plain(RefreshCredentials),
        429 => plain(Throttle),
        400..=499 => upgraded().unwrap_or_else(|| match code {
            408 | 425 => plain(Retry),
            _ => plain(Terminal),
        }),
        503 => upgraded().unwrap_or_else(|| plain(Retry)),
        500..=599 => plain(Retry),
        _ => plain(Unknown),
    }
}

fn transport(t: TransportFailure) -> Verdict {
    let (class, reason) = match t {
        TransportFailure::Connect => (VerdictClass::Retry, "connect_error"),
        TransportFailure::AfterSend { replay_safe: true } => {
            (VerdictClass::Retry, "timeout_after_send_replay_safe")
        }
        // The remote may have acted on it: a replay could send the message twice.
        TransportFailure::AfterSend { replay_safe: false } => {
            (VerdictClass::Terminal, "timeout_after_send_not_replay_safe")
        }
    };
    Verdict {
        class,
        reason: reason.to_owned(),
        retry_after: None,
        rate_limit: None,
        secondary_limit: false,
    }
}

#[cfg(test)]
mod tests;
