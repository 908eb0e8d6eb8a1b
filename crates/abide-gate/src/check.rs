//! Admitting a request through a [`GateSet`]: lock the key's entry, then the account's,
//! ask every gate whether it admits, and charge them all only if all do.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use papaya::LocalGuard;
use smallvec::{smallvec, SmallVec};

use crate::admission::{Admission, Rejection};
use crate::gate::{Algorithm, Kind};
use crate::lease::Lease;
use crate::rate::{self, Cell};
use crate::set::GateSet;
use crate::table::{self, Entry, GateState, MutexGuard, Slot, State, TraceId};
use crate::tally::{status, Tally};
use crate::Scope;

/// A caller's entry with its state locked.
pub(crate) type Held<'g> = (&'g Arc<Entry>, MutexGuard<'g, State>);

impl GateSet {
    /// The live entry of `id` in `scope`, locked; `None` if a sweep killed the one found
    /// (it is unlinked then: look again).
    fn hold<'g>(
        &self,
        scope: Scope,
        id: &str,
        now: u64,
        guard: &'g LocalGuard<'_>,
    ) -> Option<Held<'g>> {
        let idle = |s: Scope, i: usize, c: &Cell| self.cell_idle(s, i, c, now);
        let e = self
            .table
            .entry(scope, id, || self.fresh(scope), &idle, now, guard);
        let s = e.lock();
        if s.dead {
            drop(s);
            self.table.unlink(scope, e, guard);
            return None;
        }
        Some((e, s))
    }

    /// Decide one request at `now` (a monotonic reading of the injected clock) without a
    /// trace: each admitted request takes its own concurrency slots.
    ///
    /// # Errors
    /// [`Rejection`] when any gate refuses; nothing is charged then.
    #[inline]
    pub fn check(
        &self,
        key: &str,
        account: Option<&str>,
        now: Instant,
    ) -> Result<Admission<'_>, Rejection> {
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
    ) -> Result<Admission<'_>, Rejection> {
        self.decide(key, account, trace, now, false)
    }

    /// Decide one request, letting it wait for its slot at delaying gates
    /// ([`Gate::with_delay`]): the admission's [`Admission::delay`] says how long the caller
    /// must hold it before serving it. Hand it to [`Admission::into_guard`] before waiting,
    /// so a waiter that is dropped gives its place back at once, and call
    /// [`crate::LeaseGuard::arrived`] when the wait is over. Without delaying gates this is
    /// [`GateSet::check_traced`].
    ///
    /// # Errors
    /// [`Rejection`] when a gate refuses outright or a delaying gate would hold the request
    /// past its bound; its `Retry-After` is at least the wait until the gate admits at once.
    pub fn check_delayed(
        &self,
        key: &str,
        account: Option<&str>,
        trace: Option<&str>,
        now: Instant,
    ) -> Result<Admission<'_>, Rejection> {
        self.decide(key, account, trace, now, self.has_delay)
    }

    #[inline(always)]
    fn decide(
        &self,
        key: &str,
        account: Option<&str>,
        trace: Option<&str>,
        now: Instant,
        delay: bool,
    ) -> Result<Admission<'_>, Rejection> {
        let now = self.ns(now);
        let guard = self.table.guard();
        let account = account.filter(|_| !self.account_gates.is_empty());
        // Lock the key's entry, then the account's (always in that order, so two decisions
        // cannot wait for each other); a dead entry (swept between lookup and lock) means
        // looking both up again, which a sweep (at most one per doubling of the map) makes rare.
        let (mut ke, mut ae) = loop {
            let ke = if self.key_gates.is_empty() {
                None
            } else {
                match self.hold(Scope::Key, key, now, &guard) {
                    Some(h) => Some(h),
                    None => continue,
                }
            };
            let ae = match account {
                None => None,
                Some(a) => match self.hold(Scope::Account, a, now, &guard) {
                    Some(h) => Some(h),
                    None => continue,
                },
            };
            break (ke, ae);
        };
        // First ask every gate whether it admits, charging nothing; only if all do, charge
        // them all. A refusal (the rarer path) then asks each gate for its wait.
        let admits = ke
            .as_mut()
            .is_none_or(|(_, st)| self.admits(Scope::Key, st, key, trace, now))
            && ae
                .as_mut()
                .is_none_or(|(_, st)| self.admits(Scope::Account, st, key, trace, now));
        if !admits {
            if delay {
                if let Some(adm) = self.delayed(&mut ke, &mut ae, key, trace, now) {
                    return Ok(adm);
                }
            }
            let mut refused = SmallVec::<[(usize, Duration); 2]>::new();
            if let Some((_, st)) = ke.as_mut() {
                self.waits(Scope::Key, st, key, trace, now, &mut refused);
            }
            if let Some((_, st)) = ae.as_mut() {
                self.waits(Scope::Account, st, key, trace, now, &mut refused);
            }
            drop((ke, ae));
            refused.sort_unstable_by_key(|(i, _)| *i);
            let rejected = refused
                .iter()
                .map(|(i, wait)| status(&self.gates[*i], 0, *wait))
                .collect();
            return Err(Rejection { rejected });
        }
        let mut adm = Admission::new(self);
        let ticket = if self.has_slots { table::ticket() } else { 0 };
        if let Some((entry, st)) = ke.as_mut() {
            self.charge(Scope::Key, entry, st, key, trace, ticket, now, &mut adm);
        }
        if let Some((entry, st)) = ae.as_mut() {
            self.charge(Scope::Account, entry, st, key, trace, ticket, now, &mut adm);
        }
        Ok(adm)
    }

    /// Whether every gate of `scope` admits one more request on this caller's `state` at
    /// `now`. Charges nothing (expired slots are dropped).
    #[inline(always)]
    fn admits(
        &self,
        scope: Scope,
        state: &mut State,
        key: &str,
        trace: Option<&str>,
        now: u64,
    ) -> bool {
        for (g, st) in self.scope_gates(scope).iter().zip(state.gates.iter_mut()) {
            let ok = match (&self.gates[*g].kind, st) {
                (Kind::Rate(q), GateState::Rate(cell)) => rate::admits(q, *cell, now),
                (Kind::Concurrency { limit, .. }, GateState::Slots(slots)) => {
                    table::expire(slots, now);
                    self.slot_free(scope, slots, limit.get(), key, trace)
                }
                // Entries are built from the gates' kinds.
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// Whether a concurrency gate with these live `slots` admits: a free slot, or one this
    /// trace already holds (a request without a trace never holds one yet).
    #[inline(always)]
    pub(crate) fn slot_free(
        &self,
        scope: Scope,
        slots: &[Slot],
        limit: u32,
        key: &str,
        trace: Option<&str>,
    ) -> bool {
        slots.len() < limit as usize
            || trace.is_some_and(|_| {
                let id = self.trace_id(scope, key, trace, 0);
                slots.iter().any(|s| s.trace == id)
            })
    }

    /// The refusing gates of `scope` with the wait until each would admit (after
    /// [`GateSet::admits`] said no to one of them).
    #[cold]
    #[inline(never)]
    fn waits(
        &self,
        scope: Scope,
        state: &mut State,
        key: &str,
        trace: Option<&str>,
        now: u64,
        refused: &mut SmallVec<[(usize, Duration); 2]>,
    ) {
        for (g, st) in self.scope_gates(scope).iter().zip(state.gates.iter_mut()) {
            match (&self.gates[*g].kind, st) {
                (Kind::Rate(q), GateState::Rate(cell)) => {
                    if let Err(v) = rate::admit(q, *cell, now) {
                        refused.push((*g, v.reset()));
                    }
                }
                (
                    Kind::Concurrency {
                        limit, retry_hint, ..
                    },
                    GateState::Slots(slots),
                ) => {
                    // `admits` may have stopped before this gate: drop expired slots here too.
                    table::expire(slots, now);
                    if !self.slot_free(scope, slots, limit.get(), key, trace) {
                        let soonest = slots.iter().map(|s| s.expires - now).min();
                        let wait = soonest
                            .map(Duration::from_nanos)
                            .map_or(*retry_hint, |e| std::cmp::min(e, *retry_hint));
                        refused.push((*g, wait));
                    }
                }
                _ => {}
            }
        }
    }

    /// Charge every gate of `scope` on this caller's `state` (all admit: checked by
    /// [`GateSet::admits`] under the same lock), recording tallies and leases.
    #[allow(clippy::too_many_arguments)] // the decision's parts, kept apart for the borrow checker
    #[inline(always)]
    pub(crate) fn charge(
        &self,
        scope: Scope,
        entry: &Arc<Entry>,
        state: &mut State,
        key: &str,
        trace: Option<&str>,
        ticket: u64,
        now: u64,
        adm: &mut Admission<'_>,
    ) {
        for (g, st) in self.scope_gates(scope).iter().zip(state.gates.iter_mut()) {
            let gate = *g;
            match (&self.gates[gate].kind, st) {
                (Kind::Rate(q), GateState::Rate(cell)) if q.algorithm() == Algorithm::Gcra => {
                    // GCRA's charge is one addition; the units left follow from the reset,
                    // so their division waits until a response shows them.
                    let tat = cell.at.max(now) + q.interval_ns();
                    cell.at = tat;
                    adm.tallies.push(Tally {
                        gate: gate as u32,
                        remaining: Tally::DERIVED,
                        reset_ns: tat - now,
                    });
                }
                (Kind::Rate(q), GateState::Rate(cell)) => {
                    if let Ok((new, v)) = rate::admit(q, *cell, now) {
                        *cell = new;
                        adm.tallies.push(Tally {
                            gate: gate as u32,
                            remaining: v.remaining,
                            reset_ns: v.reset_ns,
                        });
                    }
                }
                (Kind::Concurrency { limit, lease, .. }, GateState::Slots(slots)) => {
                    let id = self.trace_id(scope, key, trace, ticket);
                    let expires =
                        now.saturating_add(u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX));
                    let held = trace.and_then(|_| slots.iter_mut().find(|s| s.trace == id));
                    let used = match held {
                        Some(s) => {
                            s.tickets.push(ticket);
                            s.expires = std::cmp::max(s.expires, expires);
                            slots.len()
                        }
                        None => {
                            slots.push(Slot {
                                trace: id,
                                tickets: smallvec![ticket],
                                expires,
                            });
                            slots.len()
                        }
                    };
                    adm.tallies.push(Tally {
                        gate: gate as u32,
                        remaining: limit.get().saturating_sub(used as u32),
                        reset_ns: 0,
                    });
                    adm.leases.push(Lease {
                        gate: gate as u32,
                        entry: Arc::clone(entry),
                        trace: id,
                        ticket,
                        waiting: false,
                    });
                }
                // Entries are built from the gates' kinds.
                _ => {}
            }
        }
    }

    /// Which requests share a slot at a gate of `scope`: traces are chosen by callers, so
    /// within an account key k1's "1" and key k2's "1" are different requests.
    fn trace_id(&self, scope: Scope, key: &str, trace: Option<&str>, ticket: u64) -> TraceId {
        match (trace, scope) {
            (None, _) => TraceId::Anon(ticket),
            (Some(t), Scope::Key) => TraceId::Named(self.traces.hash_one(t)),
            (Some(t), Scope::Account) => TraceId::Named(self.traces.hash_one((key, t))),
        }
    }
}
