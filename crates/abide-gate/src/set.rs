//! [`GateSet`]: several gates decided together, with one lock, so a request is either
//! admitted by every gate or charged to none.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::gate::{valid_token, Gate, Kind, MAX_LEASE};
use crate::headers::{
    rate_limit_values, retry_after_secs, GateStatus, RATELIMIT, RATELIMIT_POLICY,
};
use crate::rate::{self, Cell};
use crate::{safe_trace, Error, Scope};

/// Rate entries kept before stale ones (already back to a full bucket) are swept.
const SWEEP_AT: usize = 4096;

/// Builds a [`GateSet`].
#[derive(Debug, Default)]
pub struct GateSetBuilder {
    gates: Vec<Gate>,
}

impl GateSetBuilder {
    /// Add a gate. Gates are evaluated in the order added; the order only matters for the
    /// order of header list members.
    pub fn with_gate(mut self, gate: Gate) -> Self {
        self.gates.push(gate);
        self
    }

    /// Build the set.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for a name or category that is not a lowercase token,
    /// [`Error::DuplicateGate`] when two gates share a name, [`Error::InvalidQuota`] for a
    /// concurrency lease that is zero (no limit at all) or longer than [`MAX_LEASE`].
    pub fn build(self) -> Result<GateSet, Error> {
        for (i, g) in self.gates.iter().enumerate() {
            if let Kind::Concurrency { lease, .. } = g.kind {
                if lease.is_zero() || lease > MAX_LEASE {
                    return Err(Error::InvalidQuota("lease must lie within (0, 1 day]"));
                }
            }
            for s in [&g.name, &g.category] {
                if !valid_token(s) {
                    return Err(Error::InvalidName(s.clone()));
                }
            }
            if self.gates[..i].iter().any(|o| o.name == g.name) {
                return Err(Error::DuplicateGate(g.name.clone()));
            }
        }
        Ok(GateSet {
            gates: self.gates,
            state: Mutex::new(State::default()),
            next_ticket: AtomicU64::new(1),
        })
    }
}

/// Several gates over shared state. `Send + Sync`: share one set with `Arc` between every
/// clone of a service, every worker and every connection, or limits multiply.
///
/// `Debug` shows the gates and how many callers are tracked, never the callers' keys.
pub struct GateSet {
    gates: Vec<Gate>,
    state: Mutex<State>,
    next_ticket: AtomicU64,
}

impl fmt::Debug for GateSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The state is keyed by raw API keys: show sizes only.
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("GateSet")
            .field("gates", &self.gates)
            .field("rate_entries", &st.cells.len())
            .field("slot_entries", &st.slots.len())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// Rate state per (gate, scope id).
    cells: HashMap<(usize, String), Cell>,
    /// Concurrency reservations per (gate, scope id), keyed by trace.
    slots: HashMap<(usize, String), HashMap<String, Slot>>,
}

#[derive(Debug)]
struct Slot {
    /// One ticket per acquisition still held; the slot is free when none is left.
    tickets: Vec<u64>,
    expires: Instant,
}

/// A held concurrency reservation. Releasing it is idempotent: only the acquisition that
/// received this exact ticket can give it back, so a stale or repeated release cannot free a
/// slot that now belongs to someone else.
///
/// `Debug` shows the scope and trace as [`crate::safe_trace`] hashes, never the raw key.
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    gate: usize,
    scope_id: String,
    trace: String,
    ticket: u64,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("gate", &self.gate)
            .field("scope", &safe_trace(&self.scope_id))
            .field("trace", &safe_trace(&self.trace))
            .field("ticket", &self.ticket)
            .finish()
    }
}

/// A request let through by every gate.
#[derive(Debug)]
#[must_use = "an admission may hold concurrency leases that must be released"]
pub struct Admission {
    leases: Vec<Lease>,
    statuses: Vec<GateStatus>,
}

impl Admission {
    /// Concurrency leases taken (empty without concurrency gates).
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// The state of every gate that applied, after this request.
    pub fn statuses(&self) -> &[GateStatus] {
        &self.statuses
    }

    /// `RateLimit-Policy` and `RateLimit` for a successful response.
    pub fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        insert_rate_limit(&mut h, &self.statuses);
        h
    }

    /// Hand the leases to a guard that releases them when dropped.
    pub fn into_guard(self, gates: Arc<GateSet>) -> LeaseGuard {
        LeaseGuard {
            gates,
            leases: self.leases,
        }
    }
}

/// A refusal by one or more gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Rejecting gates with their own reset (`GateStatus::reset` is the wait until that gate
    /// would admit); never empty.
    rejected: Vec<GateStatus>,
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

fn insert_rate_limit(h: &mut HeaderMap, statuses: &[GateStatus]) {
    if let Some((policy, limit)) = rate_limit_values(statuses) {
        h.insert(HeaderName::from_static(RATELIMIT_POLICY), policy);
        h.insert(HeaderName::from_static(RATELIMIT), limit);
    }
}

enum Pending {
    Rate {
        key: (usize, String),
        cell: Cell,
    },
    Slot {
        key: (usize, String),
        trace: String,
        expires: Instant,
    },
}

impl GateSet {
    /// Start building a set.
    pub fn builder() -> GateSetBuilder {
        GateSetBuilder::default()
    }

    /// The gates, in evaluation order.
    pub fn gates(&self) -> &[Gate] {
        &self.gates
    }

    /// Decide one request at `now` (a monotonic reading of the injected clock) without a
    /// trace: concurrency reservations get a fresh trace each time.
    ///
    /// # Errors
    /// [`Rejection`] when any gate refuses; nothing is charged then.
    pub fn check(
        &self,
        key: &str,
        account: Option<&str>,
        now: Instant,
    ) -> Result<Admission, Rejection> {
        self.check_traced(key, account, None, now)
    }

    /// Decide one request carrying `trace` (an idempotency key or request id). A trace that
    /// already holds a concurrency slot shares it instead of taking a second one; in an
    /// account-scoped gate only when it comes from the same key.
    ///
    /// # Errors
    /// [`Rejection`] when any gate refuses; nothing is charged then.
    pub fn check_traced(
        &self,
        key: &str,
        account: Option<&str>,
        trace: Option<&str>,
        now: Instant,
    ) -> Result<Admission, Rejection> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        let trace = trace.map_or_else(|| format!("#anon-{ticket}"), str::to_owned);
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.cells.len() > SWEEP_AT {
            let gates = &self.gates;
            st.cells.retain(|(i, _), c| match &gates[*i].kind {
                Kind::Rate(q) => !c.idle(q, now),
                Kind::Concurrency { .. } => false,
            });
        }
        let mut pending = Vec::new();
        let mut statuses = Vec::new();
        let mut rejected = Vec::new();
        for (i, g) in self.gates.iter().enumerate() {
            let Some(id) = scope_id(g.scope, key, account) else {
                continue;
            };
            let skey = (i, id.to_owned());
            match &g.kind {
                Kind::Rate(q) => {
                    let cell = st.cells.get(&skey).copied().unwrap_or_default();
                    match rate::admit(q, cell, now) {
                        Err(v) => {
                            rejected.push(status(g, q.limit(), 0, Some(q.window()), v.reset));
                        }
                        Ok((cell, v)) => {
                            statuses.push(status(
                                g,
                                q.limit(),
                                v.remaining,
                                Some(q.window()),
                                v.reset,
                            ));
                            pending.push(Pending::Rate { key: skey, cell });
                        }
                    }
                }
                Kind::Concurrency {
                    limit,
                    lease,
                    retry_hint,
                } => {
                    // Traces are chosen by callers: within an account, key k1's "1" and
                    // key k2's "1" are different requests.
                    let trace = match g.scope {
                        Scope::Key => trace.clone(),
                        Scope::Account => format!("{key}\u{0}{trace}"),
                    };
                    let slots = st.slots.entry(skey.clone()).or_default();
                    slots.retain(|_, s| s.expires > now);
                    let held = slots.contains_key(&trace);
                    let used = slots.len() as u32;
                    if held || used < limit.get() {
                        let after = if held { used } else { used + 1 };
                        statuses.push(status(
                            g,
                            limit.get(),
                            limit.get() - after,
                            None,
                            Duration::ZERO,
                        ));
                        pending.push(Pending::Slot {
                            key: skey,
                            trace,
                            expires: now + *lease,
                        });
                    } else {
                        let soonest = slots.values().map(|s| s.expires - now).min();
                        let wait = soonest.map_or(*retry_hint, |e| std::cmp::min(e, *retry_hint));
                        rejected.push(status(g, limit.get(), 0, None, wait));
                    }
                }
            }
        }
        if !rejected.is_empty() {
            return Err(Rejection { rejected });
        }
        let mut leases = Vec::new();
        for p in pending {
            match p {
                Pending::Rate { key, cell } => {
                    st.cells.insert(key, cell);
                }
                Pending::Slot {
                    key,
                    trace,
                    expires,
                } => {
                    let slot = st
                        .slots
                        .entry(key.clone())
                        .or_default()
                        .entry(trace.clone())
                        .or_insert_with(|| Slot {
                            tickets: Vec::new(),
                            expires,
                        });
                    slot.tickets.push(ticket);
                    slot.expires = std::cmp::max(slot.expires, expires);
                    leases.push(Lease {
                        gate: key.0,
                        scope_id: key.1,
                        trace,
                        ticket,
                    });
                }
            }
        }
        Ok(Admission { leases, statuses })
    }

    /// Give a lease back. Returns whether this call freed anything; releasing twice, releasing
    /// after the lease expired, or releasing a lease that is not held does nothing.
    pub fn release(&self, lease: &Lease) -> bool {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (lease.gate, lease.scope_id.clone());
        let Some(slots) = st.slots.get_mut(&key) else {
            return false;
        };
        let Some(slot) = slots.get_mut(&lease.trace) else {
            return false;
        };
        let Some(pos) = slot.tickets.iter().position(|t| *t == lease.ticket) else {
            return false;
        };
        slot.tickets.swap_remove(pos);
        if slot.tickets.is_empty() {
            slots.remove(&lease.trace);
            if slots.is_empty() {
                st.slots.remove(&key);
            }
        }
        true
    }

    /// The state of every gate that applies to `key`/`account` at `now`, **without charging
    /// anything**: a quota endpoint must answer while the caller is exhausted and must not
    /// change the quota it reports.
    pub fn quota(&self, key: &str, account: Option<&str>, now: Instant) -> Vec<GateStatus> {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for (i, g) in self.gates.iter().enumerate() {
            let Some(id) = scope_id(g.scope, key, account) else {
                continue;
            };
            let skey = (i, id.to_owned());
            match &g.kind {
                Kind::Rate(q) => {
                    let cell = st.cells.get(&skey).copied().unwrap_or_default();
                    let v = rate::peek(q, cell, now);
                    out.push(status(g, q.limit(), v.remaining, Some(q.window()), v.reset));
                }
                Kind::Concurrency { limit, .. } => {
                    let used = st
                        .slots
                        .get(&skey)
                        .map_or(0, |s| s.values().filter(|s| s.expires > now).count());
                    let left = limit.get().saturating_sub(used as u32);
                    out.push(status(g, limit.get(), left, None, Duration::ZERO));
                }
            }
        }
        out
    }
}

fn scope_id<'a>(scope: Scope, key: &'a str, account: Option<&'a str>) -> Option<&'a str> {
    match scope {
        Scope::Key => Some(key),
        Scope::Account => account,
    }
}

fn status(
    g: &Gate,
    limit: u32,
    remaining: u32,
    window: Option<Duration>,
    reset: Duration,
) -> GateStatus {
    GateStatus {
        name: g.name.clone(),
        category: g.category.clone(),
        limit,
        remaining,
        window_secs: window.map(crate::headers::ceil_secs),
        reset,
    }
}

/// Releases its leases when dropped: put it where the request's life ends (a response body,
/// a handler future) so a completed, failed or abandoned request frees its slot.
#[derive(Debug)]
pub struct LeaseGuard {
    gates: Arc<GateSet>,
    leases: Vec<Lease>,
}

impl LeaseGuard {
    /// Release now (idempotent; dropping afterwards does nothing more).
    pub fn release(&mut self) {
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
