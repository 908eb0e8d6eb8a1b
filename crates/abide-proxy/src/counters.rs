//! One provider's counters ([`ProviderMetrics`]), updated as requests pass.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Upper bounds of the wait histogram, in seconds.
pub(crate) const WAIT_BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0];

/// One provider's counters.
#[derive(Debug, Default)]
pub(crate) struct ProviderMetrics {
    pub(crate) answers: Mutex<BTreeMap<u16, u64>>,
    pub(crate) upstream: Mutex<BTreeMap<u16, u64>>,
    /// Attempts that got no answer (refused, reset, timed out).
    pub(crate) no_response: AtomicU64,
    /// Cumulative bucket counts, then the count of all observations.
    pub(crate) wait_buckets: [AtomicU64; WAIT_BUCKETS.len()],
    pub(crate) wait_count: AtomicU64,
    /// Sum of waits, in microseconds.
    pub(crate) wait_sum_us: AtomicU64,
}

impl ProviderMetrics {
    /// The proxy answered a client with `status`.
    pub(crate) fn answered(&self, status: u16) {
        *self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(status)
            .or_default() += 1;
    }

    /// The upstream answered an attempt with `status`.
    pub(crate) fn upstream(&self, status: u16) {
        *self
            .upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(status)
            .or_default() += 1;
    }

    /// An attempt got no answer.
    pub(crate) fn no_response(&self) {
        self.no_response.fetch_add(1, Ordering::Relaxed);
    }

    /// A request was held for `wait` in the proxy (its time inside minus its time on the
    /// wire).
    pub(crate) fn waited(&self, wait: Duration) {
        let s = wait.as_secs_f64();
        for (i, b) in WAIT_BUCKETS.iter().enumerate() {
            if s <= *b {
                self.wait_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.wait_count.fetch_add(1, Ordering::Relaxed);
        self.wait_sum_us
            .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
    }
}
