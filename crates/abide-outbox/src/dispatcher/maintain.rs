//! Periodic sweeps: reclaim expired leases, defer items past their maximum age, fail over.

use std::sync::Arc;

use tokio::sync::watch;

use super::inner::{sleep_or_stop, Inner};
use crate::store::Store;

/// Periodic sweeps: reclaim expired leases, defer items past their maximum age, fail over.
pub(super) async fn maintenance<S: Store>(inner: Arc<Inner<S>>, mut stop: watch::Receiver<bool>) {
    loop {
        let now = inner.clock.now();
        if let Err(e) = inner.store.reclaim_expired(now).await {
            tracing::warn!(error = %e, "lease reclaim failed");
        }
        for rt in &inner.providers {
            let cfg = &rt.cfg;
            if let Some(cut) = now.checked_sub(cfg.retry.max_age) {
                let reason = format!("maximum age {}s reached", cfg.retry.max_age.as_secs());
                match inner
                    .store
                    .defer_older_than(&cfg.name, cut, &reason, now)
                    .await
                {
                    // This run decided it: the report and the metrics count it as deferred.
                    Ok(n) => {
                        rt.stats
                            .deferred
                            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(e) => {
                        tracing::warn!(provider = %cfg.name, error = %e, "deferral sweep failed")
                    }
                }
            }
            if let Some(f) = &cfg.failover {
                if let Some(cut) = now.checked_sub(f.after_pending) {
                    match inner.store.fail_over(&cfg.name, &f.to, cut, now).await {
                        Ok(0) => {}
                        Ok(n) => {
                            tracing::info!(from = %cfg.name, to = %f.to, items = n, "failed over")
                        }
                        Err(e) => {
                            tracing::warn!(provider = %cfg.name, error = %e, "fail-over failed")
                        }
                    }
                }
            }
        }
        let next = inner.clock.monotonic() + inner.opts.maintenance_interval;
        if sleep_or_stop(&inner, next, &mut stop).await {
            return;
        }
    }
}
