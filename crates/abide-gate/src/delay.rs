//! Delaying gates: a request over a GCRA gate's rate may wait for its slot instead of being
//! refused, within the gate's [`crate::DelayBound`] (nginx's `limit_req burst delay`).
//!
//! GCRA makes a slot ahead cheap to reserve: the request that would be admitted at
//! `allow_at = TAT − τ` is charged now (TAT moves one interval on) and served at
//! `allow_at`, exactly when an undelayed request would have been admitted, never before.
//! The `k`-th request over the rate waits about `k` intervals, so the bound is
//! `min(max_delay, burst × interval)`; past it the request is refused with the same
//! `Retry-After` as without delay (the wait until the gate admits at once, rounded up).
//!
//! A waiter that goes away gives its slot back at once, like a concurrency lease: the last
//! slot reserved by moving TAT back one interval, an earlier one by leaving a hole that the
//! next request takes (served at the hole's time, so the rate still holds). Both are
//! idempotent per ticket: a second give-back, or one after [`crate::LeaseGuard::arrived`],
//! does nothing.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::gate::Kind;
use crate::rate;
use crate::table::{self, GateState, Pending, State, TraceId, Waits};
use crate::{Admission, GateSet, Lease, Scope};

use crate::check::Held;

/// One delaying gate's part of a delayed decision: where its slot is and where it came from.
#[derive(Clone, Copy)]
struct Plan {
    scope: Scope,
    local: usize,
    gate: usize,
    slot: u64,
    /// The slot is a hole a waiter gave back (TAT does not move).
    hole: bool,
}

/// Forget pending slots that are due (their requests are served) and holes that passed.
fn prune(state: &mut State, now: u64) {
    if let Some(w) = state.waits.as_mut() {
        w.pending.retain(|p| p.slot > now);
        w.holes.retain(|(_, slot)| *slot >= now);
        if w.pending.is_empty() && w.holes.is_empty() {
            state.waits = None;
        }
    }
}

impl GateSet {
    /// The delayed admission of a request some gate would refuse at `now`, or `None` when
    /// a gate refuses it anyway (no delay at that gate, a concurrency gate full, or a wait
    /// past the bound). Charges nothing on `None`. Both entries are locked by the caller.
    #[cold]
    #[inline(never)]
    pub(crate) fn delayed<'g>(
        &self,
        ke: &mut Option<Held<'g>>,
        ae: &mut Option<Held<'g>>,
        key: &str,
        trace: Option<&str>,
        now: u64,
    ) -> Option<Admission<'_>> {
        let mut plans = SmallVec::<[Plan; 2]>::new();
        let mut delay = 0;
        for (scope, held) in [(Scope::Key, &mut *ke), (Scope::Account, &mut *ae)] {
            let Some((_, st)) = held.as_mut() else {
                continue;
            };
            let st: &mut State = st;
            prune(st, now);
            for (local, g) in self.scope_gates(scope).iter().enumerate() {
                let gate = &self.gates[*g];
                match (&gate.kind, &mut st.gates[local]) {
                    (Kind::Rate(q), GateState::Rate(cell)) => {
                        if rate::admits(q, *cell, now) {
                            continue;
                        }
                        // Only GCRA gates delay (checked by the builder).
                        let bound = gate.delay?;
                        let hole = st.waits.as_ref().and_then(|w| {
                            w.holes
                                .iter()
                                .filter(|(l, _)| *l == local)
                                .map(|(_, slot)| *slot)
                                .min()
                        });
                        let tail = cell.at.max(now).saturating_sub(q.tolerance_ns());
                        let slot = hole.unwrap_or(tail);
                        let wait = slot.saturating_sub(now);
                        if wait > bound.max_wait_ns(q.interval_ns()) {
                            return None;
                        }
                        delay = delay.max(wait);
                        plans.push(Plan {
                            scope,
                            local,
                            gate: *g,
                            slot,
                            hole: hole.is_some(),
                        });
                    }
                    (Kind::Concurrency { limit, .. }, GateState::Slots(slots)) => {
                        table::expire(slots, now);
                        if !self.slot_free(scope, slots, limit.get(), key, trace) {
                            return None;
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut adm = Admission::new(self);
        adm.delay_ns = delay;
        let ticket = table::ticket();
        for (scope, held) in [(Scope::Key, &mut *ke), (Scope::Account, &mut *ae)] {
            let Some((entry, st)) = held.as_mut() else {
                continue;
            };
            self.charge(scope, entry, st, key, trace, ticket, now, &mut adm);
            let st: &mut State = st;
            for p in plans.iter().filter(|p| p.scope == scope) {
                let waits = st.waits.get_or_insert_with(Box::default);
                if p.hole {
                    // `charge` moved TAT on as for a slot at the end; a hole is not there.
                    if let (Kind::Rate(q), GateState::Rate(cell)) =
                        (&self.gates[p.gate].kind, &mut st.gates[p.local])
                    {
                        cell.at -= q.interval_ns();
                    }
                    if let Some(i) = waits.holes.iter().position(|h| *h == (p.local, p.slot)) {
                        waits.holes.swap_remove(i);
                    }
                }
                if p.slot > now {
                    waits.pending.push(Pending {
                        local: p.local,
                        ticket,
                        slot: p.slot,
                    });
                    adm.holds.push(Lease {
                        gate: p.gate as u32,
                        entry: Arc::clone(entry),
                        trace: TraceId::Anon(ticket),
                        ticket,
                        waiting: true,
                    });
                }
            }
        }
        Some(adm)
    }

    /// Take a waiting request's reserved slot out of its caller's state; with `give`, make
    /// it free for the next request. Whether the slot was still reserved.
    fn unreserve(&self, hold: &Lease, give: bool) -> bool {
        let Some(local) = self.local.get(hold.gate as usize).copied() else {
            return false;
        };
        if hold.entry.set != self.table.set() {
            return false;
        }
        let Kind::Rate(q) = &self.gates[hold.gate as usize].kind else {
            return false;
        };
        let mut state = hold.entry.lock();
        let State { gates, waits, .. } = &mut *state;
        let Some(w) = waits.as_mut() else {
            return false;
        };
        let Some(i) = w
            .pending
            .iter()
            .position(|p| p.local == local && p.ticket == hold.ticket)
        else {
            return false;
        };
        let slot = w.pending.swap_remove(i).slot;
        if give {
            if let Some(GateState::Rate(cell)) = gates.get_mut(local) {
                give_back_slot(w, local, cell, q.interval_ns(), q.tolerance_ns(), slot);
            }
        }
        true
    }

    /// A waiter went away: its slot is free for the next request. Whether it was reserved.
    pub(crate) fn give_back(&self, hold: &Lease) -> bool {
        self.unreserve(hold, true)
    }

    /// A waiter was served: its slot is spent (a later give-back of it does nothing).
    pub(crate) fn settle(&self, hold: &Lease) {
        self.unreserve(hold, false);
    }
}

/// Give `slot` back at a GCRA gate whose cell is `cell`: the last slot reserved by moving
/// TAT back (and any holes that then end the schedule with it), another one as a hole.
fn give_back_slot(w: &mut Waits, local: usize, cell: &mut rate::Cell, t: u64, tau: u64, slot: u64) {
    let last = |at: u64| at.saturating_sub(t + tau);
    if last(cell.at) != slot {
        w.holes.push((local, slot));
        return;
    }
    cell.at -= t;
    while let Some(i) = w.holes.iter().position(|h| *h == (local, last(cell.at))) {
        w.holes.swap_remove(i);
        cell.at -= t;
    }
}
