//! Virtual time over a real database: tokio's paused clock, held still while the store
//! works.
//!
//! With `start_paused`, tokio advances its clock to the next timer whenever every task is
//! waiting. SQLite runs on sqlx's own worker thread, so a dispatcher waiting for a claim
//! looks idle and the clock would jump mid-query. A `spawn_blocking` task inhibits that
//! auto-advance while it runs (tokio#5115), so [`StillStore`] runs each store call beside one
//! that waits for the call to finish: the database answers "instantly" in virtual time, and
//! everything else (pacing, pauses, leases, fail-over) keeps its exact schedule.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use abide_core::Clock;
use abide_outbox::{
    Completion, Counts, Enqueued, Item, ListFilter, NewItem, Receipt, ReceiptCounts, ReceiptState,
    RemoteCode, RequeueFilter, SendMark, State, Store, StoredAttempt,
};

/// Run `f` with tokio's paused clock held still.
pub async fn still<F: Future>(f: F) -> F::Output {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let hold = tokio::task::spawn_blocking(move || {
        let _ = rx.recv();
    });
    let out = f.await;
    drop(tx);
    let _ = hold.await;
    out
}

/// A store whose every call holds tokio's paused clock still, whose result writes
/// (completions and send marks) can be made to fail (a full disk, a read-only database)
/// with [`StillStore::fail_writes`], and whose reads can be raced by fail-overs
/// ([`StillStore::move_before_reads`]).
#[derive(Debug, Clone)]
pub struct StillStore<S>(pub S, Arc<AtomicBool>, Arc<Mutex<Option<(String, String)>>>);

impl<S> StillStore<S> {
    pub fn new(store: S) -> Self {
        Self(store, Arc::new(AtomicBool::new(false)), Arc::default())
    }

    /// From now on `complete` fails (`true`) or works again (`false`).
    pub fn fail_writes(&self, fail: bool) {
        self.1.store(fail, Ordering::SeqCst);
    }

    /// From now on, just before each `has_active` and `counts_by_state`, every waiting item
    /// of `a` moves to `b` (a fail-over), and the next read moves them back: the worst
    /// interleaving of fail-over moves with a drain check.
    pub fn move_before_reads(&self, a: &str, b: &str) {
        *self.2.lock().unwrap() = Some((a.to_owned(), b.to_owned()));
    }
}

impl<S: Store> StillStore<S> {
    /// The move [`StillStore::move_before_reads`] asked for, if any.
    async fn race(&self) {
        let pair = {
            let mut g = self.2.lock().unwrap();
            let next = g.as_ref().map(|(a, b)| (b.clone(), a.clone()));
            std::mem::replace(&mut *g, next)
        };
        if let Some((from, to)) = pair {
            let far = super::t0() + Duration::from_secs(100 * 365 * 86_400);
            self.0
                .fail_over(&from, &to, far, super::t0())
                .await
                .unwrap();
        }
    }
}

type R<T> = abide_outbox::Result<T>;

impl<S: Store> Store for StillStore<S> {
    fn enqueue(
        &self,
        items: &[NewItem],
        now: SystemTime,
    ) -> impl Future<Output = R<Vec<Enqueued>>> + Send {
        still(self.0.enqueue(items, now))
    }
    fn check_keys(&self, items: &[NewItem]) -> impl Future<Output = R<()>> + Send {
        still(self.0.check_keys(items))
    }
    fn claim(
        &self,
        provider: &str,
        owner: &str,
        now: SystemTime,
        lease: Duration,
        limit: usize,
    ) -> impl Future<Output = R<Vec<Item>>> + Send {
        still(self.0.claim(provider, owner, now, lease, limit))
    }
    fn complete(
        &self,
        completions: &[Completion],
        now: SystemTime,
    ) -> impl Future<Output = R<Vec<R<State>>>> + Send {
        let fail = self.1.load(Ordering::SeqCst);
        let write = self.0.complete(completions, now);
        still(async move {
            if fail {
                return Err(abide_outbox::Error::from(sqlx::Error::Io(
                    std::io::Error::other("database or disk is full (injected)"),
                )));
            }
            write.await
        })
    }
    fn mark_sent(&self, sends: &[SendMark]) -> impl Future<Output = R<Vec<bool>>> + Send {
        let fail = self.1.load(Ordering::SeqCst);
        let write = self.0.mark_sent(sends);
        still(async move {
            if fail {
                return Err(abide_outbox::Error::from(sqlx::Error::Io(
                    std::io::Error::other("database or disk is full (injected)"),
                )));
            }
            write.await
        })
    }
    fn reclaim_expired(&self, now: SystemTime) -> impl Future<Output = R<u64>> + Send {
        still(self.0.reclaim_expired(now))
    }
    fn expired_leases(&self, now: SystemTime) -> impl Future<Output = R<u64>> + Send {
        still(self.0.expired_leases(now))
    }
    fn reclaim_all_in_flight(&self, now: SystemTime) -> impl Future<Output = R<u64>> + Send {
        still(self.0.reclaim_all_in_flight(now))
    }
    fn defer_older_than(
        &self,
        provider: &str,
        cut: SystemTime,
        reason: &str,
        now: SystemTime,
    ) -> impl Future<Output = R<u64>> + Send {
        still(self.0.defer_older_than(provider, cut, reason, now))
    }
    fn requeue_deferred(
        &self,
        filter: &RequeueFilter,
        now: SystemTime,
    ) -> impl Future<Output = R<u64>> + Send {
        still(self.0.requeue_deferred(filter, now))
    }
    fn requeue_failed(
        &self,
        filter: &RequeueFilter,
        now: SystemTime,
    ) -> impl Future<Output = R<u64>> + Send {
        still(self.0.requeue_failed(filter, now))
    }
    fn cancel(&self, id: &str, now: SystemTime) -> impl Future<Output = R<()>> + Send {
        still(self.0.cancel(id, now))
    }
    fn fail_over(
        &self,
        from: &str,
        to: &str,
        cut: SystemTime,
        now: SystemTime,
    ) -> impl Future<Output = R<u64>> + Send {
        still(self.0.fail_over(from, to, cut, now))
    }
    fn counts_by_state(&self, provider: Option<&str>) -> impl Future<Output = R<Counts>> + Send {
        still(async move {
            self.race().await;
            self.0.counts_by_state(provider).await
        })
    }
    fn reason_counts(
        &self,
        state: Option<State>,
    ) -> impl Future<Output = R<Vec<(State, String, u64)>>> + Send {
        still(self.0.reason_counts(state))
    }
    fn list(&self, filter: &ListFilter) -> impl Future<Output = R<Vec<Item>>> + Send {
        still(self.0.list(filter))
    }
    fn oldest_pending_age(
        &self,
        now: SystemTime,
    ) -> impl Future<Output = R<Option<Duration>>> + Send {
        still(self.0.oldest_pending_age(now))
    }
    fn has_active(&self, providers: &[&str]) -> impl Future<Output = R<bool>> + Send {
        still(async move {
            self.race().await;
            self.0.has_active(providers).await
        })
    }
    fn next_due(&self, provider: &str) -> impl Future<Output = R<Option<SystemTime>>> + Send {
        still(self.0.next_due(provider))
    }
    fn get(&self, id: &str) -> impl Future<Output = R<Option<Item>>> + Send {
        still(self.0.get(id))
    }
    fn attempts(&self, id: &str) -> impl Future<Output = R<Vec<StoredAttempt>>> + Send {
        still(self.0.attempts(id))
    }
    fn remote_counts(
        &self,
        provider: Option<&str>,
    ) -> impl Future<Output = R<Vec<(RemoteCode, u64)>>> + Send {
        still(self.0.remote_counts(provider))
    }
    fn record_receipts(&self, receipts: &[Receipt]) -> impl Future<Output = R<()>> + Send {
        still(self.0.record_receipts(receipts))
    }
    fn receipt_counts(
        &self,
        provider: Option<&str>,
    ) -> impl Future<Output = R<ReceiptCounts>> + Send {
        still(self.0.receipt_counts(provider))
    }
    fn receipt_of(
        &self,
        id: &str,
    ) -> impl Future<Output = R<Option<(ReceiptState, SystemTime)>>> + Send {
        still(self.0.receipt_of(id))
    }
}

/// Wall and monotonic time read from tokio's (paused) clock, starting at `epoch`.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    epoch: SystemTime,
    base: tokio::time::Instant,
}

impl TokioClock {
    /// Wall time `epoch` now.
    pub fn new(epoch: SystemTime) -> Self {
        Self {
            epoch,
            base: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> SystemTime {
        self.epoch + (tokio::time::Instant::now() - self.base)
    }
    fn monotonic(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}
