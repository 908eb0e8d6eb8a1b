//! The claimer: takes batches of due items from the store for one provider, no more than
//! its senders can send well within the lease at the current pace.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::inner::{sleep_or_stop, Inner};
use super::runtime::ProviderRuntime;
use crate::model::Item;
use crate::store::Store;

/// Claims batches for one provider while there is room in its channel.
pub(super) async fn claimer<S: Store>(
    inner: Arc<Inner<S>>,
    rt: Arc<ProviderRuntime>,
    tx: mpsc::Sender<Item>,
    mut stop: watch::Receiver<bool>,
) {
    let lease = inner.opts.lease;
    loop {
        if *stop.borrow() {
            return;
        }
        let mono = inner.clock.monotonic();
        // While results cannot be written, claiming would only send what cannot be recorded.
        if inner.health.failing() {
            if sleep_or_stop(&inner, mono + Duration::from_millis(200), &mut stop).await {
                return;
            }
            continue;
        }
        // A provider that cannot send this run (an SMPP bind refused for good): its items
        // wait unclaimed, nothing is tried.
        if rt.suspended().is_some() {
            if sleep_or_stop(&inner, mono + inner.opts.idle_poll, &mut stop).await {
                return;
            }
            continue;
        }
        // While the provider is paused, claiming would only run leases down.
        if let Some(until) = rt.session.pacer().paused_until(mono) {
            if sleep_or_stop(&inner, until, &mut stop).await {
                return;
            }
            continue;
        }
        // Claim again once half the channel (at most a batch) is free, not at its first
        // free slot: every claim is a write transaction of its own on the store's one
        // writer, and claiming whenever one slot was free made claims of a few items each,
        // as many as the writer's own transactions (BENCHMARKS.md).
        let want = (tx.max_capacity() / 2).clamp(1, inner.opts.claim_batch.max(1));
        let permits = tokio::select! {
            p = tx.reserve_many(want) => match p { Ok(p) => p, Err(_) => return },
            _ = stop.changed() => return,
        };
        drop(permits);
        let free = tx.capacity();
        let backlog = tx.max_capacity() - free;
        // Claim no more than can be sent well within the lease at the current pace.
        // This node's share of it, when several nodes share the provider's limit.
        let pacer = rt.session.pacer();
        let sendable = (pacer.rate() * pacer.share() * lease.as_secs_f64() / 4.0).floor() as usize;
        let limit = free
            .min(inner.opts.claim_batch)
            .min(sendable.max(1).saturating_sub(backlog));
        if limit == 0 {
            let wait = Duration::from_secs_f64((1.0 / rt.session.pacer().rate()).clamp(0.001, 1.0));
            if sleep_or_stop(&inner, mono + wait, &mut stop).await {
                return;
            }
            continue;
        }
        // Registered before the claim: items enqueued after it found nothing still wake
        // this claimer.
        let enqueued = inner.enqueued.notified();
        tokio::pin!(enqueued);
        enqueued.as_mut().enable();
        let now = inner.clock.now();
        let owner = format!(
            "{}#{}",
            inner.owner,
            inner.claim_seq.fetch_add(1, Ordering::Relaxed)
        );
        match inner
            .store
            .claim(&rt.cfg.name, &owner, now, lease, limit)
            .await
        {
            Ok(items) if !items.is_empty() => {
                rt.stats
                    .in_flight
                    .fetch_add(items.len() as u64, Ordering::Relaxed);
                for it in items {
                    if tx.send(it).await.is_err() {
                        return;
                    }
                }
            }
            Ok(_) => {
                let next = inner.store.next_due(&rt.cfg.name).await.ok().flatten();
                let idle = inner.opts.idle_poll;
                let wait = next.map_or(idle, |t| {
                    t.duration_since(now).unwrap_or_default().min(idle)
                });
                let wait = wait.max(Duration::from_millis(1));
                tokio::select! {
                    stopped = sleep_or_stop(&inner, mono + wait, &mut stop) => if stopped {
                        return;
                    },
                    () = &mut enqueued => {}
                }
            }
            Err(e) => {
                tracing::warn!(provider = %rt.cfg.name, error = %e, "claim failed; retrying");
                if sleep_or_stop(&inner, mono + Duration::from_secs(1), &mut stop).await {
                    return;
                }
            }
        }
    }
}
