//! A provider as the proxy holds it: its base URL, its credential, its timeout and one
//! abide-client [`Policy`] whose single host key is the provider's name, so every request
//! to it, whichever client sent it, goes through one `Session`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use abide_client::{Policy, TokioSleeper};
use abide_core::{Clock, SystemClock};
use abide_outbox::{CredentialSource, ProviderConfig, TransportConfig};
use http::{HeaderName, HeaderValue};

use crate::counters::ProviderMetrics;
use crate::error::ProxyError;

/// One provider behind the proxy.
pub(crate) struct Provider {
    pub(crate) name: String,
    pub(crate) base: reqwest::Url,
    /// The header and value added upstream (`credentials_env`), marked sensitive; `None`:
    /// the client's `Authorization` passes through.
    pub(crate) credential: Option<(HeaderName, HeaderValue)>,
    pub(crate) idempotency_header: HeaderName,
    pub(crate) timeout: Duration,
    pub(crate) policy: Policy,
    /// Requests inside the proxy for this provider (held or on the wire).
    pub(crate) inside: AtomicUsize,
    pub(crate) metrics: ProviderMetrics,
    /// The clock of the policy (the system clock: the proxy waits in real time).
    pub(crate) clock: Arc<dyn Clock>,
    /// The pacer's headroom (target = advertised × headroom), for the advertised rate.
    pub(crate) headroom: f64,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("base", &abide_core::echo::redact_url(self.base.as_str()))
            .field("credential", &self.credential.as_ref().map(|(n, _)| n))
            .finish_non_exhaustive()
    }
}

/// Counts a request inside the proxy for as long as it lives.
pub(crate) struct Inside(Arc<Provider>);

impl Inside {
    /// Enter, unless `bound` requests are inside already (then `None`).
    pub(crate) fn enter(p: &Arc<Provider>, bound: usize) -> Option<Self> {
        let before = p.inside.fetch_add(1, Ordering::AcqRel);
        if before >= bound {
            p.inside.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Self(Arc::clone(p)))
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        self.0.inside.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Provider {
    /// The proxy's provider for `cfg`.
    ///
    /// # Errors
    /// [`ProxyError::Config`] for a provider that is not HTTP, a credential that cannot be
    /// a header value, or session rules abide-client refuses (naming the setting).
    pub(crate) fn new(
        cfg: &ProviderConfig,
        credentials: &dyn CredentialSource,
        max_wait: Duration,
        #[cfg(feature = "redis")] coordination: Option<&abide_client::CoordinationConfig>,
    ) -> Result<Self, ProxyError> {
        let bad = |problem: String| ProxyError::Config {
            provider: cfg.name.clone(),
            problem,
        };
        let TransportConfig::Http(http) = &cfg.transport else {
            return Err(bad("only HTTP providers can be proxied".into()));
        };
        let credential = match &http.credentials_env {
            None => None,
            Some(var) => {
                let secret = credentials.get(var).ok_or_else(|| {
                    bad(format!("credentials_env {var} is unset: export it, or remove credentials_env to pass the client's Authorization through"))
                })?;
                let (name, text) = match &http.auth_header {
                    Some(h) => (h.clone(), secret.expose().to_owned()),
                    None => (
                        http::header::AUTHORIZATION,
                        format!("Bearer {}", secret.expose()),
                    ),
                };
                let mut v = HeaderValue::from_str(&text).map_err(|_| {
                    let fault = abide_outbox::model::headers::value_fault(secret.expose());
                    let fault = fault.as_deref().unwrap_or("holds a byte no header may carry");
                    bad(format!(
                        "the value of {var} cannot be sent in header {name}: it {fault} (the value is never shown)"
                    ))
                })?;
                v.set_sensitive(true);
                Some((name, v))
            }
        };
        let session = cfg.session_config();
        let headroom = session.pacer.headroom;
        let key = cfg.name.clone();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let builder = Policy::builder()
            .with_clock(
                Arc::clone(&clock),
                Arc::new(TokioSleeper::new(Arc::clone(&clock))),
            )
            .with_session_config(session)
            .with_max_wait(max_wait)
            // A key the proxy made up would make a POST look safe to replay to the engine
            // while the client's own retry carries none: only the client's key counts.
            .without_idempotency_keys()
            .with_key(move |_| key.clone());
        #[cfg(feature = "redis")]
        let builder = match coordination {
            Some(c) => builder.with_coordination(c),
            None => builder,
        };
        let policy = builder.build().map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            name: cfg.name.clone(),
            base: http.base_url.clone(),
            credential,
            idempotency_header: http.idempotency_key_header.clone(),
            timeout: http.timeout,
            policy,
            inside: AtomicUsize::new(0),
            metrics: ProviderMetrics::default(),
            clock,
            headroom,
        })
    }

    /// How long until the provider can be sent to, from what its session knows: the pause
    /// left, else one interval of its pace.
    pub(crate) fn known_wait(&self) -> Duration {
        let now = self.clock.monotonic();
        match self.policy.pacer_snapshot(&self.name) {
            Some(s) => match s.paused_until {
                Some(until) if until > now => until - now,
                _ => Duration::from_secs_f64(1.0 / s.rate.max(1e-3)).min(Duration::from_secs(60)),
            },
            None => Duration::from_secs(1),
        }
    }

    /// The pace the session aims at, requests per second (`None` before any request).
    pub(crate) fn pace(&self) -> Option<f64> {
        self.policy.pacer_snapshot(&self.name).map(|s| s.rate)
    }
}
