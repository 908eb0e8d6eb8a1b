//! The drained run: deliver until the input is all in and nothing of a configured
//! provider is left to send, then wait (for a while) for the delivery receipts of what
//! was accepted; stop early when a provider cannot send again this run, the input
//! failed, or the caller says so.
//!
//! Drained is decided in one consistent read of the whole outbox ([`Dispatcher::is_drained`]):
//! asked provider by provider, an item failing over from a provider not yet asked to one
//! already asked would be missed, and the run would end with it waiting.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use super::Dispatcher;
use crate::error::Result;
use crate::progress::Progress;
use crate::store::Store;

/// How often a drained run reads its own counters while it holds items: the run ends
/// this soon after its last answer is recorded.
const DRAIN_POLL: Duration = Duration::from_millis(20);
/// How often it asks the store while it holds nothing in flight but the outbox is not
/// drained (retries waiting for their time, another sender's items), and how often it
/// counts receipts while it waits for them.
const DRAIN_CHECK: Duration = Duration::from_millis(250);

/// Where the input of a drained run stands: a run may deliver while its input is still
/// being enqueued (the first chunk goes out while the rest is written), so it is drained
/// only once the input is all in, and it stops if enqueueing fails.
#[derive(Debug, Clone)]
pub struct Feed(watch::Receiver<FeedState>);

/// See [`Feed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedState {
    /// Items are still being enqueued.
    Open,
    /// Every item is in (or there was no input).
    Complete,
    /// Enqueueing failed; the caller says why.
    Broken,
}

impl Feed {
    /// Nothing more will be enqueued by this run.
    pub fn complete() -> Self {
        Self(watch::channel(FeedState::Complete).1)
    }

    /// A feed still open, and what closes it.
    pub fn open() -> (FeedCloser, Self) {
        let (tx, rx) = watch::channel(FeedState::Open);
        (FeedCloser(tx), Self(rx))
    }

    fn state(&self) -> FeedState {
        *self.0.borrow()
    }
}

/// Closes a [`Feed`]: [`FeedCloser::complete`] or [`FeedCloser::broken`]. Dropped while
/// the feed is open, it breaks it: nothing more will come.
#[derive(Debug)]
pub struct FeedCloser(watch::Sender<FeedState>);

impl FeedCloser {
    /// Every item is in.
    pub fn complete(self) {
        self.0.send_replace(FeedState::Complete);
    }

    /// Enqueueing failed: the run stops as if asked to.
    pub fn broken(self) {
        self.0.send_replace(FeedState::Broken);
    }
}

impl Drop for FeedCloser {
    fn drop(&mut self) {
        self.0.send_if_modified(|s| {
            let open = *s == FeedState::Open;
            if open {
                *s = FeedState::Broken;
            }
            open
        });
    }
}

/// Why a drained run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// The input is all in and nothing of a configured provider is `QUEUED`, `IN_FLIGHT`
    /// or `PENDING` (and the receipt wait is over).
    Drained,
    /// The caller's `shutdown` resolved (a Ctrl-C, a SIGTERM).
    Stopped,
    /// A provider will not send again this run (an SMPP bind refused for good,
    /// [`Dispatcher::suspended`]); its items wait for the next run.
    Suspended,
    /// The input failed ([`FeedState::Broken`]): delivery stopped as when asked to, and
    /// the caller reports why.
    InputFailed,
    /// A provider has not answered once this run for
    /// [`DispatcherOptions::unreachable_after`](super::DispatcherOptions::unreachable_after)
    /// ([`Dispatcher::unreachable`] says where and why); its items wait for the next run.
    Unreachable,
}

impl<S: Store> Dispatcher<S> {
    /// Deliver until drained: `feed` complete and nothing of a configured provider
    /// `QUEUED`, `IN_FLIGHT` or `PENDING` ([`Dispatcher::is_drained`]; deferred and failed
    /// items do not keep it running); then, for up to `receipt_wait`, until every provider
    /// whose remote sends delivery receipts has one for each `SUBMITTED` item (the
    /// connection stays up and receipts are stored meanwhile). Stops early, as
    /// [`Dispatcher::run_until`] does, when `shutdown` resolves, a provider is suspended,
    /// or `feed` breaks. Returns the final [`Progress`] and why the run ended.
    ///
    /// # Errors
    /// As [`Dispatcher::run_until`]. Database errors while polling read as "not yet".
    pub async fn run_drained(
        &self,
        feed: Feed,
        receipt_wait: Duration,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(Progress, Ending)> {
        let ending = Mutex::new(Ending::Stopped);
        let stop = async {
            let why = tokio::select! {
                why = self.drain(feed, receipt_wait) => why,
                () = shutdown => {
                    // The caller's stop ends the waits for a database refusing writes;
                    // the run's own end (drained) lets the last results be written.
                    self.inner.health.stop();
                    Ending::Stopped
                }
            };
            *ending.lock().unwrap_or_else(PoisonError::into_inner) = why;
        };
        let progress = self.run(stop, false).await?;
        let why = *ending.lock().unwrap_or_else(PoisonError::into_inner);
        Ok((progress, why))
    }

    /// Deliver until drained (nothing more comes in, no receipt wait) or a provider is
    /// suspended, then return the final [`Progress`]; see [`Dispatcher::run_drained`].
    ///
    /// # Errors
    /// As [`Dispatcher::run_until`].
    pub async fn run_until_drained(&self) -> Result<Progress> {
        let run = self.run_drained(Feed::complete(), Duration::ZERO, std::future::pending());
        Ok(run.await?.0)
    }

    /// Whether nothing of a configured provider is `QUEUED`, `IN_FLIGHT` or `PENDING`:
    /// one read of the whole outbox ([`Store::has_active`]), so an item moving between
    /// providers (a fail-over) is seen on one side or the other.
    ///
    /// # Errors
    /// Database errors.
    pub async fn is_drained(&self) -> Result<bool> {
        let names: Vec<&str> = self
            .inner
            .providers
            .iter()
            .map(|rt| rt.cfg.name.as_str())
            .collect();
        Ok(!self.inner.store.has_active(&names).await?)
    }

    /// Whether every provider whose remote sends delivery receipts has one for each of
    /// its `SUBMITTED` items (true without such providers). A database error reads as
    /// "not yet".
    async fn receipts_in(&self) -> bool {
        let store = &self.inner.store;
        for rt in &self.inner.providers {
            if !rt.cfg.transport.settings().delivers_receipts() {
                continue;
            }
            let name = Some(rt.cfg.name.as_str());
            let (Ok(c), Ok(r)) = (
                store.counts_by_state(name).await,
                store.receipt_counts(name).await,
            ) else {
                return false;
            };
            if r.matched() < c.submitted {
                return false;
            }
        }
        true
    }

    /// Resolves when the run should end, saying why.
    async fn drain(&self, feed: Feed, receipt_wait: Duration) -> Ending {
        let inner = &self.inner;
        let sleep = |d: Duration| inner.sleeper.sleep_until(inner.clock.monotonic() + d);
        let mut wait = DRAIN_POLL;
        loop {
            sleep(wait).await;
            // A provider that cannot send this run would keep its items (and the run)
            // waiting for ever: stop, they wait for the next run.
            if inner.providers.iter().any(|rt| rt.suspended().is_some()) {
                return Ending::Suspended;
            }
            if !self.unreachable().is_empty() {
                return Ending::Unreachable;
            }
            match feed.state() {
                FeedState::Open => continue,
                FeedState::Broken => return Ending::InputFailed,
                FeedState::Complete => {}
            }
            // While this run holds items it is not drained: only its own counters are
            // read then, and the store is asked once it holds none.
            if self.totals().in_flight > 0 {
                wait = DRAIN_POLL;
                continue;
            }
            if self.is_drained().await.unwrap_or(false) {
                break;
            }
            wait = DRAIN_CHECK;
        }
        let until = inner.clock.monotonic() + receipt_wait;
        while inner.clock.monotonic() < until && !self.receipts_in().await {
            let next = (inner.clock.monotonic() + DRAIN_CHECK).min(until);
            inner.sleeper.sleep_until(next).await;
        }
        Ending::Drained
    }
}
