//! The store is a precondition of sending: while results cannot be written, nothing new is
//! claimed or sent, and a fault that outlasts `store_fault_limit` stops the run.
//!
//! Sending while results cannot be recorded turns every answer into a duplicate later:
//! the item's lease ends, it is claimed again and sent again (a 5 s disk-full once caused
//! 8,066 duplicates for 3,000 messages). So every write the run depends on (the
//! writer's results, the marks written before each request goes out) goes through
//! the writer's `persist`, which reports each failure here; claimers and senders wait while it is
//! failing; the first successful write clears it.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

#[derive(Debug)]
pub(super) struct StoreHealth {
    state: Mutex<State>,
    /// Woken when the run must stop (a fault outlasted the limit).
    pub(super) fatal: Notify,
    /// Set when the run is asked to stop: write retries end then.
    stop: watch::Sender<bool>,
}

impl Default for StoreHealth {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            fatal: Notify::new(),
            stop: watch::channel(false).0,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    failing_since: Option<Instant>,
    last_error: Option<String>,
    /// How long the fault lasted, its cause, and whether the run was asked to stop.
    gave_up: Option<(Duration, String, bool)>,
}

impl StoreHealth {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A write failed at `now`; returns how long writes have been failing, and whether
    /// this failure began the episode (warn once).
    pub(super) fn failed(&self, now: Instant, error: &str) -> (Duration, bool) {
        let mut s = self.lock();
        let began = s.failing_since.is_none();
        let since = *s.failing_since.get_or_insert(now);
        s.last_error = Some(error.to_owned());
        (now.saturating_duration_since(since), began)
    }

    /// A write succeeded; returns how long the episode lasted, if there was one.
    pub(super) fn recovered(&self, now: Instant) -> Option<Duration> {
        let mut s = self.lock();
        s.last_error = None;
        s.failing_since
            .take()
            .map(|since| now.saturating_duration_since(since))
    }

    /// Since when results have been failing to be written, and the last error.
    pub(super) fn fault(&self) -> Option<(Instant, String)> {
        let s = self.lock();
        s.failing_since
            .map(|since| (since, s.last_error.clone().unwrap_or_default()))
    }

    /// Whether results cannot be written right now.
    pub(super) fn failing(&self) -> bool {
        self.lock().failing_since.is_some()
    }

    /// Stop the run: the fault lasted `lasted`.
    pub(super) fn give_up(&self, lasted: Duration) {
        self.record_give_up(lasted, false);
        self.fatal.notify_one();
    }

    /// The run was asked to stop while the fault lasted `lasted`: nothing more is retried.
    pub(super) fn give_up_on_stop(&self, lasted: Duration) {
        self.record_give_up(lasted, true);
    }

    fn record_give_up(&self, lasted: Duration, on_stop: bool) {
        let mut s = self.lock();
        let cause = s.last_error.clone().unwrap_or_default();
        // The first reason stands (a limit reached before the stop was asked).
        s.gave_up.get_or_insert((lasted, cause, on_stop));
    }

    /// Why the run stopped, if it did: how long the fault lasted, its cause, and whether
    /// it was asked to stop.
    pub(super) fn gave_up(&self) -> Option<(Duration, String, bool)> {
        self.lock().gave_up.clone()
    }

    /// A run begins: not asked to stop.
    pub(super) fn start(&self) {
        self.stop.send_replace(false);
    }

    /// The run is asked to stop: write retries end.
    pub(super) fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Whether the run is asked to stop.
    pub(super) fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once the run is asked to stop.
    pub(super) async fn stopped(&self) {
        let mut rx = self.stop.subscribe();
        let _ = rx.wait_for(|v| *v).await;
    }
}
