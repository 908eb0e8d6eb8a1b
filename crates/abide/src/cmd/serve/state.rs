//! What every request of `abide serve`'s HTTP API shares ([`Api`]), and the body of
//! `/v1/stats`, which the API and the dashboard both serve.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use abide_core::Clock;
use abide_outbox::{AnyStore, Config, Progress};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::history::History;
use crate::report::Snapshot;

/// Shared by every request. `Clone` shares everything.
#[derive(Clone)]
pub(crate) struct Api {
    pub(crate) store: AnyStore,
    pub(crate) config: Arc<Config>,
    pub(crate) clock: Arc<dyn Clock>,
    /// SHA-256 of the bearer token (the token itself is not kept).
    pub(crate) token_digest: [u8; 32],
    /// The dispatcher's latest snapshot, refreshed by a background task.
    pub(crate) progress: Arc<RwLock<Option<Progress>>>,
    pub(crate) metrics: PrometheusHandle,
    /// Whether `/metrics` needs the token too.
    pub(crate) metrics_auth: bool,
    /// How long results have been failing to be written, and why (the dispatcher's
    /// store breaker): `/healthz` answers 503 meanwhile.
    pub(crate) store_fault: Arc<dyn Fn() -> Option<(Duration, String)> + Send + Sync>,
    /// What the dashboard's charts showed lately, sampled by a background task.
    pub(crate) history: Arc<History>,
}

impl Api {
    /// The dispatcher's latest snapshot (none before the first refresh).
    pub(crate) fn live(&self) -> Option<Progress> {
        self.progress
            .read()
            .map(|p| p.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("providers", &self.config.providers.len())
            .field("token_digest", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// SHA-256 of a token, what [`Api::token_digest`] holds.
pub(crate) fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Constant-time equality of two digests (comparing digests also hides the length).
pub(crate) fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The body of `/v1/stats` (the dashboard's data adds recent items to it).
///
/// # Errors
/// Database errors.
pub(crate) async fn stats_value(api: &Api) -> anyhow::Result<Value> {
    let snap = Snapshot::load(&api.store, api.clock.now()).await?;
    let live = api.live();
    let providers: Vec<Value> = live
        .as_ref()
        .map(|p| p.providers.iter().map(provider_value).collect())
        .unwrap_or_default();
    Ok(json!({
        "counts": snap.counts,
        "items": snap.items,
        "oldest_pending_age_secs": snap.oldest_pending_age_secs,
        "attempts": snap.attempts,
        "http_429_per_item": snap.http_429_per_item,
        "throttle_answers": snap.throttle_answers,
        "throttle_answers_per_item": snap.throttle_answers_per_item,
        "remote_counts": snap.remote_counts,
        "providers": providers,
        "dispatcher": live.as_ref().map(|p| json!({
            "elapsed_secs": p.elapsed.as_secs_f64(),
            "totals": p.totals,
            "achieved_rate_per_sec": p.achieved_rate(),
            "throttles_per_request": p.throttles_per_request(),
        })),
    }))
}

fn provider_value(x: &abide_outbox::ProviderProgress) -> Value {
    json!({
        "name": x.name,
        "pace_per_sec": x.rate,
        "target_rate_per_sec": x.target_rate,
        "ceiling_per_sec": x.ceiling,
        "advertised_rate_per_sec": x.advertised_rate,
        "paused_for_secs": x.paused_for.map(|d| d.as_secs_f64()),
        "last_pause": x.last_pause,
        "sunset": x.sunset.map(abide_core::rfc3339::format),
        "throttle_rate": x.throttle_rate,
        "limited_by_concurrency": x.limited_by_concurrency,
        "in_flight": x.host_in_flight,
        "limited_by_in_flight_limit": x.host_in_flight.held_back(),
        "coordination": crate::report::coord::live_value(&x.coordination, x.taken_at, x.paused_for),
        "counts": x.counts,
        "totals": x.totals,
        "suspended": x.suspended,
    })
}
