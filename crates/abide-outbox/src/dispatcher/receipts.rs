//! The receipt recorder: per provider whose transport delivers receipts (SMPP), stores
//! them in batches and then lets the transport acknowledge them to the remote.
//!
//! A receipt is acknowledged only once stored, so a crash between the two makes the
//! remote deliver it again (storing it twice replaces it with itself); one that cannot be
//! stored is answered with a temporary error by the transport and delivered again.

use std::sync::Arc;

use tokio::sync::watch;

use super::inner::Inner;
use super::runtime::ProviderRuntime;
use crate::receipt::Receipt;
use crate::receipt::ReceiptInbox;
use crate::store::Store;

/// Most receipts stored in one transaction.
const MAX_BATCH: usize = 512;

/// Store `rt`'s receipts from `inbox` until stopped.
pub(super) async fn recorder<S: Store>(
    inner: Arc<Inner<S>>,
    rt: Arc<ProviderRuntime>,
    inbox: ReceiptInbox,
    mut stop: watch::Receiver<bool>,
) {
    // Held for the run: one recorder per inbox at a time.
    let mut rx = inbox.lock().await;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        if *stop.borrow() {
            return;
        }
        let first = tokio::select! {
            r = rx.recv() => r,
            _ = stop.changed() => continue,
        };
        let Some(first) = first else { return };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let now = inner.clock.now();
        let receipts: Vec<Receipt> = batch
            .iter()
            .map(|r| Receipt {
                provider: rt.cfg.name.clone(),
                message_id: r.message_id.clone(),
                state: r.state,
                at: now,
            })
            .collect();
        match inner.store.record_receipts(&receipts).await {
            Ok(()) => batch.drain(..).for_each(|r| r.stored()),
            Err(e) => {
                // Dropped unacknowledged: the transport answers a temporary error and the
                // remote delivers them again.
                tracing::warn!(provider = %rt.cfg.name, error = %e, receipts = batch.len(),
                    "storing delivery receipts failed; the remote will deliver them again");
                batch.clear();
            }
        }
    }
}
