//! The completer: writes results back in batches, one transaction each, and counts what
//! the store accepted.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

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

/// Write one batch, retrying with backoff while the store fails (nothing new is claimed or
/// sent meanwhile: see `health`), until `store_fault_limit`; `None` when it gave up.
async fn write<S: Store>(
    inner: &Inner<S>,
    completions: &[Completion],
) -> Option<Vec<crate::error::Result<State>>> {
    let mut wait = Duration::from_millis(200);
    loop {
        match inner.store.complete(completions, inner.clock.now()).await {
            Ok(r) => {
                if let Some(lasted) = inner.health.recovered(inner.clock.monotonic()) {
                    tracing::warn!(
                        after_ms = lasted.as_millis() as u64,
                        "results are written again; claiming and sending resume"
                    );
                }
                return Some(r);
            }
            Err(e) => {
                let (lasted, began) = inner.health.failed(inner.clock.monotonic(), &e.to_string());
                if began {
                    tracing::error!(error = %e, items = completions.len(),
                        "writing results failed; no item is claimed or sent until the database \
                         accepts writes again");
                }
                if inner.health.gave_up().is_some() || lasted >= inner.opts.store_fault_limit {
                    // Their leases will end and the items be resent with the same keys.
                    tracing::error!(error = %e, items = completions.len(),
                        seconds = lasted.as_secs(), "giving up: stopping the run");
                    inner.health.give_up(lasted);
                    return None;
                }
                let at = inner.clock.monotonic() + wait;
                wait = (wait * 2).min(Duration::from_secs(5));
                inner.sleeper.sleep_until(at).await;
            }
        }
    }
}
