//! [`GateLayer`]: the tower `Layer` that puts a [`GateSet`] in front of a service.

use std::sync::Arc;

use abide_core::sleep::{Sleeper, TokioSleeper};
use abide_core::Clock;

use crate::identity::Identify;
use crate::metrics::GateMetrics;
use crate::service::{GateService, Shared};
use crate::GateSet;

/// Applies a [`GateSet`] to every request of the wrapped service.
///
/// Decisions happen in `call`, never in `poll_ready`: a server must answer an over-limit
/// request with a 429 now, not leave it waiting in a queue of unknown length. Only gates
/// built [`crate::Gate::with_delay`] hold a request, until its slot and within their bound
/// ([`GateSet::check_delayed`]); a client that disconnects while held gives its slot back.
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
    ///
    /// # Default
    /// Delayed requests wait on tokio timers measured on `clock` ([`TokioSleeper`]); change
    /// it with [`GateLayer::with_sleeper`].
    pub fn new(gates: Arc<GateSet>, clock: Arc<dyn Clock>, identify: impl Identify) -> Self {
        Self {
            shared: Arc::new(Shared {
                gates,
                sleeper: Arc::new(TokioSleeper::new(Arc::clone(&clock))),
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

    /// Wait for delayed requests' slots with `sleeper` (deadlines in `clock`'s monotonic
    /// time): a `ManualSleeper` in tests.
    pub fn with_sleeper(self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.edit(|s| s.sleeper = sleeper)
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
