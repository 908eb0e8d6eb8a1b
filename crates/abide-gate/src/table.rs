//! The in-memory state behind a [`crate::GateSet`]: one entry per caller (an API key or an
//! account), found in a lock-free concurrent map and locked on its own.
//!
//! A decision pins the map (a thread-local step), finds its one or two entries with one hash
//! each, and locks only those entries: decisions for different callers share no lock and
//! write no common cache line, so they scale with threads; a caller already seen costs no
//! allocation. The map is [`papaya`]'s: reads never block and never write shared memory.
//!
//! Idle entries (nothing limited, no live reservation) are swept when the map has doubled
//! since the last sweep. A swept entry is marked dead under its own lock, so a decision that
//! found it just before looks the caller up again instead of charging a forgotten entry.

use std::cell::Cell as StdCell;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
pub(crate) use parking_lot::MutexGuard;

use papaya::{Equivalent, LocalGuard};
use smallvec::SmallVec;

use crate::rate::Cell;
use crate::Scope;

/// Entries the map keeps before the first sweep of idle ones; later sweeps wait until the
/// map has doubled since the last one, so sweeping costs O(1) per new caller on average.
/// The map starts with room for twice as many (≈ 74 KiB of slots), so probes stay short.
const SWEEP_AT: usize = 4096;

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

/// One caller's gate states, in the set's order of the gates of its scope.
pub(crate) type Gates = SmallVec<[GateState; 2]>;

/// A caller's state at every gate of one scope, in the set's order of those gates.
#[derive(Debug)]
pub(crate) struct State {
    /// Inline for up to two gates per scope (the provider's shape): one pointer fewer
    /// to follow per decision.
    pub(crate) gates: Gates,
    /// Swept from the map: whoever finds it looks the caller up again.
    pub(crate) dead: bool,
    /// Slots reserved ahead at delaying gates (allocated only once a request waits).
    pub(crate) waits: Option<Box<Waits>>,
}

/// A slot reserved ahead at a delaying rate gate by a waiting request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The gate's position in its scope.
    pub(crate) local: usize,
    pub(crate) ticket: u64,
    /// When the request may be served, in nanoseconds since the set's epoch.
    pub(crate) slot: u64,
}

/// The waiting requests of one caller, and the slots waiters gave back.
#[derive(Debug, Default)]
pub(crate) struct Waits {
    pub(crate) pending: Vec<Pending>,
    /// `(local, slot)`: a reserved slot given back that is not the last one reserved (the
    /// last one is given back by moving the gate's TAT), free for the next request.
    pub(crate) holes: Vec<(usize, u64)>,
}

impl State {
    /// True when no gate limits this caller any more, so it may be forgotten.
    fn idle(&self, is_idle: &dyn Fn(usize, &Cell) -> bool, now: u64) -> bool {
        let waiting = self
            .waits
            .as_ref()
            .is_some_and(|w| w.pending.iter().any(|p| p.slot > now));
        !waiting
            && self.gates.iter().enumerate().all(|(i, g)| match g {
                GateState::Rate(c) => is_idle(i, c),
                GateState::Slots(s) => s.iter().all(|s| s.expires <= now),
            })
    }
}

/// One caller of one set, shared by the map and by the leases taken on it.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The caller's id (for `Debug` as a safe trace, and to unlink a dead entry).
    pub(crate) id: Arc<str>,
    /// The set this entry belongs to (a lease handed to another set frees nothing there).
    pub(crate) set: u64,
    state: Mutex<State>,
}

impl Entry {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }
}

/// A map key: API keys and accounts kept apart (a key named like an account is another
/// caller). The name is kept inline up to 32 bytes, so comparing it during a lookup reads
/// the map's own node instead of following one more pointer.
#[derive(Debug, PartialEq, Eq)]
struct Id {
    account: bool,
    name: SmallVec<[u8; 32]>,
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_id(self.account, &self.name, h);
    }
}

/// `Id`'s hash: the scope, then the name's bytes with a terminator (as `str` hashes).
#[inline]
fn hash_id<H: Hasher>(account: bool, name: &[u8], h: &mut H) {
    h.write_u8(u8::from(account));
    h.write(name);
    h.write_u8(0xff);
}

/// A borrowed [`Id`], so a lookup allocates nothing.
struct IdRef<'a> {
    account: bool,
    name: &'a str,
}

impl<'a> IdRef<'a> {
    fn of(scope: Scope, name: &'a str) -> Self {
        Self {
            account: scope == Scope::Account,
            name,
        }
    }
}

impl Hash for IdRef<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_id(self.account, self.name.as_bytes(), h);
    }
}

impl Equivalent<Id> for IdRef<'_> {
    #[inline]
    fn equivalent(&self, k: &Id) -> bool {
        self.account == k.account && self.name.as_bytes() == &k.name[..]
    }
}

/// Every caller of one set (foldhash, seeded per map, as hashbrown's default).
pub(crate) struct Table {
    map: papaya::HashMap<Id, Arc<Entry>, hashbrown::DefaultHashBuilder>,
    /// Entries the map may hold before the next sweep.
    sweep_at: AtomicUsize,
    /// This set's id, stamped on its entries.
    set: u64,
}

impl Default for Table {
    fn default() -> Self {
        static SETS: AtomicU64 = AtomicU64::new(1);
        Self {
            map: papaya::HashMap::builder()
                .capacity(2 * SWEEP_AT)
                .hasher(hashbrown::DefaultHashBuilder::default())
                .build(),
            sweep_at: AtomicUsize::new(SWEEP_AT),
            set: SETS.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Table {
    /// Pin the map: entries found stay valid while the guard lives.
    pub(crate) fn guard(&self) -> LocalGuard<'_> {
        self.map.guard()
    }

    pub(crate) fn set(&self) -> u64 {
        self.set
    }

    /// The entry for `id`, if the caller has been seen (it may be dead: check under its lock).
    #[inline]
    pub(crate) fn get<'g>(
        &self,
        scope: Scope,
        id: &str,
        guard: &'g LocalGuard<'_>,
    ) -> Option<&'g Arc<Entry>> {
        self.map.get(&IdRef::of(scope, id), guard)
    }

    /// The entry for `id`, created with `fresh` on first sight (the only allocation a caller
    /// costs), after sweeping idle entries when the map has grown enough.
    #[inline]
    pub(crate) fn entry<'g>(
        &self,
        scope: Scope,
        id: &str,
        fresh: impl FnOnce() -> Gates,
        is_idle: &dyn Fn(Scope, usize, &Cell) -> bool,
        now: u64,
        guard: &'g LocalGuard<'_>,
    ) -> &'g Arc<Entry> {
        match self.get(scope, id, guard) {
            Some(e) => e,
            None => self.insert(scope, id, fresh(), is_idle, now, guard),
        }
    }

    #[cold]
    #[inline(never)]
    fn insert<'g>(
        &self,
        scope: Scope,
        id: &str,
        gates: Gates,
        is_idle: &dyn Fn(Scope, usize, &Cell) -> bool,
        now: u64,
        guard: &'g LocalGuard<'_>,
    ) -> &'g Arc<Entry> {
        if self.map.len() >= self.sweep_at.load(Ordering::Relaxed) {
            self.sweep(is_idle, now, guard);
        }
        let entry = Arc::new(Entry {
            id: Arc::from(id),
            set: self.set,
            state: Mutex::new(State {
                gates,
                dead: false,
                waits: None,
            }),
        });
        let key = Id {
            account: scope == Scope::Account,
            name: SmallVec::from_slice(id.as_bytes()),
        };
        match self.map.try_insert(key, entry, guard) {
            Ok(e) => e,
            // Another thread created it first: use theirs.
            Err(occupied) => occupied.current,
        }
    }

    /// Take a dead entry out of the map (if the sweep has not yet), so the next lookup
    /// creates a fresh one.
    #[cold]
    pub(crate) fn unlink(&self, scope: Scope, entry: &Arc<Entry>, guard: &LocalGuard<'_>) {
        let _ = self.map.remove_if(
            &IdRef::of(scope, &entry.id),
            |_, e| Arc::ptr_eq(e, entry),
            guard,
        );
    }

    /// Forget entries that limit nothing at `now`. Busy entries (locked by a decision) stay.
    fn sweep(
        &self,
        is_idle: &dyn Fn(Scope, usize, &Cell) -> bool,
        now: u64,
        guard: &LocalGuard<'_>,
    ) {
        self.map.retain(
            |k, e| {
                let scope = if k.account {
                    Scope::Account
                } else {
                    Scope::Key
                };
                let Some(mut s) = e.state.try_lock() else {
                    return true;
                };
                if s.idle(&|i, c| is_idle(scope, i, c), now) {
                    s.dead = true;
                    false
                } else {
                    true
                }
            },
            guard,
        );
        let left = self.map.len();
        self.sweep_at
            .store(std::cmp::max(SWEEP_AT, left * 2), Ordering::Relaxed);
    }

    /// Entries per scope: (keys, accounts).
    pub(crate) fn counts(&self) -> (usize, usize) {
        let m = self.map.pin();
        m.iter().fold(
            (0, 0),
            |(k, a), (id, _)| {
                if id.account {
                    (k, a + 1)
                } else {
                    (k + 1, a)
                }
            },
        )
    }
}

/// Tickets for concurrency reservations, unique in the process: each thread takes a block
/// of 2^20 from one shared counter and hands them out alone, so a decision writes no shared
/// cache line for its ticket.
pub(crate) fn ticket() -> u64 {
    static BLOCKS: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NEXT: StdCell<(u64, u64)> = const { StdCell::new((0, 0)) };
    }
    NEXT.with(|n| {
        let (mut next, mut end) = n.get();
        if next == end {
            next = BLOCKS.fetch_add(1, Ordering::Relaxed) << 20;
            end = next + (1 << 20);
        }
        n.set((next + 1, end));
        next
    })
}

/// Drop the expired slots of a concurrency gate.
pub(crate) fn expire(slots: &mut Vec<Slot>, now: u64) {
    slots.retain(|s| s.expires > now);
}
