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
//! - `smpp_0x<hex>_<name>`, e.g. `smpp_0x58_throttled`, `smpp_0x0b_invdstadr`
//!   (`unrecognised` for codes without a name);
//! - `connect_error`, `timeout_after_send_replay_safe`,
//!   `timeout_after_send_not_replay_safe`;
//! - any of the above with `_override` appended when a provider override decided the class.

use std::collections::BTreeMap;
use std::time::SystemTime;

use http::{HeaderMap, StatusCode};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::ratelimit::{self, github, Dialect, RateLimitInfo, Reading};
use crate::retry_after::{escape_raw, RetryAfterPolicy, RetryDelay};

/// Most response-body bytes worth keeping for classification (a prefix is enough for
/// every body rule, e.g. GitHub's "secondary rate limit" text): 4 KiB.
pub const MAX_CLASSIFY_BODY: usize = 4096;

/// What came back from one attempt.
#[derive(Debug, Clone, Copy)]
pub enum Observation<'a> {
    /// An HTTP response.
    Http {
        /// Status code.
        status: StatusCode,
        /// Response headers.
        headers: &'a HeaderMap,
        /// The start of the response body (empty when not read); some vendors say "rate
        /// limited" only there (GitHub's secondary limit). Up to [`MAX_CLASSIFY_BODY`] bytes
        /// are enough.
        body: &'a [u8],
    },
    /// An SMPP response PDU's `command_status`.
    Smpp {
        /// `command_status` (SMPP 3.4 §5.1.3).
        command_status: u32,
    },
    /// No response: the transport failed.
    Transport(TransportFailure),
}

/// How the transport failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportFailure {
    /// Connection could not be established: the request was never sent. Safe to retry.
    Connect,
    /// Timed out or broke after the request was sent: the remote may have acted on it.
    /// Retried only when `replay_safe` (idempotent method or an idempotency key).
    AfterSend {
        /// The request is idempotent or carries an idempotency key.
        replay_safe: bool,
    },
}

/// The class of a verdict; stable snake_case names appear in JSON, logs and the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictClass {
    /// Accepted.
    Success,
    /// The remote asked us to slow down (429, 503 with Retry-After, SMPP 0x58/0x14, ...).
    /// Changes the sender: pause the provider and feed the pacer.
    Throttle,
    /// A transient failure; retry this item later.
    Retry,
    /// 401: refresh credentials once, then retry.
    RefreshCredentials,
    /// Never retry.
    Terminal,
    /// Not recognised: retry with a low attempt cap, and say so loudly.
    Unknown,
}

impl VerdictClass {
    /// Stable name, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictClass::Success => "success",
            VerdictClass::Throttle => "throttle",
            VerdictClass::Retry => "retry",
            VerdictClass::RefreshCredentials => "refresh_credentials",
            VerdictClass::Terminal => "terminal",
            VerdictClass::Unknown => "unknown",
        }
    }
}

/// The classifier's decision on one observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// What to do.
    pub class: VerdictClass,
    /// A short stable reason code, e.g. `"http_429"`, `"smpp_0x58_throttled"`,
    /// `"connect_error"` (see the [module docs](self)).
    pub reason: String,
    /// The server's requested delay after floor/cap, when it sent `Retry-After` and the class
    /// is neither success nor terminal.
    pub retry_after: Option<RetryDelay>,
    /// Rate-limit headers, when present (on any class, successes included).
    pub rate_limit: Option<RateLimitInfo>,
}

/// SMPP 3.4 `command_status` values (SMPP v3.4 specification, §5.1.3 "command_status",
/// Table 5-2 "Error Codes"), and the default class of each.
pub mod smpp {
    use super::VerdictClass;

    /// 0x00000000 No Error.
    pub const ESME_ROK: u32 = 0x0000_0000;
    /// 0x00000001 Message Length is invalid.
    pub const ESME_RINVMSGLEN: u32 = 0x0000_0001;
    /// 0x00000002 Command Length is invalid.
    pub const ESME_RINVCMDLEN: u32 = 0x0000_0002;
    /// 0x00000003 Invalid Command ID.
    pub const ESME_RINVCMDID: u32 = 0x0000_0003;
    /// 0x00000004 Incorrect BIND Status for given command.
    pub const ESME_RINVBNDSTS: u32 = 0x0000_0004;
    /// 0x00000005 ESME Already in Bound State.
    pub const ESME_RALYBND: u32 = 0x0000_0005;
    /// 0x00000008 System Error.
    pub const ESME_RSYSERR: u32 = 0x0000_0008;
    /// 0x0000000A Invalid Source Address.
    pub const ESME_RINVSRCADR: u32 = 0x0000_000A;
    /// 0x0000000B Invalid Dest Addr.
    pub const ESME_RINVDSTADR: u32 = 0x0000_000B;
    /// 0x0000000C Message ID is invalid.
    pub const ESME_RINVMSGID: u32 = 0x0000_000C;
    /// 0x0000000D Bind Failed.
    pub const ESME_RBINDFAIL: u32 = 0x0000_000D;
    /// 0x0000000E Invalid Password.
    pub const ESME_RINVPASWD: u32 = 0x0000_000E;
    /// 0x0000000F Invalid System ID.
    pub const ESME_RINVSYSID: u32 = 0x0000_000F;
    /// 0x00000014 Message Queue Full.
    pub const ESME_RMSGQFUL: u32 = 0x0000_0014;
    /// 0x00000043 Invalid esm_class field data.
    pub const ESME_RINVESMCLASS: u32 = 0x0000_0043;
    /// 0x00000045 submit_sm or submit_multi failed.
    pub const ESME_RSUBMITFAIL: u32 = 0x0000_0045;
    /// 0x00000048 Invalid Source address TON.
    pub const ESME_RINVSRCTON: u32 = 0x0000_0048;
    /// 0x00000049 Invalid Source address NPI.
    pub const ESME_RINVSRCNPI: u32 = 0x0000_0049;
    /// 0x00000050 Invalid Destination address TON.
    pub const ESME_RINVDSTTON: u32 = 0x0000_0050;
    /// 0x00000051 Invalid Destination address NPI.
    pub const ESME_RINVDSTNPI: u32 = 0x0000_0051;
    /// 0x00000058 Throttling error (ESME has exceeded allowed message limits).
    pub const ESME_RTHROTTLED: u32 = 0x0000_0058;
    /// 0x00000061 Invalid Scheduled Delivery Time.
    pub const ESME_RINVSCHED: u32 = 0x0000_0061;
    /// 0x00000062 Invalid message validity period (Expiry time).
    pub const ESME_RINVEXPIRY: u32 = 0x0000_0062;
    /// 0x00000064 ESME Receiver Temporary App Error Code.
    pub const ESME_RX_T_APPN: u32 = 0x0000_0064;
    /// 0x00000065 ESME Receiver Permanent App Error Code.
    pub const ESME_RX_P_APPN: u32 = 0x0000_0065;
    /// 0x00000066 ESME Receiver Reject Message Error Code.
    pub const ESME_RX_R_APPN: u32 = 0x0000_0066;
    /// 0x000000FF Unknown Error.
    pub const ESME_RUNKNOWNERR: u32 = 0x0000_00FF;

    /// Every named code with its default class.
    ///
    /// Decisions worth knowing:
    /// - `ESME_RINVPASWD` / `ESME_RINVSYSID` come back on a bind: like HTTP 401 they mean
    ///   "not with these credentials", so [`VerdictClass::RefreshCredentials`] (re-read the
    ///   secret and rebind once; the caller turns a second failure into terminal).
    /// - `ESME_RSUBMITFAIL` is a catch-all that SMSCs return for transient and permanent
    ///   causes alike, so it is [`VerdictClass::Unknown`] (retried with a low cap, flagged);
    ///   override it per provider once its meaning there is known.
    /// - `ESME_RSYSERR` and `ESME_RX_T_APPN` are transient by definition: retry.
    /// - `ESME_RINVBNDSTS`, `ESME_RALYBND`, `ESME_RBINDFAIL`, `ESME_RUNKNOWNERR`: session
    ///   or vague; unknown.
    pub const TABLE: &[(u32, &str, VerdictClass)] = &[
        (ESME_ROK, "ESME_ROK", VerdictClass::Success),
        (ESME_RINVMSGLEN, "ESME_RINVMSGLEN", VerdictClass::Terminal),
        (ESME_RINVCMDLEN, "ESME_RINVCMDLEN", VerdictClass::Terminal),
        (ESME_RINVCMDID, "ESME_RINVCMDID", VerdictClass::Terminal),
        (ESME_RINVBNDSTS, "ESME_RINVBNDSTS", VerdictClass::Unknown),
        (ESME_RALYBND, "ESME_RALYBND", VerdictClass::Unknown),
        (ESME_RSYSERR, "ESME_RSYSERR", VerdictClass::Retry),
        (ESME_RINVSRCADR, "ESME_RINVSRCADR", VerdictClass::Terminal),
        (ESME_RINVDSTADR, "ESME_RINVDSTADR", VerdictClass::Terminal),
        (ESME_RINVMSGID, "ESME_RINVMSGID", VerdictClass::Terminal),
        (ESME_RBINDFAIL, "ESME_RBINDFAIL", VerdictClass::Unknown),
        (
            ESME_RINVPASWD,
            "ESME_RINVPASWD",
            VerdictClass::RefreshCredentials,
        ),
        (
            ESME_RINVSYSID,
            "ESME_RINVSYSID",
            VerdictClass::RefreshCredentials,
        ),
        (ESME_RMSGQFUL, "ESME_RMSGQFUL", VerdictClass::Throttle),
        (
            ESME_RINVESMCLASS,
            "ESME_RINVESMCLASS",
            VerdictClass::Terminal,
        ),
        (ESME_RSUBMITFAIL, "ESME_RSUBMITFAIL", VerdictClass::Unknown),
        (ESME_RINVSRCTON, "ESME_RINVSRCTON", VerdictClass::Terminal),
        (ESME_RINVSRCNPI, "ESME_RINVSRCNPI", VerdictClass::Terminal),
        (ESME_RINVDSTTON, "ESME_RINVDSTTON", VerdictClass::Terminal),
        (ESME_RINVDSTNPI, "ESME_RINVDSTNPI", VerdictClass::Terminal),
        (ESME_RTHROTTLED, "ESME_RTHROTTLED", VerdictClass::Throttle),
        (ESME_RINVSCHED, "ESME_RINVSCHED", VerdictClass::Terminal),
        (ESME_RINVEXPIRY, "ESME_RINVEXPIRY", VerdictClass::Terminal),
        (ESME_RX_T_APPN, "ESME_RX_T_APPN", VerdictClass::Retry),
        (ESME_RX_P_APPN, "ESME_RX_P_APPN", VerdictClass::Terminal),
        (ESME_RX_R_APPN, "ESME_RX_R_APPN", VerdictClass::Terminal),
        (ESME_RUNKNOWNERR, "ESME_RUNKNOWNERR", VerdictClass::Unknown),
    ];

    /// The spec name of `code` (e.g. `"ESME_RTHROTTLED"`), if it is in [`TABLE`].
    pub fn name(code: u32) -> Option<&'static str> {
        TABLE.iter().find(|e| e.0 == code).map(|e| e.1)
    }

    /// The default class of `code`: from [`TABLE`], [`VerdictClass::Unknown`] otherwise.
    pub fn default_class(code: u32) -> VerdictClass {
        TABLE
            .iter()
            .find(|e| e.0 == code)
            .map_or(VerdictClass::Unknown, |e| e.2)
    }
}

/// Per-provider replacements for the default tables. An override decides the class outright
/// (a `Retry-After` no longer upgrades it to a throttle); `Retry-After` and rate-limit headers
/// are still read and reported.
///
/// Deserialises from a provider file; keys are strings (TOML keys always are), SMPP codes
/// in decimal or `0x` hex:
/// ```toml
/// [classify.http]
/// 409 = "retry"
/// [classify.smpp]
/// "0x45" = "retry"
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
}

/// Classifies observations. Tables can be overridden per provider; the rate-limit header
/// [`Dialect`] can be named per provider.
///
/// # Default
/// HTTP (RFC 9110 §15): 2xx success; 401 refresh credentials; 429 throttle; 503 with
/// `Retry-After` throttle; 408, 425, 500, 502, 503, 504 and other 5xx retry; 400, 403, 404,
/// 405, 409, 410, 422 and other 4xx terminal, **except** that a 4xx (but 401) carrying
/// `Retry-After` (any value, even `0` or garbage) or an exhausted rate-limit header is a
/// throttle; 1xx, 3xx and anything outside 100–599 unknown. With the `github` dialect (given
/// or detected), a 403 or 429 whose body says "secondary rate limit" is a throttle that waits
/// at least a minute. An exhausted rate limit without a reset takes its reset from
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
            return Some(self.retry_after.from_server_delay(d, raw));
        }
        self.retry_after.from_headers(headers, now, rng)
    }

    /// GitHub's documented minimum after a secondary limit that named no wait: one minute,
    /// within [floor, cap]. The server asked for nothing, so no raw value; labelled floored.
    fn secondary_wait(&self) -> RetryDelay {
        let d = self
            .retry_after
            .from_server_delay(github::SECONDARY_MIN_WAIT, None);
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
                dialect = %reading.dialect,
                "malformed rate-limit header ignored"
            );
        }
        let secondary =
            reading.dialect == Dialect::Github && github::is_secondary_limit(code, body);
        let mut rate_limit = reading.info.clone();
        let exhausted = rate_limit.as_ref().is_some_and(RateLimitInfo::exhausted);
        let (class, reason) = match self.overrides.http.get(&code) {
            Some(&class) => (class, format!("http_{code}_override")),
            None if secondary => (
                VerdictClass::Throttle,
                format!("http_{code}_secondary_rate_limit"),
            ),
            None => {
                let has_retry_after = headers.contains_key(http::header::RETRY_AFTER)
                    || reading.retry_after_ms.is_some();
                http_default(code, has_retry_after, exhausted)
            }
        };
        let keeps_delay = !matches!(class, VerdictClass::Success | VerdictClass::Terminal);
        let needs_reset = rate_limit
            .as_ref()
            .is_some_and(|i| i.exhausted() && i.reset.is_none());
        let said = (keeps_delay || needs_reset)
            .then(|| self.server_delay_with(headers, &reading, now, rng))
            .flatten();
        if let Some(info) = rate_limit.as_mut().filter(|_| needs_reset) {
            // No quota left and no reset sent: the server's delay is when it comes back.
            info.reset = said.as_ref().map(|d| d.delay);
        }
        let retry_after = match said {
            _ if !keeps_delay => None,
            None if secondary && !exhausted => Some(self.secondary_wait()),
            said => said,
        };
        Verdict {
            class,
            reason,
            retry_after,
            rate_limit,
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
    }
}

/// Serde for code-keyed maps: keys are strings in files (decimal, or `0x` hex for SMPP).
mod codes {
    use std::collections::BTreeMap;
    use std::fmt;

    use serde::de::{self, Deserializer, MapAccess, Visitor};
    use serde::ser::Serializer;

    use super::VerdictClass;

    struct CodeMap;

    impl<'de> Visitor<'de> for CodeMap {
        type Value = Vec<(u64, VerdictClass)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map from status code to verdict class")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = map.next_entry::<Code, VerdictClass>()? {
                out.push((k.0, v));
            }
            Ok(out)
        }
    }

    struct Code(u64);

    impl<'de> de::Deserialize<'de> for Code {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Code;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a code: an integer, decimal string or 0x-hex string")
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Code, E> {
                    Ok(Code(v))
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Code, E> {
                    u64::try_from(v)
                        .map(Code)
                        .map_err(|_| E::custom(format!("negative code {v}")))
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Code, E> {
                    let t = v.trim();
                    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                        Some(hex) => u64::from_str_radix(hex, 16),
                        None => t.parse(),
                    };
                    parsed
                        .map(Code)
                        .map_err(|_| E::custom(format!("not a code: {v:?}")))
                }
            }
            d.deserialize_any(V)
        }
    }

    fn narrow<T: TryFrom<u64> + Ord, E: de::Error>(
        entries: Vec<(u64, VerdictClass)>,
        ok: impl Fn(&T) -> bool,
    ) -> Result<BTreeMap<T, VerdictClass>, E> {
        entries
            .into_iter()
            .map(|(k, v)| {
                T::try_from(k)
                    .ok()
                    .filter(&ok)
                    .map(|k| (k, v))
                    .ok_or_else(|| E::custom(format!("code {k} out of range")))
            })
            .collect()
    }

    pub(super) fn de_http<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<u16, VerdictClass>, D::Error> {
        narrow(d.deserialize_map(CodeMap)?, |s: &u16| {
            (100..=999).contains(s)
        })
    }

    pub(super) fn de_smpp<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<u32, VerdictClass>, D::Error> {
        narrow(d.deserialize_map(CodeMap)?, |_: &u32| true)
    }

    pub(super) fn ser_http<S: Serializer>(
        m: &BTreeMap<u16, VerdictClass>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k.to_string(), v)))
    }

    pub(super) fn ser_smpp<S: Serializer>(
        m: &BTreeMap<u32, VerdictClass>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (format!("0x{k:02x}"), v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry_after::DelayReason;
    use http::HeaderValue;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use serde::de::IntoDeserializer;
    use std::time::{Duration, UNIX_EPOCH};
    use VerdictClass::{RefreshCredentials, Retry, Success, Terminal, Throttle, Unknown};

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_750_000_000)
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn http_with(c: &Classifier, status: u16, h: &HeaderMap) -> Verdict {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let obs = Observation::Http {
            status: StatusCode::from_u16(status).unwrap(),
            headers: h,
            body: b"",
        };
        c.classify(&obs, now(), &mut rng)
    }

    fn http(status: u16, pairs: &[(&'static str, &'static str)]) -> Verdict {
        http_with(&Classifier::default(), status, &headers(pairs))
    }

    fn smpp_with(c: &Classifier, code: u32) -> Verdict {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        c.classify(
            &Observation::Smpp {
                command_status: code,
            },
            now(),
            &mut rng,
        )
    }

    #[test]
    fn http_default_table_without_headers() {
        let table = [
            (100, Unknown),
            (200, Success),
            (202, Success),
            (204, Success),
            (301, Unknown),
            (304, Unknown),
            (400, Terminal),
            (401, RefreshCredentials),
            (403, Terminal),
            (404, Terminal),
            (405, Terminal),
            (408, Retry),
            (409, Terminal),
            (410, Terminal),
            (418, Terminal),
            (422, Terminal),
            (425, Retry),
            (429, Throttle),
            (451, Terminal),
            (500, Retry),
            (502, Retry),
            (503, Retry),
            (504, Retry),
            (507, Retry),
            (599, Retry),
            (600, Unknown),
            (999, Unknown),
        ];
        for (status, class) in table {
            let v = http(status, &[]);
            assert_eq!(v.class, class, "status {status}");
            assert_eq!(v.reason, format!("http_{status}"));
            assert_eq!(v.retry_after, None);
            assert_eq!(v.rate_limit, None);
        }
    }

    #[test]
    fn a_4xx_with_any_retry_after_is_a_throttle_not_terminal() {
        for value in ["0", "30", "86400", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"] {
            for status in [400, 403, 404, 409, 422, 451] {
                let v = http(status, &[("retry-after", value)]);
                assert_eq!(v.class, Throttle, "{status} with Retry-After {value:?}");
                assert_eq!(v.reason, format!("http_{status}_retry_after"));
                let ra = v.retry_after.expect("retry_after kept");
                assert!(ra.delay >= Duration::from_secs(1), "{ra:?}");
                assert_eq!(ra.raw.as_deref(), Some(value));
            }
        }
        let garbage = http(403, &[("retry-after", "soon")]).retry_after.unwrap();
        assert_eq!(garbage.reason, DelayReason::Unparseable);
        assert!(garbage.delay >= Duration::from_secs(300));
        // 401 stays a credential problem even when it says when to come back.
        assert_eq!(http(401, &[("retry-after", "5")]).class, RefreshCredentials);
    }

    #[test]
    fn retry_after_is_kept_except_on_success_and_terminal() {
        let v = http(429, &[("retry-after", "30")]);
        assert_eq!((v.class, v.reason.as_str()), (Throttle, "http_429"));
        assert_eq!(v.retry_after.unwrap().delay, Duration::from_secs(30));
        let v = http(503, &[("retry-after", "120")]);
        assert_eq!(
            (v.class, v.reason.as_str()),
            (Throttle, "http_503_retry_after")
        );
        assert_eq!(v.retry_after.unwrap().delay, Duration::from_secs(120));
        let v = http(502, &[("retry-after", "7")]);
        assert_eq!(v.class, Retry);
        assert_eq!(v.retry_after.unwrap().delay, Duration::from_secs(7));
        assert_eq!(http(200, &[("retry-after", "7")]).retry_after, None);
        let c = Classifier::default().with_http(404, Terminal);
        let v = http_with(&c, 404, &headers(&[("retry-after", "7")]));
        assert_eq!((v.class, v.retry_after), (Terminal, None));
        assert_eq!(v.reason, "http_404_override");
    }

    #[test]
    fn exhausted_rate_limit_turns_a_4xx_into_a_throttle() {
        let exhausted = [
            ("x-ratelimit-limit", "100"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "30"),
        ];
        let v = http(403, &exhausted);
        assert_eq!(v.class, Throttle);
        assert_eq!(v.reason, "http_403_rate_limit_exhausted");
        assert!(v.rate_limit.as_ref().unwrap().exhausted());
        let v = http(503, &exhausted);
        assert_eq!(
            (v.class, v.reason.as_str()),
            (Throttle, "http_503_rate_limit_exhausted")
        );
        // Quota left: the status decides; the headers are still reported, on success too.
        let ok = [("x-ratelimit-limit", "100"), ("x-ratelimit-remaining", "5")];
        assert_eq!(http(403, &ok).class, Terminal);
        let v = http(200, &ok);
        assert_eq!(v.class, Success);
        assert_eq!(v.rate_limit.unwrap().remaining, Some(5));
    }

    #[test]
    fn smpp_codes() {
        let c = Classifier::default();
        let cases = [
            (smpp::ESME_ROK, Success, "smpp_0x00_ok"),
            (smpp::ESME_RTHROTTLED, Throttle, "smpp_0x58_throttled"),
            (smpp::ESME_RMSGQFUL, Throttle, "smpp_0x14_msgqful"),
            (smpp::ESME_RSYSERR, Retry, "smpp_0x08_syserr"),
            (smpp::ESME_RINVSRCADR, Terminal, "smpp_0x0a_invsrcadr"),
            (smpp::ESME_RINVDSTADR, Terminal, "smpp_0x0b_invdstadr"),
            (smpp::ESME_RINVMSGLEN, Terminal, "smpp_0x01_invmsglen"),
            (smpp::ESME_RINVEXPIRY, Terminal, "smpp_0x62_invexpiry"),
            (smpp::ESME_RINVSCHED, Terminal, "smpp_0x61_invsched"),
            (
                smpp::ESME_RINVPASWD,
                RefreshCredentials,
                "smpp_0x0e_invpaswd",
            ),
            (smpp::ESME_RSUBMITFAIL, Unknown, "smpp_0x45_submitfail"),
            (0x400, Unknown, "smpp_0x400_unrecognised"),
            (u32::MAX, Unknown, "smpp_0xffffffff_unrecognised"),
        ];
        for (code, class, reason) in cases {
            let v = smpp_with(&c, code);
            assert_eq!((v.class, v.reason.as_str()), (class, reason), "0x{code:x}");
        }
        let c = c.with_smpp(smpp::ESME_RSUBMITFAIL, Retry);
        let v = smpp_with(&c, 0x45);
        assert_eq!(
            (v.class, v.reason.as_str()),
            (Retry, "smpp_0x45_submitfail_override")
        );
    }

    #[test]
    fn transport_failures() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let c = Classifier::default();
        let mut t = |f| c.classify(&Observation::Transport(f), now(), &mut rng);
        let v = t(TransportFailure::Connect);
        assert_eq!((v.class, v.reason.as_str()), (Retry, "connect_error"));
        let v = t(TransportFailure::AfterSend { replay_safe: true });
        assert_eq!(
            (v.class, v.reason.as_str()),
            (Retry, "timeout_after_send_replay_safe")
        );
        let v = t(TransportFailure::AfterSend { replay_safe: false });
        assert_eq!(
            (v.class, v.reason.as_str()),
            (Terminal, "timeout_after_send_not_replay_safe")
        );
    }

    type De = serde::de::value::Error;

    fn overrides(
        http: &[(&'static str, &'static str)],
        smpp: &[(&'static str, &'static str)],
    ) -> Result<ClassifyOverrides, De> {
        let mut outer: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
        outer.insert("http", http.iter().copied().collect());
        outer.insert("smpp", smpp.iter().copied().collect());
        ClassifyOverrides::deserialize(IntoDeserializer::<De>::into_deserializer(outer))
    }

    #[test]
    fn overrides_deserialise_from_string_keys() {
        let o = overrides(
            &[("409", "retry"), ("403", "throttle")],
            &[("0x45", "retry"), ("88", "terminal")],
        )
        .unwrap();
        assert_eq!(o.http.get(&409), Some(&Retry));
        assert_eq!(o.http.get(&403), Some(&Throttle));
        assert_eq!(o.smpp.get(&0x45), Some(&Retry));
        assert_eq!(o.smpp.get(&88), Some(&Terminal));
        let c = Classifier::default().with_overrides(o);
        assert_eq!(http_with(&c, 409, &HeaderMap::new()).class, Retry);
        assert_eq!(smpp_with(&c, 0x58).class, Terminal);

        assert!(overrides(&[("abc", "retry")], &[]).is_err());
        assert!(overrides(&[("70000", "retry")], &[]).is_err());
        assert!(overrides(&[("42", "retry")], &[]).is_err());
        assert!(overrides(&[("409", "maybe")], &[]).is_err());
        assert!(overrides(&[], &[("0xZZ", "retry")]).is_err());
    }
}
