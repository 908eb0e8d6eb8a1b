//! Providers from a TOML file.
//!
//! ```toml
//! [[provider]]
//! name = "sms-primary"
//! base_url = "https://api.example.com"
//! credentials_env = "SMS_PRIMARY_TOKEN"   # the variable's NAME; its value is never stored
//! rate_hint = 50.0                        # requests per second to start at (optional)
//! max_rate = 80.0                         # hard cap, whatever is advertised (optional)
//! concurrency = 16                        # concurrent senders
//! idempotency_key_header = "Idempotency-Key"
//! timeout_secs = 10
//! rate_limit_dialect = "auto"             # or ietf, x-ratelimit, azure, shopify, discord, github
//!
//! [provider.retry]
//! max_attempts = 12          # per attempt window, then DEFERRED
//! unknown_max_attempts = 3   # cap for responses we do not recognise
//! max_age_secs = 86400       # per attempt window, then DEFERRED
//! backoff_base_ms = 500
//! backoff_cap_secs = 300
//!
//! [provider.pacer]
//! headroom = 0.97            # fraction of an advertised limit to aim at
//! use_rate_limit_headers = true
//! throttle_pause_ms = 1000   # pause after a throttle without Retry-After (doubles)
//! max_throttle_pause_secs = 600
//!
//! [provider.classify.http]
//! 409 = "retry"
//!
//! # Rules on the body or a header, tried first (abide_core::classify::rules):
//! [[provider.classify.body]]
//! json = "/errors/0/extensions/code"   # RFC 6901 JSON pointer
//! equals = "THROTTLED"
//! verdict = "throttle"                 # or retry, terminal, out_of_quota, ...
//! delay_json = "/retry_after"          # seconds, or a Go-style duration (6m0s)
//!
//! [[provider.classify.header]]
//! header = "x-error-kind"
//! equals = "quota-spent"
//! verdict = "out_of_quota"             # DEFERRED for a person, never retried on a timer
//!
//! [provider.failover]
//! to = "sms-backup"
//! after_pending_secs = 120
//!
//! [[provider]]
//! name = "sms-backup"
//! base_url = "https://backup.example.net/api"
//! ```
//!
//! Every field but `name` and `base_url` is optional; see [`ProviderConfig`] for the
//! defaults. Validation errors name the provider and the field ([`Error::Config`]), or
//! the line and column of text that is not TOML of this shape ([`Error::Toml`]).
//!
//! `transport` says how the provider is reached, `http` when absent; each transport has
//! keys of its own ([`crate::transport::HttpConfig`]; over SMPP 3.4, `transport = "smpp"`,
//! `SmppConfig`, feature `smpp`; [`crate::transport::ScriptedConfig`]). A key of another
//! transport is refused by name, as is a shared key the transport has no use for (an
//! SMPP provider's `rate_limit_dialect`, `pacer.use_rate_limit_headers`, `classify.http`,
//! `classify.body`, `classify.header`).

use std::collections::HashSet;
use std::path::Path;

use crate::echo;
use crate::error::{Error, Result};
use crate::model::NewItem;
use crate::toml_keys::TableError;

mod failover;
mod file;
mod provider;
#[cfg(test)]
mod range_tests;
mod session;

pub use crate::credentials::Secret;
/// Attempt caps and backoff (`[provider.retry]`): abide-core's rules, re-exported.
pub use abide_core::RetryConfig;
pub use provider::{FailoverConfig, PacerSettings, ProviderConfig};

use file::{invalid, toml_error, validate_provider, FileConfig};

/// All configured providers.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Providers, in file order.
    pub providers: Vec<ProviderConfig>,
    /// `[coordination]`: the Redis through which several nodes share each provider's limit
    /// (`redis_url`; none = this node alone, in memory), the nodes assumed before it
    /// answers (`expected_nodes`) and the prefix of this deployment's keys (`key_prefix`).
    #[cfg(feature = "redis")]
    pub coordination: abide_redis::CoordinationConfig,
}

/// Largest providers file read, in bytes (1 MiB): a thousand providers fit in a tenth
/// of it; a larger "file" is a mistake (a device, a log), and reading it whole would grow
/// without bound.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The text of the file at `path`, at most `limit` bytes of UTF-8 (the bytes past it are
/// never read).
///
/// # Errors
/// As [`std::fs::File::open`] and [`std::io::Read::read_to_string`]; `InvalidData` when
/// the file holds more than `limit` bytes, saying the limit.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes, the most a configuration file may hold"),
        ));
    }
    Ok(text)
}

impl Config {
    /// `workers` concurrent senders for every provider whose senders the operator chooses
    /// (HTTP's `concurrency`; see [`TransportSettings::set_senders`]): `abide send
    /// --workers`. An SMPP provider keeps its window, which the SMSC bounds.
    ///
    /// [`TransportSettings::set_senders`]: crate::transport::TransportSettings::set_senders
    pub fn set_workers(&mut self, workers: usize) {
        for p in &mut self.providers {
            p.transport.settings_mut().set_senders(workers);
        }
    }

    /// Read and validate a TOML file.
    ///
    /// # Errors
    /// [`Error::ReadConfig`] when the file cannot be read or holds more than
    /// [`MAX_FILE_BYTES`] (`/dev/zero` is refused after reading that much), otherwise as
    /// [`Config::from_toml_str`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = read_bounded(path, MAX_FILE_BYTES).map_err(|source| Error::ReadConfig {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text)
    }

    /// Parse and validate TOML text.
    ///
    /// # Errors
    /// [`Error::Toml`] with the line and column of text that is not TOML of this shape;
    /// [`Error::Config`] naming the provider (`None` for a file-level setting) and the
    /// setting.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let file: FileConfig =
            toml::from_str(text).map_err(|e| toml_error(text, e.span(), e.message()))?;
        if file.provider.is_empty() {
            return Err(invalid("provider", "no [[provider]] configured"));
        }
        let mut names = HashSet::new();
        let mut providers = Vec::with_capacity(file.provider.len());
        for p in file.provider {
            let cfg = validate_provider(p).map_err(|e| match e {
                TableError::Invalid(e) => e,
                TableError::At { span, message } => toml_error(text, Some(span), &message),
            })?;
            // Names that differ only by case would be one name to a reader, a metrics
            // label or a case-insensitive database collation.
            if !names.insert(cfg.name.to_ascii_lowercase()) {
                let why = "configured twice (names are compared ignoring case)";
                return Err(Error::config(&cfg.name, "name", why));
            }
            providers.push(cfg);
        }
        failover::check(&providers)?;
        #[cfg(feature = "redis")]
        let coordination = match file.coordination {
            None => abide_redis::CoordinationConfig::default(),
            Some(c) => {
                abide_redis::CoordinationConfig::new(c.redis_url, c.expected_nodes, c.key_prefix)
                    .map_err(|e| invalid(&format!("coordination.{}", e.setting), e.problem))?
            }
        };
        #[cfg(not(feature = "redis"))]
        if file.coordination.is_some() {
            return Err(invalid(
                "coordination",
                "this build has no Redis coordination (abide-outbox's cargo feature `redis`)",
            ));
        }
        Ok(Self {
            providers,
            #[cfg(feature = "redis")]
            coordination,
        })
    }

    /// The provider called `name`.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Check that `item` is well formed, targets a configured provider, and is one that
    /// provider's transport can send
    /// ([`crate::transport::TransportSettings::check_item`]: an HTTP item's path stays
    /// below the base path and carries neither the provider's idempotency-key header nor
    /// its auth header; an SMPP item is an SMS it can send).
    ///
    /// # Errors
    /// [`Error::UnknownProvider`], [`Error::InvalidRequest`], [`Error::Path`].
    pub fn check_item(&self, item: &NewItem) -> Result<()> {
        let Some(p) = self.provider(&item.provider) else {
            return Err(Error::UnknownProvider(echo::truncate(
                &item.provider,
                echo::MAX_ECHO_BYTES,
            )));
        };
        p.transport.settings().check_item(&p.name, item)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::transport::TransportConfig;

    #[test]
    fn workers_replace_the_senders_the_operator_chooses_only() {
        let mut c = Config::from_toml_str(
            r#"
[[provider]]
name = "web"
base_url = "http://127.0.0.1:9/"
concurrency = 3

[[provider]]
name = "fixed"
transport = "scripted"
concurrency = 2
"#,
        )
        .unwrap();
        c.set_workers(7);
        assert_eq!(c.providers[0].concurrency(), 7);
        // The scripted transport keeps its own (as an SMPP window does).
        assert_eq!(c.providers[1].concurrency(), 2);
    }
    use abide_core::{Dialect, VerdictClass};

    const GOOD: &str = r#"
        [[provider]]
        name = "a"
        base_url = "http://127.0.0.1:9000/api"
        credentials_env = "ABIDE_TEST_TOKEN_A"
        rate_hint = 50.0
        concurrency = 20
        [provider.retry]
        max_attempts = 5
        backoff_base_ms = 100
        backoff_cap_secs = 10
        [provider.classify.http]
        409 = "retry"
        [provider.failover]
        to = "b"
        after_pending_secs = 120

        [[provider]]
        name = "b"
        base_url = "https://backup.example"
    "#;

    #[test]
    fn parses_with_defaults() {
        let c = Config::from_toml_str(GOOD).unwrap();
        let a = c.provider("a").unwrap();
        assert_eq!(a.concurrency(), 20);
        assert_eq!(a.retry.max_attempts, 5);
        assert_eq!(a.retry.backoff.cap, Duration::from_secs(10));
        assert_eq!(a.classify.http.get(&409), Some(&VerdictClass::Retry));
        assert_eq!(
            a.failover,
            Some(FailoverConfig {
                to: "b".into(),
                after_pending: Duration::from_secs(120)
            })
        );
        let b = c.provider("b").unwrap();
        let TransportConfig::Http(h) = &b.transport else {
            panic!("{b:?}")
        };
        assert_eq!(h.idempotency_key_header.as_str(), "idempotency-key");
        assert_eq!(b.concurrency(), 4);
        assert_eq!(a.pacer.rate_hint, Some(50.0));
        assert_eq!(b.retry, RetryConfig::default());
        assert_eq!(b.pacer, PacerSettings::default());
        assert_eq!(b.rate_limit_dialect, Dialect::Auto);
    }

    #[cfg(feature = "redis")]
    #[test]
    fn the_redis_key_prefix_defaults_to_abide_and_is_checked() {
        let with = |coord: &str| {
            Config::from_toml_str(&format!(
                "[[provider]]\nname = \"a\"\nbase_url = \"https://api.example\"\n\
                 [coordination]\n{coord}\n"
            ))
        };
        let c = Config::from_toml_str(GOOD).unwrap();
        assert_eq!(c.coordination.key_prefix, abide_redis::DEFAULT_KEY_PREFIX);
        assert_eq!(with("").unwrap().coordination.key_prefix, "abide");
        let c = with("key_prefix = \"billing-prod:eu.1\"").unwrap();
        assert_eq!(c.coordination.key_prefix, "billing-prod:eu.1");
        for bad in [
            "\"\"",
            "\"a b\"",
            "\"tenant*\"",
            &format!("\"{}\"", "x".repeat(65)),
        ] {
            let e = with(&format!("key_prefix = {bad}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("coordination.key_prefix"), "{bad}: {e}");
        }
        for (bad, field) in [
            ("expected_nodes = 0", "coordination.expected_nodes"),
            ("redis_url = \"http://u:PASS@h\"", "coordination.redis_url"),
        ] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.contains(field) && !e.contains("PASS"), "{bad}: {e}");
        }
    }

    #[cfg(not(feature = "redis"))]
    #[test]
    fn a_coordination_section_needs_the_redis_feature() {
        let e = Config::from_toml_str(&format!("{GOOD}\n[coordination]\nkey_prefix = \"a\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("feature `redis`"), "{e}");
    }

    #[test]
    fn rate_limit_dialect_is_read_and_checked() {
        let with = |v: &str| {
            Config::from_toml_str(&format!(
                "[[provider]]\nname = \"gh\"\nbase_url = \"https://api.example\"\n\
                 rate_limit_dialect = \"{v}\"\n"
            ))
        };
        let c = with("github").unwrap();
        let p = c.provider("gh").unwrap();
        assert_eq!(p.rate_limit_dialect, Dialect::Github);
        assert_eq!(p.classifier().dialect, Dialect::Github);
        assert_eq!(p.session_config().rate_limit_dialect, Dialect::Github);
        assert_eq!(
            with("X-RateLimit")
                .unwrap()
                .provider("gh")
                .unwrap()
                .rate_limit_dialect,
            Dialect::XRateLimit
        );
        let err = with("twitter").unwrap_err().to_string();
        assert!(
            err.contains("gh") && err.contains("rate_limit_dialect"),
            "{err}"
        );
        assert!(err.contains("twitter") && err.contains("shopify"), "{err}");
    }

    #[test]
    fn pacer_settings_parse_and_are_checked() {
        let text = GOOD.replace(
            "[provider.retry]",
            "[provider.pacer]\nheadroom = 0.95\nuse_rate_limit_headers = false\n\
             throttle_pause_ms = 500\nmax_throttle_pause_secs = 60\n[provider.retry]",
        );
        let c = Config::from_toml_str(&text).unwrap();
        let p = c.provider("a").unwrap().pacer;
        assert_eq!(
            p,
            PacerSettings {
                rate_hint: Some(50.0),
                max_rate: None,
                headroom: 0.95,
                use_rate_limit_headers: false,
                throttle_pause: Duration::from_millis(500),
                max_throttle_pause: Duration::from_secs(60),
            }
        );
        for (bad, field) in [
            ("headroom = 0.0", "pacer.headroom"),
            ("headroom = 1.5", "pacer.headroom"),
            ("throttle_pause_ms = 10", "pacer.throttle_pause_ms"),
            (
                "max_throttle_pause_secs = 601",
                "pacer.max_throttle_pause_secs",
            ),
        ] {
            let text = GOOD.replace(
                "[provider.retry]",
                &format!("[provider.pacer]\n{bad}\n[provider.retry]"),
            );
            assert_eq!(err_of(&text), ("a".to_owned(), field.to_owned()), "{bad}");
        }
    }

    /// The provider and setting an error names: `<file>` for a file-level setting,
    /// `toml` with the line for text that is not TOML of this shape.
    fn err_of(text: &str) -> (String, String) {
        match Config::from_toml_str(text) {
            Err(Error::Config {
                provider, field, ..
            }) => (provider.unwrap_or_else(|| "<file>".into()), field),
            Err(Error::Toml { line, .. }) => (format!("line {line:?}"), "toml".into()),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn max_rate_is_a_hard_cap_on_the_pacer() {
        let text = GOOD.replace("rate_hint = 50.0", "rate_hint = 5.0\nmax_rate = 8.0");
        let c = Config::from_toml_str(&text).unwrap();
        let p = c.provider("a").unwrap();
        assert_eq!(p.pacer.max_rate, Some(8.0));
        let s = p.session_config();
        assert_eq!((s.pacer.initial_rate, s.pacer.max_rate), (5.0, 8.0));
        // Without a hint the cold start is capped too.
        let text = GOOD.replace("rate_hint = 50.0", "max_rate = 2.0");
        let c = Config::from_toml_str(&text).unwrap();
        let s = c.provider("a").unwrap().session_config();
        assert_eq!((s.pacer.initial_rate, s.pacer.max_rate), (2.0, 2.0));
    }

    #[test]
    fn errors_name_provider_and_field() {
        let cases = [
            (
                GOOD.replace("to = \"b\"", "to = \"zz\""),
                "a",
                "failover.to",
            ),
            (GOOD.replace("to = \"b\"", "to = \"a\""), "a", "failover.to"),
            (
                GOOD.replace("concurrency = 20", "concurrency = 0"),
                "a",
                "concurrency",
            ),
            (
                GOOD.replace("rate_hint = 50.0", "rate_hint = -1.0"),
                "a",
                "rate_hint",
            ),
            (
                GOOD.replace("rate_hint = 50.0", "rate_hint = 50.0\nmax_rate = 20.0"),
                "a",
                "rate_hint",
            ),
            (
                GOOD.replace("rate_hint = 50.0", "max_rate = 0.0"),
                "a",
                "max_rate",
            ),
            (
                GOOD.replace("https://backup.example", "ftp://backup.example"),
                "b",
                "base_url",
            ),
            (
                GOOD.replace("https://backup.example", "https://u:p@backup.example"),
                "b",
                "base_url",
            ),
            (
                // Core's validator blames the cap, bounded below by the base.
                GOOD.replace("backoff_base_ms = 100", "backoff_base_ms = 60000"),
                "a",
                "retry.backoff_cap_secs",
            ),
            (
                GOOD.replace("backoff_base_ms = 100", "backoff_base_ms = 0"),
                "a",
                "retry.backoff_base_ms",
            ),
            (
                GOOD.replace("409 = \"retry\"", "202 = \"retry\""),
                "a",
                "classify.http.202",
            ),
            (GOOD.replace("name = \"b\"", "name = \"a\""), "a", "name"),
            (
                GOOD.replace("rate_hint", "rate_hnit"),
                "line Some(6)",
                "toml",
            ),
            (
                GOOD.replace("concurrency = 20", "concurrency = \"20\""),
                "line Some(7)",
                "toml",
            ),
            (
                // Negative: outside the range, named like any other value outside it.
                GOOD.replace("max_attempts = 5", "max_attempts = -5"),
                "a",
                "retry.max_attempts",
            ),
        ];
        for (text, provider, field) in cases {
            assert_eq!(
                err_of(&text),
                (provider.to_owned(), field.to_owned()),
                "{text}"
            );
        }
    }

    #[test]
    fn a_toml_error_names_the_key_of_its_line_never_the_value() {
        let huge = format!("1{}", "0".repeat(308));
        let text = GOOD.replace("rate_hint = 50.0", &format!("rate_hint = {huge}"));
        let e = Config::from_toml_str(&text).unwrap_err().to_string();
        assert!(e.contains("line 6") && e.contains("rate_hint: "), "{e}");
        assert!(!e.contains(&huge), "{e}");
        // A message that names its key already is left as it is.
        let e = Config::from_toml_str(&GOOD.replace("rate_hint", "rate_hnit"))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("rate_hnit: "), "{e}");
        assert!(e.contains("rate_hnit"), "{e}");
        // A line whose key is no bare key (a quoted one may hold anything): nothing quoted.
        let text = GOOD.replace(
            "rate_hint = 50.0",
            &format!("\"https://u:s3cret@x\" = {huge}"),
        );
        let e = Config::from_toml_str(&text).unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
        // Text inside a multi-line string, before the bad value on its line, is no key.
        for bad in [
            format!("rate_hint = [ \"\"\"\nsk_live_s3cret=x\"\"\", {huge} ]"),
            format!("headers = {{ a = \"\"\"\ns3cret_token=1\"\"\", b = {huge} }}"),
        ] {
            let text = GOOD.replace("rate_hint = 50.0", &bad);
            let e = Config::from_toml_str(&text).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{e}");
        }
        // An inline table's key is named, not the table's.
        let text = GOOD.replace(
            "concurrency = 20",
            &format!("concurrency = 20\nbudget = {{ min_per_sec = {huge} }}"),
        );
        let e = Config::from_toml_str(&text).unwrap_err().to_string();
        assert!(e.contains("min_per_sec: "), "{e}");
        // A string where a number belongs: the kind is said, the text is not.
        let text = GOOD.replace("concurrency = 20", "concurrency = \"s3cretvalue\"");
        let e = Config::from_toml_str(&text).unwrap_err().to_string();
        assert!(
            e.contains("invalid type: string") && e.contains("expected"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_fail_over_cycle_is_refused_naming_it() {
        let provider = |name: &str, to: Option<&str>| {
            let failover = to.map_or(String::new(), |to| {
                format!("[provider.failover]\nto = \"{to}\"\nafter_pending_secs = 30\n")
            });
            format!("[[provider]]\nname = \"{name}\"\nbase_url = \"https://x.example\"\n{failover}")
        };
        let file = |links: &[(&str, Option<&str>)]| {
            let text: String = links.iter().map(|(n, to)| provider(n, *to)).collect();
            Config::from_toml_str(&text)
        };
        for (links, cycle) in [
            (vec![("a", Some("b")), ("b", Some("a"))], "a → b → a"),
            (
                vec![("a", Some("b")), ("b", Some("c")), ("c", Some("a"))],
                "a → b → c → a",
            ),
            // A tail into a cycle: reported from the cycle's first provider.
            (
                vec![("t", Some("a")), ("a", Some("b")), ("b", Some("a"))],
                "a → b → a",
            ),
        ] {
            let e = file(&links).unwrap_err();
            assert!(
                matches!(&e, Error::Config { field, .. } if field == "failover.to"),
                "{e:?}"
            );
            assert!(e.to_string().contains(cycle), "{cycle}: {e}");
        }
        // Chains and shared targets are fine.
        let ok = file(&[
            ("a", Some("b")),
            ("b", Some("c")),
            ("c", None),
            ("d", Some("c")),
        ]);
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn values_no_run_needs_are_refused_naming_the_field() {
        let cases = [
            (
                GOOD.replace(
                    "backoff_cap_secs = 10",
                    "backoff_cap_secs = 9223372036854775807",
                ),
                "a",
                "retry.backoff_cap_secs",
            ),
            (
                GOOD.replace(
                    "[provider.retry]",
                    "[provider.budget]\nretry_ratio = 1e9\n[provider.retry]",
                ),
                "a",
                "budget.retry_ratio",
            ),
            (
                GOOD.replace("409 = \"retry\"", "999 = \"retry\""),
                "a",
                "classify.http.999",
            ),
            (
                GOOD.replace("409 = \"retry\"", "200 = \"terminal\""),
                "a",
                "classify.http.200",
            ),
            // Below 100: the same rule and wording as 999 (it was a bare "out of range").
            (
                GOOD.replace("409 = \"retry\"", "42 = \"retry\""),
                "a",
                "classify.http.42",
            ),
            // auth_header set to the idempotency key's default header: the field the
            // user wrote is named, not the default they did not.
            (
                GOOD.replace(
                    "rate_hint = 50.0",
                    "rate_hint = 50.0\nauth_header = \"Idempotency-Key\"",
                ),
                "a",
                "auth_header",
            ),
            (
                GOOD.replace("name = \"b\"", "name = \"A\"")
                    .replace("to = \"b\"", "to = \"A\""),
                "A",
                "name",
            ),
        ];
        for (text, provider, field) in cases {
            assert_eq!(
                err_of(&text),
                (provider.to_owned(), field.to_owned()),
                "{text}"
            );
        }
    }

    #[test]
    fn items_target_only_configured_providers() {
        let c = Config::from_toml_str(GOOD).unwrap();
        let req = crate::Request::post_json("/m", serde_json::json!({}));
        assert!(c.check_item(&NewItem::new("a", req.clone())).is_ok());
        assert!(matches!(
            c.check_item(&NewItem::new("nope", req)),
            Err(Error::UnknownProvider(_))
        ));
    }

    #[test]
    fn items_may_not_set_the_providers_key_or_auth_header() {
        let text = GOOD.replace(
            "name = \"b\"",
            "name = \"b\"\n        idempotency_key_header = \"X-Request-Id\"\n        \
             auth_header = \"X-Partner\"",
        );
        let c = Config::from_toml_str(&text).unwrap();
        for name in ["x-request-id", "X-Partner"] {
            let mut req = crate::Request::post_json("/m", serde_json::json!({}));
            req.headers.insert(name.into(), "v".into());
            let err = c.check_item(&NewItem::new("b", req.clone())).unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
            // Provider a uses neither name for anything.
            assert!(c.check_item(&NewItem::new("a", req)).is_ok(), "{name}");
        }
    }

    #[test]
    fn a_password_in_base_url_is_never_echoed() {
        for url in [
            "http://user:PASS@127.0.0.1:99999",
            "http://user:PASS@127.0.0.1:9/api",
            "http://user:PA/SS@127.0.0.1:9/api",
            "http://user:PA#SS@[::1",
            "http://:PASS@",
            "https://api.example/x?token=PASS&y=1:99999999",
        ] {
            let text = GOOD.replace("https://backup.example", url);
            let err = Config::from_toml_str(&text).unwrap_err().to_string();
            assert!(err.contains("base_url"), "{err}");
            assert!(
                !err.contains("PASS") && !err.contains("SS@"),
                "{url}: {err}"
            );
        }
        // A syntax error on the line holding the URL: the line is not quoted.
        let text = GOOD.replace("\"https://backup.example\"", "\"http://u:PASS@h:99999\" x");
        let err = Config::from_toml_str(&text).unwrap_err().to_string();
        assert!(err.contains("at line 20") && !err.contains("PASS"), "{err}");
    }

    #[test]
    fn echoes_are_bounded() {
        let big = "x".repeat(2_000_000);
        for (from, to, field) in [
            ("name = \"b\"", format!("name = \"{big}\""), "name"),
            (
                "https://backup.example",
                format!("https://backup.example/{big}"),
                "base_url",
            ),
            (
                "https://backup.example",
                format!("https://{big}:99999999"),
                "base_url",
            ),
            (
                "name = \"b\"",
                format!("name = \"b\"\nauth_header = \"{big} \""),
                "auth_header",
            ),
            (
                "name = \"b\"",
                format!("name = \"b\"\nidempotency_key_header = \"{big} \""),
                "idempotency_key_header",
            ),
            ("to = \"b\"", format!("to = \"{big}\""), "failover.to"),
            ("rate_hint = 50.0", format!("{big} = 1"), "TOML"),
        ] {
            let err = Config::from_toml_str(&GOOD.replacen(from, &to, 1)).unwrap_err();
            let shown = err.to_string();
            assert!(shown.len() < 2_000, "{field}: {} bytes", shown.len());
            assert!(shown.contains(field), "{field}: {shown}");
        }
    }

    #[test]
    fn item_paths_stay_below_the_base_path() {
        let c = Config::from_toml_str(GOOD).unwrap();
        for path in ["/%2e%2e/v1/messages", "/.%2E/v1", "/..;/v1", "/%5c..%5cv1"] {
            let req = crate::Request::post_json(path, serde_json::json!({}));
            let err = c
                .check_item(&NewItem::new("a", req))
                .unwrap_err()
                .to_string();
            assert!(err.contains("refused by rule"), "{err}");
            assert!(err.contains("provider \"a\" sends below"), "{err}");
        }
    }

    #[test]
    fn reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        let line = "# comment\n";
        let filler = line.repeat(MAX_FILE_BYTES as usize / line.len() + 1);
        std::fs::write(&big, format!("{GOOD}{filler}")).unwrap();
        let e = Config::load(&big).unwrap_err().to_string();
        assert!(e.contains("big.toml") && e.contains("1048576 bytes"), "{e}");
        // A device that never ends: refused after the limit, not read for ever.
        #[cfg(unix)]
        {
            let e = Config::load("/dev/zero").unwrap_err().to_string();
            assert!(
                e.contains("/dev/zero") && e.contains("1048576 bytes"),
                "{e}"
            );
        }
        let fits = dir.path().join("fits.toml");
        std::fs::write(&fits, GOOD).unwrap();
        assert!(Config::load(&fits).is_ok());
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
        let c = Config::from_toml_str(GOOD).unwrap();
        let dbg = format!("{:?}", c);
        assert!(dbg.contains("ABIDE_TEST_TOKEN_A") && !dbg.contains("hunter2"));
    }
}
