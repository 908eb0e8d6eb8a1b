//! The completer: writes results back in batches, one transaction each, and counts what
//! the store accepted.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Done, Inner};
use crate::model::Completion;
use crate::progress::Stats;
use crate::state::State;
use crate::store::Store;

/// Writes completions in batches (one transaction each) and counts what was stored.
pub(super) async fn completer<S: Store>(inner: Arc<Inner<S>>, mut rx: mpsc::Receiver<Done>) {
    const MAX_BATCH: usize = 512;
    let mut batch: Vec<Done> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(d) => batch.push(d),
                Err(_) => break,
            }
        }
        let completions: Vec<Completion> = batch.iter().map(|(_, c)| c.clone()).collect();
        let results = write(&inner, &completions).await;
        for (i, (idx, c)) in batch.drain(..).enumerate() {
            let rt = &inner.providers[idx];
            rt.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
            let Some(results) = &results else { continue };
            match &results[i] {
                Ok(State::Submitted) => Stats::bump(&rt.stats.delivered),
                Ok(State::Failed) => Stats::bump(&rt.stats.terminal_failures),
                Ok(State::Deferred) => Stats::bump(&rt.stats.deferred),
                Ok(State::Pending) if !c.attempts.is_empty() => {
                    Stats::bump(&rt.stats.retries_scheduled)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(item = %c.id, error = %e, "result refused by the store"),
            }
        }
    }
}

/// Write one batch; see [`super::health::persist`].
async fn write<S: Store>(
    inner: &Inner<S>,
    completions: &[Completion],
) -> Option<Vec<crate::error::Result<State>>> {
    super::health::persist(inner, "writing results", completions.len(), || {
        inner.store.complete(completions, inner.clock.now())
    })
    .await
}
