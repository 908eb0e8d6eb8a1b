//! Counters that keep gate rejections, application 429s, other 4xx and 5xx apart: a gate's
//! own refusals say how hard callers push; the rest say how the application is doing.
//! Requests a delaying gate held are counted apart from both: they were admitted late, not
//! refused.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use http::StatusCode;

/// Live counters, shared by every clone of a gate service.
#[derive(Debug, Default)]
pub struct GateMetrics {
    admitted: AtomicU64,
    delayed: AtomicU64,
    delay_us: AtomicU64,
    abandoned: AtomicU64,
    rejected: Mutex<BTreeMap<String, u64>>,
    ok: AtomicU64,
    app_429: AtomicU64,
    other_4xx: AtomicU64,
    server_5xx: AtomicU64,
}

/// A point-in-time copy of [`GateMetrics`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GateCounts {
    /// Requests every gate admitted (served at once, or after a delay).
    pub admitted: u64,
    /// Admitted requests a delaying gate held until their slot and then served.
    pub delayed: u64,
    /// Total time those requests were held, in microseconds.
    pub delay_us: u64,
    /// Admitted requests whose caller went away while held (their slots were given back).
    pub abandoned: u64,
    /// Gate rejections (429 sent by the gate) by reason category.
    pub rejected_by_category: BTreeMap<String, u64>,
    /// Admitted requests the application answered with 1xx, 2xx or 3xx.
    pub ok: u64,
    /// 429s sent by the application itself, not by a gate.
    pub app_429: u64,
    /// Other 4xx from the application.
    pub other_4xx: u64,
    /// 5xx from the application.
    pub server_5xx: u64,
}

impl GateMetrics {
    pub(crate) fn admitted(&self) {
        self.admitted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn delayed(&self, held: std::time::Duration) {
        self.delayed.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(held.as_micros()).unwrap_or(u64::MAX);
        self.delay_us.fetch_add(us, Ordering::Relaxed);
    }

    pub(crate) fn abandoned(&self) {
        self.abandoned.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn rejected(&self, category: &str) {
        let mut m = self.rejected.lock().unwrap_or_else(PoisonError::into_inner);
        *m.entry(category.to_owned()).or_default() += 1;
    }

    pub(crate) fn response(&self, status: StatusCode) {
        let c = if status == StatusCode::TOO_MANY_REQUESTS {
            &self.app_429
        } else if status.is_client_error() {
            &self.other_4xx
        } else if status.is_server_error() {
            &self.server_5xx
        } else {
            &self.ok
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Copy the counters.
    pub fn snapshot(&self) -> GateCounts {
        GateCounts {
            admitted: self.admitted.load(Ordering::Relaxed),
            delayed: self.delayed.load(Ordering::Relaxed),
            delay_us: self.delay_us.load(Ordering::Relaxed),
            abandoned: self.abandoned.load(Ordering::Relaxed),
            rejected_by_category: self
                .rejected
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            ok: self.ok.load(Ordering::Relaxed),
            app_429: self.app_429.load(Ordering::Relaxed),
            other_4xx: self.other_4xx.load(Ordering::Relaxed),
            server_5xx: self.server_5xx.load(Ordering::Relaxed),
        }
    }
}
