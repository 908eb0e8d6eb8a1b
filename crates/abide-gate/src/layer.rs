//! [`GateLayer`]: the tower `Layer` that puts a [`GateSet`] in front of a service.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use abide_core::Clock;
use http::request::Parts;

use crate::metrics::GateMetrics;
use crate::service::GateService;
use crate::GateSet;

/// Who a request comes from, as far as the gates care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The caller's API key (never logged; see [`crate::safe_trace`]).
    pub key: String,
    /// The account the key belongs to, for account-scoped gates.
    pub account: Option<String>,
}

/// Finds the [`Identity`] of a request. `None` means "not authenticated": the gate lets such
/// a request through untouched so the application can answer it (typically 401).
pub trait Identify: Send + Sync + 'static {
    /// Identify the caller from the request head.
    fn identify(&self, parts: &Parts) -> Option<Identity>;
}

impl<F> Identify for F
where
    F: Fn(&Parts) -> Option<Identity> + Send + Sync + 'static,
{
    fn identify(&self, parts: &Parts) -> Option<Identity> {
        self(parts)
    }
}

/// Identifies callers by `Authorization: Bearer <key>` against a fixed table of keys and
/// their accounts.
#[derive(Clone, Default)]
pub struct BearerKeys {
    keys: HashMap<String, Option<String>>,
}

impl fmt::Debug for BearerKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are secrets: show only how many there are.
        f.debug_struct("BearerKeys")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl BearerKeys {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accept `key`, belonging to `account`.
    pub fn with_key(mut self, key: &str, account: Option<&str>) -> Self {
        self.keys.insert(key.to_owned(), account.map(str::to_owned));
        self
    }

    /// Look up the bearer token of a request head.
    pub fn lookup(&self, headers: &http::HeaderMap) -> Option<Identity> {
        let token = bearer_token(headers)?;
        let account = self.keys.get(token)?;
        Some(Identity {
            key: token.to_owned(),
            account: account.clone(),
        })
    }
}

impl Identify for BearerKeys {
    fn identify(&self, parts: &Parts) -> Option<Identity> {
        self.lookup(&parts.headers)
    }
}

/// The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1).
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) gates: Arc<GateSet>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) identify: Arc<dyn Identify>,
    pub(crate) quota_path: Option<String>,
    pub(crate) exempt: Vec<String>,
    pub(crate) metrics: Arc<GateMetrics>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("gates", &self.gates)
            .field("quota_path", &self.quota_path)
            .field("exempt", &self.exempt)
            .finish_non_exhaustive()
    }
}

/// Applies a [`GateSet`] to every request of the wrapped service.
///
/// Decisions happen in `call`, never in `poll_ready`: a server must answer an over-limit
/// request with a 429 now, not leave it waiting in a queue.
///
/// # Clone
/// Clones share the gate state, the clock and the counters (all behind `Arc`), so a layer
/// applied once to an axum `Router` limits all connections together.
#[derive(Debug, Clone)]
pub struct GateLayer {
    shared: Arc<Shared>,
}

impl GateLayer {
    /// A layer deciding with `gates`, reading time from `clock` and callers from `identify`.
    pub fn new(gates: Arc<GateSet>, clock: Arc<dyn Clock>, identify: impl Identify) -> Self {
        Self {
            shared: Arc::new(Shared {
                gates,
                clock,
                identify: Arc::new(identify),
                quota_path: None,
                exempt: Vec::new(),
                metrics: Arc::new(GateMetrics::default()),
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Shared)) -> Self {
        f(Arc::make_mut(&mut self.shared));
        self
    }

    /// Answer `GET <path>` in the layer itself with the caller's quota (JSON and `RateLimit`
    /// headers). It requires a known key (401 otherwise), bypasses the gates, and never
    /// charges anything, so it works while the caller is exhausted.
    pub fn with_quota_path(self, path: &str) -> Self {
        let path = path.to_owned();
        self.edit(|s| s.quota_path = Some(path))
    }

    /// Let requests to `path` through without gating (health checks, stats).
    pub fn with_exempt_path(self, path: &str) -> Self {
        let path = path.to_owned();
        self.edit(|s| s.exempt.push(path))
    }

    /// Share counters with the caller (e.g. to export them).
    pub fn with_metrics(self, metrics: Arc<GateMetrics>) -> Self {
        self.edit(|s| s.metrics = metrics)
    }

    /// The live counters.
    pub fn metrics(&self) -> Arc<GateMetrics> {
        Arc::clone(&self.shared.metrics)
    }
}

impl<S> tower::Layer<S> for GateLayer {
    type Service = GateService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GateService::new(inner, Arc::clone(&self.shared))
    }
}
