//! # abide-proxy
//!
//! abide for clients in any language, with no code change: an HTTP reverse proxy in front
//! of the providers of a providers file. A client changes its base URL to
//! `http://PROXY/{provider}` (or sets `HTTP_PROXY=http://PROXY` for plain-HTTP providers)
//! and gets abide's decisions.
//!
//! # What it does
//! - **Routes** `http://PROXY/{provider}/{path}` to the provider's `base_url` + `{path}`,
//!   query kept, the path confined below the base exactly as an outbox item's
//!   ([`abide_outbox::transport::http::path`]; an escaping path is `400` naming the rule).
//!   Absolute-form requests whose origin is a provider's `base_url` go there too. `CONNECT`
//!   is `501` (inside TLS nothing can be seen); an unknown provider `404` naming the
//!   configured ones.
//! - **One decision logic**: each provider is one `abide_core::Session`, driven by
//!   abide-client's engine ([`abide_client::drive`]), the code abide-tower and
//!   abide-reqwest run. A request is held, not refused, while its provider is paced or
//!   paused.
//! - **Honest answers**: a request waits at most its budget (`Abide-Max-Wait: <seconds>`,
//!   else [`ProxyOptions::max_wait`]). A longer wait, or a full waiting queue
//!   ([`ProxyOptions::max_waiting`]), is answered `429` with `Retry-After` (whole seconds,
//!   rounded up, at least 1) and `RateLimit` fields. The upstream's own `429` reaches the
//!   client only when attempts or age ran out, with its real `Retry-After`.
//! - **Retries**: answers that say the request was not acted on (`429`, `503` with
//!   `Retry-After`, a throttle by dialect or body, a refused connection) are retried for
//!   any method; ambiguous outcomes (timeout, reset, `502`/`504`) only for idempotent
//!   methods (RFC 9110 §9.2.2) or with an `Idempotency-Key`, else the client gets
//!   `502`/`504` saying the request may have been acted on. Bodies up to
//!   [`ProxyOptions::max_buffered_body`] are buffered for resending; larger ones stream
//!   once. Responses stream back.
//! - **Credentials**: a provider's `credentials_env` is added upstream; otherwise the
//!   client's `Authorization` passes through. With a token ([`ProxyOptions::token_digest`])
//!   every provider route needs `Proxy-Authorization: Bearer <token>`, compared as SHA-256
//!   digests in constant time.
//! - **Operable**: `/_abide/healthz`, `/_abide/metrics` (Prometheus text),
//!   `/_abide/stats` (JSON); one log line per pause episode; draining on shutdown.
//!
//! # Map
//! `route` (where a request goes), `forward` (one request through the engine),
//! `upstream` (abide-client's `Attempts` over reqwest), `body` (streaming bodies),
//! `answer` (the proxy's own answers), `metrics`, `provider` (a provider's session and
//! credential), [`serve`] (the listener).

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod answer;
mod body;
pub mod cap;
mod counters;
mod error;
mod forward;
mod memory;
mod metrics;
mod origin;
mod provider;
mod rate;
mod route;
mod serve;
mod upstream;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use abide_outbox::{Config, CredentialSource};

pub use answer::ABIDE_STOPPED;
pub use error::ProxyError;
pub use forward::{MAX_WAIT_CAP, MAX_WAIT_HEADER};
pub use metrics::names as metric_names;
pub use origin::{host_field_problem, loopback_hosts};
pub use rate::MinBodyRate;
pub use route::OWN_PREFIX;
pub use serve::serve;

use provider::Provider;

/// The proxy's settings beyond the providers file.
///
/// # Default
/// - `max_wait`: 30 s, the longest single wait of a request without `Abide-Max-Wait`
/// - `max_waiting`: 10,000 requests inside the proxy per provider
/// - `max_buffered_body`: 1 MiB (larger request bodies stream once, never retried)
/// - `max_buffered_total`: 256 MiB of request bodies held at once, all providers together
/// - `min_body_rate`: 1,024 bytes/s after 10 s ([`MinBodyRate`]; slower bodies are cut off)
/// - no token (for a loopback listener)
#[derive(Clone)]
pub struct ProxyOptions {
    /// Longest single wait (pace, pause, retry delay) of a request that names none.
    pub max_wait: Duration,
    /// Requests per provider inside the proxy (held or on the wire) before new ones are
    /// answered `429`.
    pub max_waiting: usize,
    /// Largest request body kept for resending, in bytes.
    pub max_buffered_body: usize,
    /// Bytes of request bodies held at once, all providers together; a request whose body
    /// would pass it is answered `429` before its body is read.
    pub max_buffered_total: usize,
    /// The slowest request body accepted; a slower one is answered `408` (or, when it
    /// streams past `max_buffered_body`, its upstream request is cut off).
    pub min_body_rate: MinBodyRate,
    /// How long a connection may take to send a request head before it is closed (hyper's
    /// header read timeout): a head that never ends holds no connection for ever
    /// (slowloris).
    pub header_read_timeout: Duration,
    /// Most connections open at once ([`cap`]: at the cap a new one closes the one idle
    /// longest, and is refused only while every open one has a request in progress).
    pub max_connections: usize,
    /// SHA-256 of the bearer token clients must send in `Proxy-Authorization`; `None`:
    /// open (only sensible on loopback).
    pub token_digest: Option<[u8; 32]>,
    /// Where several proxies share each provider's limit (`[coordination]`).
    #[cfg(feature = "redis")]
    pub coordination: Option<abide_client::CoordinationConfig>,
}

impl std::fmt::Debug for ProxyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyOptions")
            .field("max_wait", &self.max_wait)
            .field("max_waiting", &self.max_waiting)
            .field("max_buffered_body", &self.max_buffered_body)
            .field("max_buffered_total", &self.max_buffered_total)
            .field("min_body_rate", &self.min_body_rate)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("max_connections", &self.max_connections)
            .field("token", &self.token_digest.map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_secs(30),
            max_waiting: 10_000,
            max_buffered_body: 1 << 20,
            max_buffered_total: 256 << 20,
            min_body_rate: MinBodyRate::default(),
            header_read_timeout: Duration::from_secs(10),
            max_connections: cap::DEFAULT_MAX_CONNECTIONS,
            token_digest: None,
            #[cfg(feature = "redis")]
            coordination: None,
        }
    }
}

/// The providers and the shared HTTP client.
#[derive(Debug)]
pub struct Proxy {
    providers: Vec<Arc<Provider>>,
    client: reqwest::Client,
    opts: ProxyOptions,
    bodies: Arc<memory::BodyBudget>,
}

impl Proxy {
    /// A proxy for every provider of `config`, reading credentials from `credentials`.
    ///
    /// # Errors
    /// [`ProxyError`] naming the provider or option: a provider that is not HTTP or is
    /// named `_abide` (the proxy's own routes), a `credentials_env` that is unset, session rules abide-client refuses, `max_waiting`
    /// or `max_wait` zero, `max_buffered_total` zero.
    pub fn new(
        config: &Config,
        credentials: &dyn CredentialSource,
        opts: ProxyOptions,
    ) -> Result<Self, ProxyError> {
        if opts.max_waiting == 0 {
            return Err(ProxyError::Option {
                option: "max_waiting",
                problem: "must be at least 1".into(),
            });
        }
        if opts.max_buffered_total == 0 {
            return Err(ProxyError::Option {
                option: "max_buffered_total",
                problem: "must be at least 1 byte: with 0 every request is refused".into(),
            });
        }
        if opts.max_wait.is_zero() {
            return Err(ProxyError::Option {
                option: "max_wait",
                problem: "must be positive".into(),
            });
        }
        let own = route::OWN_PREFIX.trim_matches('/');
        if let Some(p) = config.providers.iter().find(|p| p.name == own) {
            return Err(ProxyError::Config {
                provider: p.name.clone(),
                problem: format!(
                    "the name is the proxy's own routes (/{own}/healthz, ...); rename the provider"
                ),
            });
        }
        let providers = config
            .providers
            .iter()
            .map(|p| {
                Provider::new(
                    p,
                    credentials,
                    opts.max_wait,
                    #[cfg(feature = "redis")]
                    opts.coordination.as_ref(),
                )
                .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let client = reqwest::Client::builder()
            // A redirect could lead anywhere; requests may only reach their provider.
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(256)
            .build()?;
        Ok(Self {
            providers,
            client,
            bodies: memory::BodyBudget::new(opts.max_buffered_total),
            opts,
        })
    }

    /// The configured providers' names, in file order.
    pub fn provider_names(&self) -> Vec<&str> {
        self.providers.iter().map(|p| p.name.as_str()).collect()
    }

    /// The metrics in the Prometheus text format.
    pub fn metrics_text(&self) -> String {
        metrics::render(&self.providers)
    }
}

impl route::Bases for Proxy {
    fn len(&self) -> usize {
        self.providers.len()
    }
    fn name(&self, i: usize) -> &str {
        &self.providers[i].name
    }
    fn base(&self, i: usize) -> &reqwest::Url {
        &self.providers[i].base
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_provider_named_like_the_proxys_own_routes_is_refused() {
        let cfg = Config::from_toml_str(
            "[[provider]]\nname = \"_abide\"\nbase_url = \"http://127.0.0.1:8080\"\n",
        )
        .unwrap();
        let e = Proxy::new(
            &cfg,
            &abide_outbox::StaticCredentials::new(),
            ProxyOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&e, ProxyError::Config { provider, .. } if provider == "_abide"),
            "{e}"
        );
        assert!(e.to_string().contains("rename the provider"), "{e}");
    }
}
