//! The providers file as written (TOML), and its validation into [`super::ProviderConfig`].

use super::smpp::{address_url, not_for, FileSmpp};
use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    #[serde(default)]
    pub(super) provider: Vec<FileProvider>,
    pub(super) coordination: Option<FileCoordination>,
}

/// `[coordination]`: how several nodes share each provider's limit. Without the `redis`
/// feature it is read only to be refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(super) struct FileCoordination {
    pub(super) redis_url: Option<String>,
    pub(super) expected_nodes: Option<u32>,
    pub(super) key_prefix: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileProvider {
    name: String,
    transport: Option<String>,
    base_url: Option<String>,
    credentials_env: Option<String>,
    auth_header: Option<String>,
    rate_hint: Option<f64>,
    concurrency: Option<usize>,
    timeout_secs: Option<f64>,
    idempotency_key_header: Option<String>,
    #[serde(default)]
    retry: FileRetry,
    #[serde(default)]
    budget: FileBudget,
    #[serde(default)]
    pacer: FilePacer,
    #[serde(default)]
    classify: ClassifyOverrides,
    rate_limit_dialect: Option<String>,
    failover: Option<FileFailover>,
    // SMPP (transport = "smpp"); see `super::smpp`.
    address: Option<String>,
    system_id: Option<String>,
    password_env: Option<String>,
    system_type: Option<String>,
    window: Option<usize>,
    source_addr: Option<String>,
    source_addr_ton: Option<u8>,
    source_addr_npi: Option<u8>,
    dest_addr_ton: Option<u8>,
    dest_addr_npi: Option<u8>,
    enquire_link_interval: Option<f64>,
    pdu_timeout: Option<f64>,
    max_text_octets: Option<usize>,
}

impl FileProvider {
    /// The SMPP keys, split off.
    fn take_smpp(&mut self) -> FileSmpp {
        FileSmpp {
            address: self.address.take(),
            system_id: self.system_id.take(),
            password_env: self.password_env.take(),
            system_type: self.system_type.take(),
            window: self.window.take(),
            source_addr: self.source_addr.take(),
            source_addr_ton: self.source_addr_ton.take(),
            source_addr_npi: self.source_addr_npi.take(),
            dest_addr_ton: self.dest_addr_ton.take(),
            dest_addr_npi: self.dest_addr_npi.take(),
            enquire_link_interval: self.enquire_link_interval.take(),
            pdu_timeout: self.pdu_timeout.take(),
            max_text_octets: self.max_text_octets.take(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileRetry {
    max_attempts: Option<u32>,
    unknown_max_attempts: Option<u32>,
    max_age_secs: Option<u64>,
    backoff_base_ms: Option<u64>,
    backoff_cap_secs: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileBudget {
    ttl_secs: Option<u64>,
    min_per_sec: Option<u32>,
    retry_ratio: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePacer {
    headroom: Option<f64>,
    use_rate_limit_headers: Option<bool>,
    throttle_pause_ms: Option<u64>,
    max_throttle_pause_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileFailover {
    to: String,
    after_pending_secs: u64,
}

/// Highest accepted `rate_hint`, requests per second.
const MAX_RATE_HINT: f64 = 1_000_000.0;
/// Longest accepted `base_url`, in bytes.
const MAX_BASE_URL_LEN: usize = 2048;
/// Highest accepted `concurrency`.
const MAX_CONCURRENCY: usize = 1024;

pub(super) fn invalid(provider: &str, field: &str, message: impl Into<String>) -> Error {
    Error::Config {
        provider: provider.to_owned(),
        field: field.to_owned(),
        message: message.into(),
    }
}

/// A TOML error without the source line it would quote (a line may hold anything, a
/// password in a URL included): its message, redacted and bounded, and its position.
pub(super) fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = echo::truncate(
        &echo::redact_text(e.message().trim_end()),
        echo::MAX_MESSAGE_BYTES,
    );
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or("");
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            // The toml crate's first line, without the source lines it would quote.
            format!("TOML parse error at line {line}, column {column}\n{message}")
        }
        None => message,
    }
}

pub(super) fn validate_provider(mut p: FileProvider) -> Result<ProviderConfig> {
    let name = std::mem::take(&mut p.name);
    if name.is_empty()
        || name.len() > MAX_PROVIDER_NAME_LEN
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        // The error quotes the name (`provider "…"`): bounded, like every echo.
        return Err(invalid(
            &echo::truncate(&name, echo::MAX_ECHO_BYTES),
            "name",
            format!("must be 1-{MAX_PROVIDER_NAME_LEN} characters of A-Z a-z 0-9 - _ ."),
        ));
    }
    let n = name.as_str();
    let smpp_keys = p.take_smpp();
    let smpp = match p.transport.as_deref().unwrap_or("http") {
        "http" => {
            if let Some(field) = smpp_keys.set_fields().first() {
                return Err(not_for(n, field, "http"));
            }
            if !p.classify.smpp.is_empty() {
                return Err(not_for(n, "classify.smpp", "http"));
            }
            None
        }
        "smpp" => {
            for (set, field) in [
                (p.base_url.is_some(), "base_url"),
                (p.credentials_env.is_some(), "credentials_env"),
                (p.auth_header.is_some(), "auth_header"),
                (p.idempotency_key_header.is_some(), "idempotency_key_header"),
                (p.timeout_secs.is_some(), "timeout_secs"),
                (p.concurrency.is_some(), "concurrency"),
                (p.rate_limit_dialect.is_some(), "rate_limit_dialect"),
                (
                    p.pacer.use_rate_limit_headers.is_some(),
                    "pacer.use_rate_limit_headers",
                ),
                (!p.classify.http.is_empty(), "classify.http"),
            ] {
                if set {
                    return Err(not_for(n, field, "smpp"));
                }
            }
            Some(smpp_keys.validate(n)?)
        }
        other => {
            return Err(invalid(
                n,
                "transport",
                format!(
                    "{} is not a transport; use \"http\" or \"smpp\"",
                    clip(other)
                ),
            ))
        }
    };
    let base_url = match &smpp {
        Some(s) => address_url(n, &s.address)?,
        None => http_base_url(n, p.base_url.take())?,
    };
    let (concurrency, timeout) = match &smpp {
        Some(s) => (s.window, s.attempt_timeout()),
        None => http_limits(n, p.concurrency, p.timeout_secs)?,
    };
    if let Some(var) = &p.credentials_env {
        if var.is_empty()
            || var.len() > MAX_HEADER_NAME_LEN
            || var.contains('=')
            || var.contains('\0')
        {
            return Err(invalid(
                n,
                "credentials_env",
                "must be the NAME of an environment variable",
            ));
        }
    }
    let auth_header = p
        .auth_header
        .map(|h| {
            http::HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
                invalid(
                    n,
                    "auth_header",
                    format!("{} is not a header name", clip(&h)),
                )
            })
        })
        .transpose()?;
    let rate_hint = p.rate_hint;
    if rate_hint.is_some_and(|r| !(r.is_finite() && r > 0.0 && r <= MAX_RATE_HINT)) {
        return Err(invalid(
            n,
            "rate_hint",
            format!("must be in (0, {MAX_RATE_HINT}] requests per second"),
        ));
    }
    let idem = p
        .idempotency_key_header
        .unwrap_or_else(|| DEFAULT_IDEMPOTENCY_KEY_HEADER.to_owned());
    let idempotency_key_header = http::HeaderName::from_bytes(idem.as_bytes()).map_err(|_| {
        invalid(
            n,
            "idempotency_key_header",
            format!("{} is not a header name", clip(&idem)),
        )
    })?;

    let rate_limit_dialect = match &p.rate_limit_dialect {
        Some(v) => v
            .parse::<Dialect>()
            .map_err(|e| invalid(n, "rate_limit_dialect", e.to_string()))?,
        None => Dialect::Auto,
    };

    let d = RetryConfig::default();
    let r = p.retry;
    let retry = RetryConfig {
        max_attempts: r.max_attempts.unwrap_or(d.max_attempts),
        unknown_max_attempts: r.unknown_max_attempts.unwrap_or(d.unknown_max_attempts),
        max_age: r.max_age_secs.map_or(d.max_age, Duration::from_secs),
        backoff: Backoff {
            base: r
                .backoff_base_ms
                .map_or(d.backoff.base, Duration::from_millis),
            cap: r
                .backoff_cap_secs
                .map_or(d.backoff.cap, Duration::from_secs),
            jitter: Jitter::Full,
        },
    };
    if retry.max_attempts == 0 {
        return Err(invalid(n, "retry.max_attempts", "must be at least 1"));
    }
    if retry.unknown_max_attempts == 0 {
        return Err(invalid(
            n,
            "retry.unknown_max_attempts",
            "must be at least 1",
        ));
    }
    if retry.max_age.is_zero() {
        return Err(invalid(n, "retry.max_age_secs", "must be positive"));
    }
    if retry.backoff.base.is_zero() || retry.backoff.base > retry.backoff.cap {
        return Err(invalid(
            n,
            "retry.backoff_base_ms",
            "must be positive and at most backoff_cap_secs",
        ));
    }
    let db = RetryBudgetConfig::default();
    let budget = RetryBudgetConfig {
        ttl: p.budget.ttl_secs.map_or(db.ttl, Duration::from_secs),
        min_per_sec: p.budget.min_per_sec.unwrap_or(db.min_per_sec),
        retry_ratio: p.budget.retry_ratio.unwrap_or(db.retry_ratio),
    };
    if !(budget.retry_ratio.is_finite() && budget.retry_ratio >= 0.0) {
        return Err(invalid(
            n,
            "budget.retry_ratio",
            "must be a finite number >= 0",
        ));
    }
    let dp = PacerSettings::default();
    let pacer = PacerSettings {
        headroom: p.pacer.headroom.unwrap_or(dp.headroom),
        use_rate_limit_headers: p
            .pacer
            .use_rate_limit_headers
            .unwrap_or(dp.use_rate_limit_headers),
        throttle_pause: p
            .pacer
            .throttle_pause_ms
            .map_or(dp.throttle_pause, Duration::from_millis),
        max_throttle_pause: p
            .pacer
            .max_throttle_pause_secs
            .map_or(dp.max_throttle_pause, Duration::from_secs),
    };
    if !(pacer.headroom.is_finite() && pacer.headroom > 0.0 && pacer.headroom <= 1.0) {
        return Err(invalid(n, "pacer.headroom", "must be in (0, 1]"));
    }
    if !(Duration::from_millis(100)..=abide_core::pacer::MAX_PAUSE).contains(&pacer.throttle_pause)
    {
        return Err(invalid(
            n,
            "pacer.throttle_pause_ms",
            "must be in [100, 600000]",
        ));
    }
    if !(pacer.throttle_pause..=abide_core::pacer::MAX_PAUSE).contains(&pacer.max_throttle_pause) {
        return Err(invalid(
            n,
            "pacer.max_throttle_pause_secs",
            "must be in [throttle_pause, 600]",
        ));
    }
    let failover = p
        .failover
        .map(|f| {
            if f.after_pending_secs == 0 {
                return Err(invalid(
                    n,
                    "failover.after_pending_secs",
                    "must be positive",
                ));
            }
            Ok(FailoverConfig {
                to: f.to,
                after_pending: Duration::from_secs(f.after_pending_secs),
            })
        })
        .transpose()?;
    Ok(ProviderConfig {
        base_url,
        credentials_env: p.credentials_env,
        auth_header,
        rate_hint,
        concurrency,
        timeout,
        smpp,
        idempotency_key_header,
        retry,
        budget,
        pacer,
        classify: p.classify,
        rate_limit_dialect,
        failover,
        name,
    })
}

/// The `base_url` of an HTTP provider: required, http(s), with a host, no query,
/// fragment or credentials; shown without its password when it does not parse.
fn http_base_url(n: &str, raw: Option<String>) -> Result<reqwest::Url> {
    let Some(raw) = raw else {
        return Err(invalid(
            n,
            "base_url",
            "required (or set transport = \"smpp\")",
        ));
    };
    if raw.len() > MAX_BASE_URL_LEN {
        return Err(invalid(
            n,
            "base_url",
            format!("is {} bytes; the limit is {MAX_BASE_URL_LEN}", raw.len()),
        ));
    }
    // The URL is shown without its password even when it does not parse (a password
    // makes it unusable here anyway; see below).
    let base_url = reqwest::Url::parse(&raw).map_err(|e| {
        invalid(
            n,
            "base_url",
            format!("{}: {e}", clip(&echo::redact_url(&raw))),
        )
    })?;
    if !matches!(base_url.scheme(), "http" | "https") || base_url.host_str().is_none() {
        return Err(invalid(
            n,
            "base_url",
            "must be an http or https URL with a host",
        ));
    }
    if base_url.query().is_some() || base_url.fragment().is_some() {
        return Err(invalid(n, "base_url", "must not have a query or fragment"));
    }
    if !base_url.username().is_empty() || base_url.password().is_some() {
        return Err(invalid(
            n,
            "base_url",
            "must not embed credentials; use credentials_env",
        ));
    }
    Ok(base_url)
}

/// `concurrency` and `timeout_secs` of an HTTP provider.
fn http_limits(
    n: &str,
    concurrency: Option<usize>,
    timeout_secs: Option<f64>,
) -> Result<(usize, Duration)> {
    let concurrency = concurrency.unwrap_or(4);
    if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
        return Err(invalid(
            n,
            "concurrency",
            format!("must be 1..={MAX_CONCURRENCY}"),
        ));
    }
    let timeout_secs = timeout_secs.unwrap_or(10.0);
    if !(timeout_secs.is_finite() && (0.001..=600.0).contains(&timeout_secs)) {
        return Err(invalid(n, "timeout_secs", "must be in [0.001, 600]"));
    }
    Ok((concurrency, Duration::from_secs_f64(timeout_secs)))
}
