//! [`GateSet`]: several gates decided together, so a request is either admitted by every
//! gate or charged to none.
//!
//! Each caller (API key, account) has its own entry with its own lock, found in a lock-free
//! map (`table.rs`): a decision locks the key's entry, then the account's, computes
//! every gate, and writes the charges only if all admit. Requests from different callers
//! share no lock; a caller already seen costs no allocation.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use smallvec::{smallvec, SmallVec};

use crate::admission::{status, Tally};
use crate::gate::{valid_token, Gate, Kind, MAX_LEASE};
use crate::rate::{self, Cell};
use crate::table::{self, Entry, GateState, Slot, State, Table, TraceId};
use crate::{Admission, Error, Lease, Rejection, Scope};
use papaya::LocalGuard;

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
        let of = |scope| -> Vec<usize> {
            (0..self.gates.len())
                .filter(|i| self.gates[*i].scope == scope)
                .collect()
        };
        let (key_gates, account_gates) = (of(Scope::Key), of(Scope::Account));
        let local = self
            .gates
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let list = match g.scope {
                    Scope::Key => &key_gates,
                    Scope::Account => &account_gates,
                };
                list.iter().position(|j| *j == i).unwrap_or_default()
            })
            .collect();
        Ok(GateSet {
            gates: self.gates,
            local,
            key_gates,
            account_gates,
            table: Table::default(),
            traces: std::hash::RandomState::new(),
            epoch: OnceLock::new(),
        })
    }
}

/// Several gates over shared state. `Send + Sync`: share one set with `Arc` between every
/// clone of a service, every worker and every connection, or limits multiply.
///
/// `Debug` shows the gates and how many callers are tracked, never the callers' keys.
pub struct GateSet {
    gates: Vec<Gate>,
    /// Each gate's position among the gates of its scope (its slot in an entry's state).
    local: Vec<usize>,
    key_gates: Vec<usize>,
    account_gates: Vec<usize>,
    /// Every caller's state.
    table: Table,
    /// Hashes traces into [`TraceId`]s with a per-set secret seed, so callers cannot choose
    /// traces that collide.
    traces: std::hash::RandomState,
    /// The first instant a decision saw: state keeps nanoseconds since it, so the hot path
    /// does integer arithmetic instead of `Instant` arithmetic.
    epoch: OnceLock<Instant>,
}

impl fmt::Debug for GateSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The state is keyed by raw API keys: show sizes only.
        let (keys, accounts) = self.table.counts();
        f.debug_struct("GateSet")
            .field("gates", &self.gates)
            .field("key_entries", &keys)
            .field("account_entries", &accounts)
            .finish_non_exhaustive()
    }
}

/// A caller's entry with its state locked.
type Held<'g> = (&'g Arc<Entry>, MutexGuard<'g, State>);

/// What an admitting gate will write once every gate has admitted.
enum Charge {
    Rate { gate: usize, cell: Cell },
    Slot { gate: usize, expires: u64 },
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

    /// `now` in nanoseconds since the epoch (an instant before it counts as the epoch).
    fn ns(&self, now: Instant) -> u64 {
        let epoch = *self.epoch.get_or_init(|| now);
        u64::try_from(now.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX / 4)
    }

    fn scope_gates(&self, scope: Scope) -> &[usize] {
        match scope {
            Scope::Key => &self.key_gates,
            Scope::Account => &self.account_gates,
        }
    }

    fn fresh(&self, scope: Scope) -> Box<[GateState]> {
        self.scope_gates(scope)
            .iter()
            .map(|i| match &self.gates[*i].kind {
                Kind::Rate(_) => GateState::Rate(Cell::default()),
                Kind::Concurrency { .. } => GateState::Slots(Vec::new()),
            })
            .collect()
    }

    /// Whether a rate cell at local index `i` of `scope` limits nothing any more.
    fn cell_idle(&self, scope: Scope, i: usize, c: &Cell, now: u64) -> bool {
        match self.scope_gates(scope).get(i).map(|g| &self.gates[*g].kind) {
            Some(Kind::Rate(q)) => c.idle(q, now),
            _ => true,
        }
    }

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
        let mut ticket = 0;

        let mut charges: SmallVec<[Charge; 4]> = SmallVec::new();
        let mut tallies: SmallVec<[Tally; 4]> = SmallVec::new();
        let mut refused: SmallVec<[(usize, Duration); 2]> = SmallVec::new();
        for (i, g) in self.gates.iter().enumerate() {
            let held = match g.scope {
                Scope::Key => ke.as_mut(),
                Scope::Account => ae.as_mut(),
            };
            let Some((_, state)) = held else { continue };
            match (&g.kind, &mut state.gates[self.local[i]]) {
                (Kind::Rate(q), GateState::Rate(cell)) => match rate::admit(q, *cell, now) {
                    Err(v) => refused.push((i, v.reset())),
                    Ok((cell, v)) => {
                        tallies.push(Tally {
                            gate: i as u32,
                            remaining: v.remaining,
                            reset_ns: v.reset_ns,
                        });
                        charges.push(Charge::Rate { gate: i, cell });
                    }
                },
                (
                    Kind::Concurrency {
                        limit,
                        lease,
                        retry_hint,
                    },
                    GateState::Slots(slots),
                ) => {
                    if ticket == 0 {
                        ticket = table::ticket();
                    }
                    let soonest = table::expire(slots, now).map(Duration::from_nanos);
                    let id = self.trace_id(g.scope, key, trace, ticket);
                    let held = slots.iter().any(|s| s.trace == id);
                    let used = u32::try_from(slots.len()).unwrap_or(u32::MAX);
                    if held || used < limit.get() {
                        let after = if held { used } else { used + 1 };
                        tallies.push(Tally {
                            gate: i as u32,
                            remaining: limit.get() - after,
                            reset_ns: 0,
                        });
                        charges.push(Charge::Slot {
                            gate: i,
                            expires: now.saturating_add(
                                u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX),
                            ),
                        });
                    } else {
                        let wait = soonest.map_or(*retry_hint, |e| std::cmp::min(e, *retry_hint));
                        refused.push((i, wait));
                    }
                }
                // Entries are built from the gates' kinds.
                _ => {}
            }
        }
        if !refused.is_empty() {
            drop((ke, ae));
            let rejected = refused
                .iter()
                .map(|(i, wait)| status(&self.gates[*i], 0, *wait))
                .collect();
            return Err(Rejection { rejected });
        }
        let mut leases = SmallVec::new();
        for c in charges {
            let (gate, expires) = match c {
                Charge::Rate { gate, cell } => {
                    let held = match self.gates[gate].scope {
                        Scope::Key => ke.as_mut(),
                        Scope::Account => ae.as_mut(),
                    };
                    if let Some(GateState::Rate(c)) =
                        held.map(|(_, s)| &mut s.gates[self.local[gate]])
                    {
                        *c = cell;
                    }
                    continue;
                }
                Charge::Slot { gate, expires } => (gate, expires),
            };
            let scope = self.gates[gate].scope;
            let id = self.trace_id(scope, key, trace, ticket);
            let held = match scope {
                Scope::Key => ke.as_mut(),
                Scope::Account => ae.as_mut(),
            };
            let Some((entry, state)) = held else { continue };
            let GateState::Slots(slots) = &mut state.gates[self.local[gate]] else {
                continue;
            };
            match slots.iter_mut().find(|s| s.trace == id) {
                Some(s) => {
                    s.tickets.push(ticket);
                    s.expires = std::cmp::max(s.expires, expires);
                }
                None => slots.push(Slot {
                    trace: id,
                    tickets: smallvec![ticket],
                    expires,
                }),
            }
            leases.push(Lease {
                gate: gate as u32,
                entry: Arc::clone(entry),
                trace: id,
                ticket,
            });
        }
        Ok(Admission {
            set: self,
            leases,
            tallies,
        })
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

    /// Give a lease back. Returns whether this call freed anything; releasing twice, releasing
    /// after the lease expired, or releasing a lease that is not held does nothing.
    pub fn release(&self, lease: &Lease) -> bool {
        let entry = &lease.entry;
        let Some(local) = self.local.get(lease.gate as usize) else {
            return false;
        };
        if entry.set != self.table.set() {
            return false;
        }
        let mut state = entry.lock();
        let Some(GateState::Slots(slots)) = state.gates.get_mut(*local) else {
            return false;
        };
        let Some(si) = slots.iter().position(|s| s.trace == lease.trace) else {
            return false;
        };
        let slot = &mut slots[si];
        let Some(pos) = slot.tickets.iter().position(|t| *t == lease.ticket) else {
            return false;
        };
        slot.tickets.swap_remove(pos);
        if slot.tickets.is_empty() {
            slots.swap_remove(si);
        }
        true
    }

    /// The state of every gate that applies to `key`/`account` at `now`, **without charging
    /// anything**: a quota endpoint must answer while the caller is exhausted and must not
    /// change the quota it reports.
    pub fn quota(&self, key: &str, account: Option<&str>, now: Instant) -> Vec<crate::GateStatus> {
        let now = self.ns(now);
        let guard = self.table.guard();
        let mut out = Vec::new();
        for (i, g) in self.gates.iter().enumerate() {
            let entry = match (g.scope, account) {
                (Scope::Key, _) => self.table.get(Scope::Key, key, &guard),
                (Scope::Account, Some(a)) => self.table.get(Scope::Account, a, &guard),
                (Scope::Account, None) => continue,
            };
            let state = entry.map(|e| e.lock());
            // A dead entry limits nothing, like an absent one.
            let gate = state
                .as_ref()
                .filter(|s| !s.dead)
                .map(|s| &s.gates[self.local[i]]);
            match &g.kind {
                Kind::Rate(q) => {
                    let cell = match gate {
                        Some(GateState::Rate(c)) => *c,
                        _ => Cell::default(),
                    };
                    let v = rate::peek(q, cell, now);
                    out.push(status(g, v.remaining, v.reset()));
                }
                Kind::Concurrency { limit, .. } => {
                    let used = match gate {
                        Some(GateState::Slots(s)) => s.iter().filter(|s| s.expires > now).count(),
                        _ => 0,
                    };
                    let used = u32::try_from(used).unwrap_or(u32::MAX);
                    out.push(status(g, limit.get().saturating_sub(used), Duration::ZERO));
                }
            }
        }
        out
    }
}
