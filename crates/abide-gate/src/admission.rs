//! What a decision hands back: an [`Admission`] (with its [`Lease`]s) or a [`Rejection`],
//! and the [`LeaseGuard`] that gives leases back when a request ends.
//!
//! An admission carries numbers, not text: names and header values are formatted only when
//! a response asks for them ([`Admission::headers`], [`Admission::statuses`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use smallvec::SmallVec;

use crate::gate::Kind;
use crate::headers::{
    ceil_secs, rate_limit_fields, rate_limit_values, retry_after_secs, GateStatus, Member,
    RATELIMIT, RATELIMIT_POLICY,
};
use crate::lease::Lease;
use crate::set::GateSet;
use crate::tally::{status, Tally};

/// A request let through by every gate. Borrows its [`GateSet`] for the gate names, so
/// nothing is copied until a response needs it.
#[must_use = "an admission may hold concurrency leases that must be released"]
pub struct Admission<'a> {
    pub(crate) set: &'a GateSet,
    pub(crate) leases: SmallVec<[Lease; 2]>,
    pub(crate) tallies: SmallVec<[Tally; 4]>,
    /// Reserved future slots at delaying gates, while the request waits for them.
    pub(crate) holds: SmallVec<[Lease; 1]>,
    /// How long the request must wait before it is served, in nanoseconds.
    pub(crate) delay_ns: u64,
}

impl fmt::Debug for Admission<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("leases", &self.leases)
            .field("delay", &self.delay())
            .field("statuses", &self.statuses())
            .finish()
    }
}

impl<'a> Admission<'a> {
    pub(crate) fn new(set: &'a GateSet) -> Self {
        Self {
            set,
            leases: SmallVec::new(),
            tallies: SmallVec::new(),
            holds: SmallVec::new(),
            delay_ns: 0,
        }
    }

    /// How long the request must wait before it is served: zero unless a delaying gate
    /// ([`Gate::with_delay`]) reserved a slot ahead ([`GateSet::check_delayed`]). Serving it
    /// sooner breaks the rate.
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay_ns)
    }

    /// Concurrency leases taken (empty without concurrency gates).
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// The state of every gate that applied, after this request (built on each call).
    pub fn statuses(&self) -> Vec<GateStatus> {
        let gates = self.set.gates();
        self.ordered()
            .iter()
            .map(|t| {
                status(
                    &gates[t.gate as usize],
                    t.remaining,
                    Duration::from_nanos(t.reset_ns),
                )
            })
            .collect()
    }

    /// `RateLimit-Policy` and `RateLimit` for a successful response.
    pub fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        let gates = self.set.gates();
        let tallies = self.ordered();
        let members = tallies.iter().map(|t| {
            let g = &gates[t.gate as usize];
            let (limit, window) = g.limit_and_window();
            Member {
                name: &g.name,
                limit,
                window_secs: window.map(ceil_secs),
                remaining: t.remaining,
                reset: Duration::from_nanos(t.reset_ns),
            }
        });
        if let Some((policy, limit)) = rate_limit_fields(members) {
            h.insert(HeaderName::from_static(RATELIMIT_POLICY), policy);
            h.insert(HeaderName::from_static(RATELIMIT), limit);
        }
        h
    }

    /// The tallies in the set's order of gates (a decision visits them scope by scope),
    /// with the units a GCRA gate left computed from its reset.
    fn ordered(&self) -> SmallVec<[Tally; 4]> {
        let gates = self.set.gates();
        let mut t = self.tallies.clone();
        t.sort_unstable_by_key(|t| t.gate);
        for t in t.iter_mut().filter(|t| t.remaining == Tally::DERIVED) {
            if let Kind::Rate(q) = &gates[t.gate as usize].kind {
                t.remaining = crate::rate::gcra_units(q, t.reset_ns);
            }
        }
        t
    }

    /// Hand the leases (and the slots reserved ahead, while the request waits) to a guard
    /// that releases them when dropped. `gates` must be the set that admitted the request.
    pub fn into_guard(self, gates: Arc<GateSet>) -> LeaseGuard {
        LeaseGuard {
            gates,
            leases: self.leases,
            holds: self.holds,
        }
    }
}

/// A refusal by one or more gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Rejecting gates with their own reset (`GateStatus::reset` is the wait until that gate
    /// would admit); never empty.
    pub(crate) rejected: Vec<GateStatus>,
}

impl Rejection {
    /// Every gate that refused, each with its own reset.
    pub fn rejected(&self) -> &[GateStatus] {
        &self.rejected
    }

    /// Time until **all** rejecting gates would admit.
    pub fn wait(&self) -> Duration {
        self.rejected
            .iter()
            .map(|s| s.reset)
            .fold(Duration::ZERO, std::cmp::max)
    }

    /// `Retry-After` in whole seconds: [`Rejection::wait`] rounded up, at least 1
    /// (RFC 9110 §10.2.3).
    pub fn retry_after_secs(&self) -> u64 {
        retry_after_secs(self.wait())
    }

    /// The reason category told to the client: the gate that holds the caller longest.
    pub fn category(&self) -> &str {
        self.rejected
            .iter()
            .max_by_key(|s| s.reset)
            .map_or("rate", |s| s.category.as_str())
    }

    /// `Retry-After`, `RateLimit-Policy` and `RateLimit` (rejecting gates only).
    pub fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::RETRY_AFTER,
            HeaderValue::from(self.retry_after_secs()),
        );
        insert_rate_limit(&mut h, &self.rejected);
        h
    }

    /// The JSON error body: the reason category and nothing else (no ids, capacity or
    /// topology), e.g. `{"error":"rate_limited","reason":"key_rate"}`.
    pub fn body(&self) -> String {
        serde_json::json!({"error": "rate_limited", "reason": self.category()}).to_string()
    }
}

pub(crate) fn insert_rate_limit(h: &mut HeaderMap, statuses: &[GateStatus]) {
    if let Some((policy, limit)) = rate_limit_values(statuses) {
        h.insert(HeaderName::from_static(RATELIMIT_POLICY), policy);
        h.insert(HeaderName::from_static(RATELIMIT), limit);
    }
}

/// Releases its leases when dropped: put it where the request's life ends (a response body,
/// a handler future) so a completed, failed or abandoned request frees its slot.
#[derive(Debug)]
pub struct LeaseGuard {
    gates: Arc<GateSet>,
    leases: SmallVec<[Lease; 2]>,
    holds: SmallVec<[Lease; 1]>,
}

impl LeaseGuard {
    /// The request's wait ([`Admission::delay`]) is over and it is served now: its reserved
    /// slots are spent and no longer given back (its concurrency leases still are).
    pub fn arrived(&mut self) {
        for h in self.holds.drain(..) {
            self.gates.settle(&h);
        }
    }

    /// Whether the request still holds slots reserved ahead (it has not
    /// [`LeaseGuard::arrived`]).
    pub fn waiting(&self) -> bool {
        !self.holds.is_empty()
    }

    /// Release now (idempotent; dropping afterwards does nothing more). A request still
    /// waiting gives its reserved slots back, so the next request may take them.
    pub fn release(&mut self) {
        for h in self.holds.drain(..) {
            self.gates.release(&h);
        }
        for l in self.leases.drain(..) {
            self.gates.release(&l);
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.release();
    }
}
