//! The in-memory state behind a [`crate::GateSet`]: callers spread over independently locked
//! shards, so two requests from different callers rarely wait for each other, and a decision
//! on a caller already seen allocates nothing.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hashbrown::hash_map::EntryRef;
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::rate::Cell;

/// Shards per set: a power of two, enough that a few busy threads rarely meet (32 KiB).
pub(crate) const SHARDS: usize = 256;

/// Entries a shard keeps before idle ones (nothing limited, no live reservation) are swept.
const SWEEP_AT: usize = 256;

/// Which requests share a concurrency slot: one trace (an idempotency key, hashed with the
/// set's secret seed) or, without a trace, none (`Anon` carries the unique ticket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TraceId {
    Anon(u64),
    Named(u64),
}

/// One held concurrency slot.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) trace: TraceId,
    /// One ticket per acquisition still held; the slot is free when none is left.
    pub(crate) tickets: SmallVec<[u64; 2]>,
    /// Nanoseconds since the set's epoch.
    pub(crate) expires: u64,
}

/// One gate's state for one caller.
#[derive(Debug)]
pub(crate) enum GateState {
    Rate(Cell),
    Slots(Vec<Slot>),
}

/// A caller's state at every gate of one scope, in the set's order of those gates.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The caller's id, shared with the leases taken here (a clone is a count, not a copy).
    pub(crate) id: Arc<str>,
    pub(crate) gates: Box<[GateState]>,
}

impl Entry {
    /// True when no gate limits this caller any more, so it may be forgotten.
    fn idle(&self, is_idle: &dyn Fn(usize, &Cell) -> bool, now: u64) -> bool {
        self.gates.iter().enumerate().all(|(i, g)| match g {
            GateState::Rate(c) => is_idle(i, c),
            GateState::Slots(s) => s.iter().all(|s| s.expires <= now),
        })
    }
}

/// Callers by id (hashbrown's default hasher, foldhash, seeded per map).
pub(crate) type Map = HashMap<Arc<str>, Entry>;

/// One lock's worth of callers: API keys and accounts kept apart (a key named like an
/// account is another caller).
#[derive(Debug, Default)]
pub(crate) struct Shard {
    pub(crate) keys: Map,
    pub(crate) accounts: Map,
    /// Tickets for reservations taken in this shard (unique per shard, which is all a
    /// release needs: a slot lives in one shard).
    next_ticket: u64,
}

impl Shard {
    pub(crate) fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }
}

/// `Shard` on its own cache lines, so two threads locking neighbours do not share one.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded(pub(crate) Mutex<Shard>);

impl Padded {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shard> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The entry for `id` in `map`, created with `fresh` on first sight (the only allocation a
/// caller costs), after sweeping idle entries once the map is large.
pub(crate) fn entry<'m>(
    map: &'m mut Map,
    id: &str,
    fresh: impl FnOnce() -> Box<[GateState]>,
    is_idle: &dyn Fn(usize, &Cell) -> bool,
    now: u64,
) -> &'m mut Entry {
    if map.len() >= SWEEP_AT && !map.contains_key(id) {
        map.retain(|_, e| !e.idle(is_idle, now));
    }
    match map.entry_ref(id) {
        EntryRef::Occupied(o) => o.into_mut(),
        EntryRef::Vacant(v) => v.insert(Entry {
            id: Arc::from(id),
            gates: fresh(),
        }),
    }
}

/// Drop the expired slots of a concurrency gate; the time to the soonest expiry left, if
/// any, in nanoseconds.
pub(crate) fn expire(slots: &mut Vec<Slot>, now: u64) -> Option<u64> {
    slots.retain(|s| s.expires > now);
    slots.iter().map(|s| s.expires - now).min()
}
