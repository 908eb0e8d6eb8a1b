//! What every task of a run shares ([`Inner`]: the store, the clock, the providers'
//! runtimes, the store's health), and the one wait they all use.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use abide_core::Clock;
use tokio::sync::watch;

use super::health::StoreHealth;
use super::options::DispatcherOptions;
use super::runtime::ProviderRuntime;
use crate::config::Config;
use crate::model::Completion;
use crate::sleep::Sleeper;

/// The state of one dispatcher, shared by its claimers, senders, writer and maintenance.
#[derive(Debug)]
pub(super) struct Inner<S> {
    pub(super) store: S,
    pub(super) config: Config,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) sleeper: Arc<dyn Sleeper>,
    pub(super) opts: DispatcherOptions,
    pub(super) providers: Vec<Arc<ProviderRuntime>>,
    pub(super) started: Instant,
    pub(super) owner: String,
    pub(super) claim_seq: AtomicU64,
    pub(super) health: StoreHealth,
    /// Woken by [`super::Dispatcher::enqueue`]: a claimer that found nothing due waits for new
    /// items here rather than for its idle poll (`abide send` starts delivering while it
    /// still enqueues; `serve` takes items from its API).
    pub(super) enqueued: tokio::sync::Notify,
}

/// A completion on its way to the store, with the provider it counts for.
pub(super) type Done = (usize, Completion);

/// Sleep until `deadline` or until stopped; true when stopped.
pub(super) async fn sleep_or_stop<S>(
    inner: &Inner<S>,
    deadline: Instant,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        () = inner.sleeper.sleep_until(deadline) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}
