//! [`GateSet`]: several gates decided together, so a request is either admitted by every
//! gate or charged to none.
//!
//! Each caller (API key, account) has its own entry with its own lock, found in a lock-free
//! map (`table.rs`): a decision locks the key's entry, then the account's, asks every gate
//! whether it admits, and charges them all only if all do. Requests from different callers
//! share no lock; a caller already seen costs no allocation.

use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::gate::{valid_token, Algorithm, Gate, Kind, MAX_DELAY, MAX_LEASE};
use crate::lease::Lease;
use crate::rate::{self, Cell};
use crate::table::{GateState, Gates, Table};
use crate::tally::status;
use crate::{Error, Scope};

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
            if let Some(d) = g.delay {
                if !matches!(&g.kind, Kind::Rate(q) if q.algorithm() == Algorithm::Gcra) {
                    return Err(Error::InvalidQuota("only a gcra rate gate can delay"));
                }
                if d.max_delay.is_zero() || d.max_delay > MAX_DELAY {
                    return Err(Error::InvalidQuota("max_delay must lie within (0, 60 s]"));
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
        let has_slots = self
            .gates
            .iter()
            .any(|g| matches!(g.kind, Kind::Concurrency { .. }));
        let has_delay = self.gates.iter().any(|g| g.delay.is_some());
        Ok(GateSet {
            gates: self.gates,
            local,
            key_gates,
            account_gates,
            table: Table::default(),
            has_slots,
            has_delay,
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
    pub(crate) gates: Vec<Gate>,
    /// Each gate's position among the gates of its scope (its slot in an entry's state).
    pub(crate) local: Vec<usize>,
    pub(crate) key_gates: Vec<usize>,
    pub(crate) account_gates: Vec<usize>,
    /// Every caller's state.
    pub(crate) table: Table,
    /// Whether any gate is a concurrency gate (a decision then draws a ticket).
    pub(crate) has_slots: bool,
    /// Whether any gate may delay (a refusal then first asks whether the request may wait).
    pub(crate) has_delay: bool,
    /// Hashes traces into [`TraceId`]s with a per-set secret seed, so callers cannot choose
    /// traces that collide.
    pub(crate) traces: std::hash::RandomState,
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
    pub(crate) fn ns(&self, now: Instant) -> u64 {
        let epoch = *self.epoch.get_or_init(|| now);
        u64::try_from(now.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX / 4)
    }

    pub(crate) fn scope_gates(&self, scope: Scope) -> &[usize] {
        match scope {
            Scope::Key => &self.key_gates,
            Scope::Account => &self.account_gates,
        }
    }

    pub(crate) fn fresh(&self, scope: Scope) -> Gates {
        self.scope_gates(scope)
            .iter()
            .map(|i| match &self.gates[*i].kind {
                Kind::Rate(_) => GateState::Rate(Cell::default()),
                Kind::Concurrency { .. } => GateState::Slots(Vec::new()),
            })
            .collect()
    }

    /// Whether a rate cell at local index `i` of `scope` limits nothing any more.
    pub(crate) fn cell_idle(&self, scope: Scope, i: usize, c: &Cell, now: u64) -> bool {
        match self.scope_gates(scope).get(i).map(|g| &self.gates[*g].kind) {
            Some(Kind::Rate(q)) => c.idle(q, now),
            _ => true,
        }
    }

    /// Give a lease back. Returns whether this call freed anything; releasing twice, releasing
    /// after the lease expired, or releasing a lease that is not held does nothing.
    pub fn release(&self, lease: &Lease) -> bool {
        if lease.waiting {
            return self.give_back(lease);
        }
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
