//! [`ProviderConfig`]: keys, limits, abuse protection and the behaviour schedule, from
//! flags or TOML.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use abide_gate::Algorithm;
use serde::Deserialize;

mod behaviour;
mod schedule;

pub use crate::smpp::config::{ReceiptPolicy, SmppAccount, SmppConfig};
use crate::Error;
pub use behaviour::{Behaviour, ReceiptState, RetryAfterStyle, Spread, ThrottleStyle};
pub use schedule::ScheduleEntry;

/// Everything a fake provider needs, deserialisable from TOML.
///
/// # Default
/// One key `demo-key` (account `demo`); per key 10/s with burst 10 and 4 concurrent
/// requests; per account 50/s with burst 50; rates counted by GCRA; leases 30 s; no abuse protection; no latency;
/// behaviour [`Behaviour::default`]; empty schedule; gates in memory (Redis prefix
/// `abide:provider`).
///
/// # Examples
/// ```
/// let cfg = abide_fake::ProviderConfig::from_toml_str(r#"
///     [limits]
///     key_rate = "5/s"
///     [[schedule]]
///     at_secs = 60
///     retry_after = "imf-fixdate"
/// "#)?;
/// assert_eq!(cfg.schedule.len(), 1);
/// # Ok::<(), abide_fake::Error>(())
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Accepted API keys (`Authorization: Bearer <key>`).
    pub api_keys: Vec<ApiKey>,
    /// Rate and concurrency limits.
    pub limits: Limits,
    /// Abuse protection (key suspension).
    pub abuse: Abuse,
    /// Time each accepted message takes before the answer is sent, in milliseconds
    /// (holds a concurrency slot meanwhile).
    pub latency_ms: u64,
    /// Behaviour from the start.
    pub behaviour: Behaviour,
    /// Behaviour changes, applied in order once their trigger is reached.
    pub schedule: Vec<ScheduleEntry>,
    /// Rate-limit header style (TOML `headers = "x-ratelimit"`). `None`: IETF fields on
    /// accepted answers and on honest (`retry-after = "seconds"`) throttles only. A style:
    /// the fields in that style on every accepted answer and every 429, whatever the
    /// `Retry-After` form (which then governs `Retry-After` alone).
    pub headers: Option<HeaderStyle>,
    /// Keep the gates in Redis at this URL (`redis://127.0.0.1:6379`), so every provider
    /// instance with the same URL and [`ProviderConfig::redis_prefix`] enforces one set of
    /// limits. `None`: in memory. `Debug` hides a password in the URL.
    pub redis_url: Option<RedisUrl>,
    /// Prefix of the provider's keys in Redis.
    pub redis_prefix: String,
    /// The SMPP listener (`abide provider --smpp ADDR`): accounts, receipts, bounds.
    pub smpp: SmppConfig,
}

/// A Redis URL whose `Debug` leaves out the user information (it may hold a password).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct RedisUrl(pub String);

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.split_once("://") {
            Some((scheme, rest)) => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                write!(f, "{scheme}://{host}")
            }
            None => f.write_str("<redis url>"),
        }
    }
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            api_keys: vec![ApiKey {
                key: DEMO_KEY.to_owned(),
                account: Some("demo".to_owned()),
            }],
            limits: Limits::default(),
            abuse: Abuse::default(),
            latency_ms: 0,
            behaviour: Behaviour::default(),
            schedule: Vec::new(),
            headers: None,
            redis_url: None,
            redis_prefix: "abide:provider".to_owned(),
            smpp: SmppConfig::default(),
        }
    }
}

/// The API key accepted when none is configured.
pub const DEMO_KEY: &str = "demo-key";

/// Longest suspension abuse protection may impose, in seconds (30 days; real ones last an
/// hour or a day).
pub const MAX_SUSPEND_SECS: u64 = 30 * 86_400;

impl ProviderConfig {
    /// The checks serde cannot express (TOML bypasses the command-line parsers).
    pub(crate) fn check_values(&self) -> Result<(), Error> {
        let bad = |what: String| Err(Error::Config(what));
        let fraction_ok = |f: f64| (0.0..=1.0).contains(&f);
        if !fraction_ok(self.behaviour.congestion) {
            return bad(format!(
                "behaviour.congestion = {}: must be a fraction within 0..=1",
                self.behaviour.congestion
            ));
        }
        let l = &self.limits;
        if l.gate_mode == GateMode::Delay {
            if l.algorithm != Algorithm::Gcra {
                return bad(format!(
                    "limits.gate_mode = \"delay\" needs limits.algorithm = \"gcra\", not {:?}",
                    l.algorithm.as_str()
                ));
            }
            if l.delay_burst == 0 {
                return bad(
                    "limits.delay_burst = 0: at least 1 request must be able to wait".into(),
                );
            }
            if !(1..=60_000).contains(&l.max_delay_ms) {
                return bad(format!(
                    "limits.max_delay_ms = {}: must lie within 1..=60000",
                    l.max_delay_ms
                ));
            }
        }
        if self.behaviour.slow_ms > MAX_SLOW_MS {
            return bad(format!(
                "behaviour.slow_ms = {}: at most {MAX_SLOW_MS}",
                self.behaviour.slow_ms
            ));
        }
        if !fraction_ok(self.behaviour.fail_503) {
            return bad(format!(
                "behaviour.fail_503 = {}: must be a fraction within 0..=1",
                self.behaviour.fail_503
            ));
        }
        if !fraction_ok(self.behaviour.throttle_fraction) {
            return bad(format!(
                "behaviour.throttle_fraction = {}: must be a fraction within 0..=1",
                self.behaviour.throttle_fraction
            ));
        }
        for (i, e) in self.schedule.iter().enumerate() {
            if let Some(f) = e.throttle_fraction.filter(|f| !fraction_ok(*f)) {
                return bad(format!(
                    "schedule[{i}].throttle_fraction = {f}: must be a fraction within 0..=1"
                ));
            }
            if let Some(f) = e.fail_503.filter(|f| !fraction_ok(*f)) {
                return bad(format!(
                    "schedule[{i}].fail_503 = {f}: must be a fraction within 0..=1"
                ));
            }
            if let Some(f) = e.congestion.filter(|f| !fraction_ok(*f)) {
                return bad(format!(
                    "schedule[{i}].congestion = {f}: must be a fraction within 0..=1"
                ));
            }
            if let Some(ms) = e.slow_ms.filter(|ms| *ms > MAX_SLOW_MS) {
                return bad(format!(
                    "schedule[{i}].slow_ms = {ms}: at most {MAX_SLOW_MS}"
                ));
            }
            if e.drop_connections == Some(true) && e.at_secs.is_none() && e.at_request.is_none() {
                return bad(format!(
                    "schedule[{i}].drop_connections needs at_secs or at_request (when to drop)"
                ));
            }
            if let Some(t) = e.at_secs.filter(|t| !(t.is_finite() && *t >= 0.0)) {
                return bad(format!(
                    "schedule[{i}].at_secs = {t}: must be a number of seconds, at least 0"
                ));
            }
        }
        let a = &self.abuse;
        if a.threshold > 0 {
            if a.window_secs == 0 {
                return bad(
                    "abuse.window_secs must be at least 1 when abuse.threshold is set".into(),
                );
            }
            if !(1..=MAX_SUSPEND_SECS).contains(&a.suspend_secs) {
                return bad(format!(
                    "abuse.suspend_secs = {}: must lie within 1..={MAX_SUSPEND_SECS}",
                    a.suspend_secs
                ));
            }
        }
        self.smpp.check()
    }

    /// The behaviour `elapsed` after start at message request number `request`: the
    /// configured one with every reached schedule entry applied in order.
    pub(crate) fn behaviour_at(&self, elapsed: Duration, request: u64) -> Behaviour {
        let mut b = self.behaviour.clone();
        for e in self.schedule.iter().filter(|e| e.reached(elapsed, request)) {
            e.apply(&mut b);
        }
        b
    }
}

/// Longest `slow` delay of an SMPP response, in milliseconds (a minute).
pub const MAX_SLOW_MS: u64 = 60_000;

impl ProviderConfig {
    /// Parse TOML.
    ///
    /// # Errors
    /// [`Error::Config`] for invalid TOML, unknown fields or bad values.
    pub fn from_toml_str(s: &str) -> Result<Self, Error> {
        toml::from_str(s).map_err(|e| Error::Config(e.to_string()))
    }
}

/// An accepted API key and its account. `Debug` never shows the key.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ApiKey {
    /// The secret key.
    pub key: String,
    /// Its account (keys of one account share the account limits).
    #[serde(default)]
    pub account: Option<String>,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("key", &"<redacted>")
            .field("account", &self.account)
            .finish()
    }
}

impl FromStr for ApiKey {
    type Err = Error;

    /// `KEY` or `KEY:ACCOUNT`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let (key, account) = match s.split_once(':') {
            Some((k, a)) => (k, Some(a.to_owned())),
            None => (s, None),
        };
        if key.is_empty() {
            return Err(Error::Config("empty API key".into()));
        }
        Ok(Self {
            key: key.to_owned(),
            account,
        })
    }
}

/// Limits per key and per account. `None` switches a limit off.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Sustained rate per key, e.g. `"10/s"`, `"600/1m"`, `"1/1h"`.
    pub key_rate: Option<Rate>,
    /// Requests back to back from idle per key (default: the rate's count).
    pub key_burst: Option<u32>,
    /// Sustained rate shared by all keys of an account.
    pub account_rate: Option<Rate>,
    /// Burst of the account rate.
    pub account_burst: Option<u32>,
    /// Requests in flight per key.
    pub key_concurrency: Option<u32>,
    /// Requests in flight per account.
    pub account_concurrency: Option<u32>,
    /// A concurrency slot not released within this many seconds is freed.
    pub lease_secs: u64,
    /// How the key and account rates count: `gcra` (default), `fixed-window` or
    /// `sliding-window` (window algorithms take a whole quota in a burst and ignore the
    /// bursts above).
    pub algorithm: Algorithm,
    /// What the key and account rates do with a request over the rate (TOML
    /// `gate_mode = "delay"`): refuse it at once, or hold it until its slot.
    pub gate_mode: GateMode,
    /// In `delay` mode, requests over the rate that may wait at each rate gate.
    pub delay_burst: u32,
    /// In `delay` mode, the longest a request is held, in milliseconds (1 to 60000).
    pub max_delay_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            key_rate: Some(Rate {
                count: 10,
                per: Duration::from_secs(1),
            }),
            key_burst: None,
            account_rate: Some(Rate {
                count: 50,
                per: Duration::from_secs(1),
            }),
            account_burst: None,
            key_concurrency: Some(4),
            account_concurrency: None,
            lease_secs: 30,
            algorithm: Algorithm::Gcra,
            gate_mode: GateMode::Refuse,
            delay_burst: 50,
            max_delay_ms: 500,
        }
    }
}

/// `count` requests per `per`, written `COUNT/PERIOD` (`10/s`, `600/1m`, `1/1h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Rate {
    /// Requests per period.
    pub count: u32,
    /// The period.
    pub per: Duration,
}

impl FromStr for Rate {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || {
            Error::Config(format!(
                "rate {s:?}: expected COUNT/PERIOD like 10/s or 1/1h"
            ))
        };
        let (n, per) = s.split_once('/').ok_or_else(bad)?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        let per = per.trim();
        // A bad period is reported as the rate written, not as the `1{per}` tried for it.
        let per = if per.starts_with(|c: char| c.is_ascii_digit()) {
            parse_duration(per).map_err(|_| bad())?
        } else {
            parse_duration(&format!("1{per}")).map_err(|_| bad())?
        };
        if count == 0 || per.is_zero() {
            return Err(bad());
        }
        Ok(Self { count, per })
    }
}

impl TryFrom<String> for Rate {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

/// Abuse protection: a key with `threshold` limit rejections within `window_secs` is
/// suspended for `suspend_secs`. Suspended requests get `403 {"error":"suspended"}`, with
/// `Retry-After` (the remaining suspension) by default or without it, as many real abuse
/// systems answer, under [`SuspensionStyle::Bare403`].
///
/// # Default
/// Off (`threshold` 0), window 60 s, suspension 3600 s, style `retry-after`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Abuse {
    /// Rejections that trigger a suspension; 0 switches abuse protection off.
    pub threshold: u32,
    /// Window in which rejections are counted, in seconds.
    pub window_secs: u64,
    /// Suspension length in seconds (real suspensions seen: 3600 and 86400), at most
    /// [`MAX_SUSPEND_SECS`].
    pub suspend_secs: u64,
    /// How a suspended key's requests are answered (TOML `suspension = "bare-403"`).
    pub suspension: SuspensionStyle,
}

impl Default for Abuse {
    fn default() -> Self {
        Self {
            threshold: 0,
            window_secs: 60,
            suspend_secs: 3600,
            suspension: SuspensionStyle::RetryAfter,
        }
    }
}

abide_core::named_enum! {
/// The dialect of the rate-limit fields (see the `styles` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum HeaderStyle("header style") {
    /// `RateLimit-Policy` and `RateLimit` structured fields (current IETF draft).
    Ietf = "ietf",
    /// `RateLimit-Policy: 10;w=1`, `RateLimit-Limit`, `-Remaining`, `-Reset` (draft -06).
    Draft6 = "draft-6",
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset` in Unix epoch seconds.
    XRateLimit = "x-ratelimit",
}}

abide_core::named_enum! {
/// What a rate gate does with a request over its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum GateMode("gate mode") {
    /// 429 at once, with the gate's own reset as `Retry-After` (rounded up).
    Refuse = "refuse",
    /// Hold the request until its slot (nginx's `limit_req burst delay`), while at most
    /// `delay_burst` wait per gate and none longer than `max_delay_ms`; beyond, refuse.
    /// Needs the `gcra` algorithm.
    Delay = "delay",
}}

abide_core::named_enum! {
/// How a request from a suspended key is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum SuspensionStyle("suspension style") {
    /// 403 `{"error":"suspended"}` with `Retry-After`: the remaining suspension in
    /// delay-seconds, rounded up, at least 1 (RFC 9110 §10.2.3). The honest default: a
    /// client that honours it waits instead of giving up.
    RetryAfter = "retry-after",
    /// 403 `{"error":"suspended"}` without `Retry-After`, as many real abuse systems
    /// answer: the key is blocked, and a client cannot tell for how long.
    Bare403 = "bare-403",
}}

/// Parse a duration in `humantime`'s syntax (`250ms`, `60s`, `1.5s`, `2m`, `1h30m`, `1d`),
/// or a bare number of seconds (`30`, `1.5`).
///
/// # Errors
/// [`Error::Config`] naming the input and what `humantime` could not read.
pub fn parse_duration(s: &str) -> Result<Duration, Error> {
    let s = s.trim();
    let bad = |why: &dyn fmt::Display| {
        Error::Config(format!(
            "duration {s:?}: {why} (expected e.g. 500ms, 60s, 2m, 1h, 1d)"
        ))
    };
    if s.starts_with('-') {
        return Err(bad(&"a duration cannot be negative"));
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let n: f64 = s.parse().map_err(|e| bad(&e))?;
        return Duration::try_from_secs_f64(n).map_err(|e| bad(&e));
    }
    humantime::parse_duration(s).map_err(|e| bad(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_duration_says_so() {
        let e = parse_duration("-1s").unwrap_err().to_string();
        assert!(
            e.contains("cannot be negative") && e.contains("500ms"),
            "{e}"
        );
    }

    #[test]
    fn rates_and_durations() {
        assert_eq!("10/s".parse::<Rate>().unwrap().per, Duration::from_secs(1));
        assert_eq!(
            "1/1h".parse::<Rate>().unwrap().per,
            Duration::from_secs(3600)
        );
        assert_eq!("600/m".parse::<Rate>().unwrap().count, 600);
        assert!("0/s".parse::<Rate>().is_err());
        // A bad period names the rate as written, not the `1x` tried for `x`.
        let e = "10/x".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("rate \"10/x\"") && !e.contains("1x"), "{e}");
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        // Everything accepted before humantime read them, and its compound forms.
        for (s, want) in [
            ("30", 30_000),
            ("1.5", 1_500),
            ("1.5s", 1_500),
            ("0.5m", 30_000),
            ("2m", 120_000),
            ("1h", 3_600_000),
            ("1d", 86_400_000),
            ("1h30m", 5_400_000),
            (" 0s ", 0),
        ] {
            assert_eq!(
                parse_duration(s).unwrap(),
                Duration::from_millis(want),
                "{s}"
            );
        }
        for s in ["", "-1s", "soon", "1.2.3", "5x"] {
            let e = parse_duration(s).unwrap_err().to_string();
            assert!(e.contains(&format!("{:?}", s.trim())), "{e}");
        }
    }

    #[test]
    fn toml_config_and_redacted_debug() {
        let c = ProviderConfig::from_toml_str(
            r#"
            latency_ms = 5
            [[api_keys]]
            key = "sk_secret"
            account = "acme"
            [abuse]
            threshold = 3
            [[schedule]]
            at_request = 3
            throttle = "smpp-200"
            "#,
        )
        .unwrap();
        assert_eq!(c.abuse.threshold, 3);
        assert_eq!(c.schedule[0].throttle, Some(ThrottleStyle::Smpp200));
        assert!(!format!("{c:?}").contains("sk_secret"));
        let url = RedisUrl("redis://user:hunter2@127.0.0.1:6379/0".into());
        assert_eq!(format!("{url:?}"), "redis://127.0.0.1:6379/0");
        assert!(ProviderConfig::from_toml_str("nonsense = 1").is_err());
    }

    #[test]
    fn delay_mode_is_checked_where_it_is_set() {
        let c = ProviderConfig::from_toml_str("[limits]\ngate_mode = \"delay\"\n").unwrap();
        assert_eq!(c.limits.gate_mode, GateMode::Delay);
        c.check_values().unwrap();
        for (toml, names) in [
            ("algorithm = \"fixed-window\"", "limits.algorithm"),
            ("delay_burst = 0", "limits.delay_burst"),
            ("max_delay_ms = 60001", "limits.max_delay_ms"),
        ] {
            let text = format!("[limits]\ngate_mode = \"delay\"\n{toml}\n");
            let e = ProviderConfig::from_toml_str(&text).unwrap().check_values();
            assert!(e.unwrap_err().to_string().contains(names), "{toml}");
        }
        let e = ProviderConfig::from_toml_str("[limits]\ngate_mode = \"wait\"\n").unwrap_err();
        assert!(e.to_string().contains("refuse"), "{e}");
    }

    #[test]
    fn toml_chooses_the_rate_algorithm() {
        assert_eq!(ProviderConfig::default().limits.algorithm, Algorithm::Gcra);
        for a in Algorithm::ALL {
            let toml = format!("[limits]\nalgorithm = \"{a}\"\n");
            let c = ProviderConfig::from_toml_str(&toml).unwrap();
            assert_eq!(c.limits.algorithm, a);
        }
        let e = ProviderConfig::from_toml_str("[limits]\nalgorithm = \"leaky\"\n").unwrap_err();
        assert!(e.to_string().contains("leaky"), "{e}");
    }
}
