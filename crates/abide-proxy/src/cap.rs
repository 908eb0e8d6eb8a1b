//! The connection cap of a listener, one rule for `abide serve` and `abide proxy`: at most
//! `max` connections are open; at the cap a new one closes the connection idle longest
//! (no request in progress), never a busy one, and is refused only while every open
//! connection has a request in progress. Each event is logged at most once per 10 s, with
//! how many connections it affected and the flag that sets the cap.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;
// The clock of the timers of the listeners (sweeps), paused with them in tests.
use tokio::time::Instant;

/// Default most open connections of a listener: well below the common 1,024 open-file
/// limit, which the database, the providers' connections and the logs share.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// One open connection, as the accept loop sees it.
#[derive(Debug)]
pub struct Slot {
    /// Requests in progress.
    busy: AtomicUsize,
    /// Since when no request is in progress (its accept, or its last answer).
    idle_since: Mutex<Instant>,
    /// Asks the connection to close (after the request in progress, if any).
    close: Notify,
    /// Asked already: not a candidate again.
    closing: AtomicBool,
}

impl Slot {
    fn new() -> Self {
        Self {
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            close: Notify::new(),
            closing: AtomicBool::new(false),
        }
    }

    /// A request starts on this connection.
    pub fn request_started(&self) {
        self.busy.fetch_add(1, Ordering::SeqCst);
    }

    /// A request of this connection was answered: it is idle from now if none is left.
    pub fn request_finished(&self) {
        *self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether a request is in progress.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst) > 0
    }

    /// Resolves when the connection is asked to close (the cap, an idle timeout, a
    /// shutdown); a request asked before the wait began counts.
    pub fn close_asked(&self) -> Notified<'_> {
        self.close.notified()
    }

    /// Ask the connection to close.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.close.notify_one();
    }

    /// How long no request has been in progress; `None` while one is, or once asked to
    /// close.
    fn idle_for(&self, now: Instant) -> Option<Duration> {
        if self.is_busy() || self.closing.load(Ordering::SeqCst) {
            return None;
        }
        let since = *self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(now.saturating_duration_since(since))
    }
}

/// The open connections of one listener.
#[derive(Debug, Default)]
pub struct Conns {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Slot>>>,
}

impl Conns {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Room for one more under `max`: closes the connection idle longest when full.
    /// `false` when every open connection has a request in progress.
    pub fn make_room(&self, max: usize) -> bool {
        let open = self.lock();
        if open.len() < max {
            return true;
        }
        let now = Instant::now();
        let idlest = open
            .values()
            .filter_map(|s| s.idle_for(now).map(|d| (d, s)))
            .max_by_key(|(d, _)| *d);
        match idlest {
            Some((_, slot)) => {
                slot.close();
                true
            }
            None => false,
        }
    }

    /// How many are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// A new connection's slot and its id (for [`Conns::remove`]).
    pub fn insert(&self) -> (u64, Arc<Slot>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot::new());
        self.lock().insert(id, Arc::clone(&slot));
        (id, slot)
    }

    /// The connection `id` ended.
    pub fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Close every connection idle for `timeout` or more.
    pub fn close_idle(&self, timeout: Duration) {
        let now = Instant::now();
        for slot in self.lock().values() {
            if slot.idle_for(now).is_some_and(|d| d >= timeout) {
                slot.close();
            }
        }
    }

    /// Ask every connection to close (shutting down).
    pub fn close_all(&self) {
        for slot in self.lock().values() {
            slot.close();
        }
    }
}

/// Logs the connection cap at most once per 10 s, with how many it affected.
#[derive(Debug)]
pub struct CapLog {
    /// The flag that sets the cap, named in the log line (`--max-connections`).
    flag: &'static str,
    last: Mutex<Option<Instant>>,
    evicted: AtomicU64,
    refused: AtomicU64,
}

impl CapLog {
    /// A log for the cap set by `flag`.
    pub fn new(flag: &'static str) -> Self {
        Self {
            flag,
            last: Mutex::new(None),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// A new connection at the cap `max`: it closed an idle one, or (`refused`) was
    /// refused because every open one was busy.
    pub fn note(&self, refused: bool, max: usize) {
        let counter = if refused {
            &self.refused
        } else {
            &self.evicted
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(10)) {
            return;
        }
        *last = Some(now);
        // Taken before the macro: it evaluates its fields only when a subscriber listens.
        let closed_idle = self.evicted.swap(0, Ordering::Relaxed);
        let refused_busy = self.refused.swap(0, Ordering::Relaxed);
        tracing::warn!(
            max_connections = max,
            closed_idle,
            refused_busy,
            flag = self.flag,
            "connection cap reached: new connections close the one idle longest, or are \
             refused while every connection has a request in progress ({})",
            self.flag
        );
    }
}

/// Admit a connection just accepted under the cap `max`: `None` when it must be dropped
/// (every open one is busy), else its slot; at the cap, logs through `log`.
pub fn admit(conns: &Conns, log: &CapLog, max: usize) -> Option<(u64, Arc<Slot>)> {
    if !conns.make_room(max) {
        log.note(true, max);
        return None;
    }
    if conns.len() >= max {
        log.note(false, max);
    }
    Some(conns.insert())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn at_the_cap_the_idlest_connection_makes_room_never_a_busy_one() {
        let conns = Conns::default();
        let slot = |busy: usize, idle: Duration| {
            let (_, s) = conns.insert();
            s.busy.store(busy, Ordering::SeqCst);
            *s.idle_since.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now() - idle;
            s
        };
        let old = slot(0, Duration::from_secs(5));
        let busy = slot(1, Duration::from_secs(50));
        let young = slot(0, Duration::from_secs(1));
        assert!(conns.make_room(4));
        assert!(conns.make_room(3));
        // The idlest was asked to close; a permit is stored for its next wait.
        let asked = |s: &Slot| futures_poll(s.close_asked());
        assert!(asked(&old) && !asked(&busy) && !asked(&young));
        // The next one asks another: the one already closing is no candidate.
        assert!(conns.make_room(3));
        assert!(asked(&young) && !asked(&busy));
        assert!(!conns.make_room(3), "every other connection busy: refuse");
        let log = CapLog::new("--max-connections");
        assert!(admit(&conns, &log, 3).is_none());
        assert_eq!(log.refused.load(Ordering::Relaxed), 0, "logged and reset");
        assert!(admit(&conns, &log, 4).is_some());
        assert_eq!(conns.len(), 4);
    }

    /// Whether `f` is ready at its first poll.
    fn futures_poll<F: Future>(f: F) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        f.as_mut().poll(&mut cx).is_ready()
    }
}
