//! # abide-redis
//!
//! Several nodes sharing one limit through Redis: outbox nodes (`abide send`, `abide
//! serve`) sharing a provider's, in-process clients in several processes sharing a host's
//! (abide-client's `with_coordination`).
//!
//! [`CoordinationConfig`] is `[coordination]` of a providers file; [`RedisCoordination`]
//! shares one key's state (keys: [`coordination_prefix`] and [`limit_key`]); [`look`]
//! reads every key from outside any node (`abide status --redis`) and [`probe`] checks a
//! Redis URL at start.
//!
//! [`RedisCoordination`] implements abide-core's [`Coordination`] seam for one provider key:
//! the session keeps deciding alone; this shares the state it decides with.
//!
//! ```text
//!   senders ──reserve/pull/push/budget (sync, no I/O)──▶ View ◀──one EVALSHA per sync──▶ Redis
//!                                                        ▲ background task: on demand, or
//!                                                        │ every 250 ms as a heartbeat
//! ```
//!
//! - **Send schedule.** One GCRA (ITU-T I.371 virtual scheduling) over a TAT in Redis, in
//!   the Redis server's time, so the sum over nodes follows the pacer's rate. A sync
//!   reserves a batch of slots (about 200 ms of this node's share, at most 64), so round
//!   trips per item stay well under one; slots are mapped to local monotonic time with the
//!   round trip's midpoint.
//! - **Host pause.** A pause this node's pacer takes (a `Retry-After`, an exhausted quota,
//!   its own backoff) is published at once; every node's pacer is paused until the same
//!   instant, and no slot is granted inside it.
//! - **Learned rate.** A decrease one node makes is adopted by the others
//!   ([`Pacer::adopt_shared`]); a node joining late starts from the last rate and ceiling
//!   shared; each pacer is told its share of the granted slots ([`Pacer::set_share`]) so
//!   that what it sees accepted reads as the host's.
//! - **Retry budget.** Tokens in Redis, refilled at `min_per_sec`, earned at `retry_ratio`
//!   per first attempt, given back by refunds, capped at `(min_per_sec + retry_ratio ×
//!   rate) × ttl`; each node holds a couple, fetched with its syncs.
//!
//! # Redis unavailable or slow
//! Never unlimited. A sync that fails or takes longer than [`SYNC_TIMEOUT`] switches the
//! node to *fallback* (one warning per episode): it sends at its pacer's rate divided by the
//! live node count last seen (heartbeats expire after [`HEARTBEAT_TTL`]), with its own
//! retry budget, and rejoins when Redis answers. A Redis that lost its state (a restart)
//! gets each node's own current rate, not a fresh start, so no burst follows: the schedule
//! starts as an empty bucket, the slots a node still holds and its fallback slots still
//! ahead are charged to it, and until the nodes last seen are back (at most 5 s) it runs
//! at the rejoined nodes' share only, the others still sending theirs in fallback.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod config;
mod look;
mod sync;
mod view;

pub use config::{
    check_key_prefix, ConfigError, CoordinationConfig, RedisUrl, DEFAULT_EXPECTED_NODES,
    DEFAULT_KEY_PREFIX, MAX_EXPECTED_NODES, MAX_KEY_PREFIX,
};
pub use look::{is_transient, look, probe, ProbeError, SharedLimit, MAX_KEYS};
pub use view::{HEARTBEAT_EVERY, HEARTBEAT_TTL, SYNC_TIMEOUT};

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abide_core::{
    Clock, Coordination, CoordinationMode, CoordinationStatus, NodeSeen, Pacer, Reservation,
    RetryBudget, RetryBudgetConfig,
};
use tokio::sync::Notify;

use view::{Shared, View, JOIN_WAIT, RETRY_SLOT, STALE_SLOT};

/// The key under which nodes share provider `provider`'s limit: its name and, when its
/// credential is known, 16 hex digits of a SHA-256 digest of the credential (never the
/// credential itself). A provider's limit belongs to the API key: two providers files that
/// name the provider alike and use the same key share one limit; with different keys they
/// do not.
pub fn limit_key(provider: &str, credential: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    match credential.filter(|c| !c.is_empty()) {
        None => provider.to_owned(),
        Some(c) => {
            let mut h = Sha256::new();
            h.update(b"abide-coord-v1\0");
            h.update(c.as_bytes());
            let digest = h.finalize();
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            format!("{provider}:{hex}")
        }
    }
}

/// The prefix of the keys under which a deployment with Redis key prefix `key_prefix`
/// (`[coordination] key_prefix`, `--redis-prefix`; default `abide`) shares its limits:
/// `<key_prefix>:coord`, each provider key below it as `<key_prefix>:coord:<limit_key>`.
pub fn coordination_prefix(key_prefix: &str) -> String {
    format!("{key_prefix}:coord")
}

/// Where a node's shared state lives in Redis and who it is.
#[derive(Debug, Clone)]
pub struct CoordinationTarget {
    /// `redis://…` (may hold a password: never shown unredacted).
    pub url: String,
    /// Prefix of every key (nodes sharing limits use the same one).
    pub prefix: String,
    /// This node's id, unique per process (e.g. the dispatcher's lease owner).
    pub node: String,
    /// Nodes assumed to share the limit while Redis has never answered since start
    /// (`[coordination] expected_nodes`): a node starting while Redis is down sends
    /// `rate ÷ expected_nodes`, not the whole rate. At least 1.
    pub expected_nodes: u32,
}

/// One provider key's state shared through Redis; see the [module docs](self).
#[derive(Clone)]
pub struct RedisCoordination {
    shared: Arc<Shared>,
}

impl fmt::Debug for RedisCoordination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCoordination")
            .field("node", &self.shared.node)
            .field("key", &self.shared.key)
            .field("url", &self.shared.shown_url)
            .finish_non_exhaustive()
    }
}

impl RedisCoordination {
    /// Share provider `provider`'s state under `target`, with `rate` (requests per second)
    /// as this node's pacer's starting rate, `burst` its burst and `budget` its retry
    /// budget, reading monotonic time from `clock`. Starts a background task on the current tokio runtime that connects (and
    /// reconnects) on its own: until the first sync succeeds (at most 2 s) senders wait,
    /// then fall back.
    ///
    /// # Errors
    /// [`redis::RedisError`] for a malformed URL (never for an unreachable server).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(
        target: &CoordinationTarget,
        provider: &str,
        rate: f64,
        burst: f64,
        budget: RetryBudgetConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, redis::RedisError> {
        let now = clock.monotonic();
        let client = redis::Client::open(target.url.as_str())?;
        let shared = Arc::new(Shared {
            node: target.node.clone(),
            key: format!("{}:{provider}", target.prefix),
            shown_url: abide_core::echo::redact_url(&target.url),
            budget,
            burst,
            clock,
            view: Mutex::new(View::new(rate, now, target.expected_nodes)),
            wake: Notify::new(),
        });
        tokio::spawn(sync::run(Arc::downgrade(&shared), client));
        Ok(Self { shared })
    }

    /// The Redis URL with its password replaced by `***`.
    pub fn shown_url(&self) -> &str {
        &self.shared.shown_url
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.shared.view()
    }
}

impl Coordination for RedisCoordination {
    fn reserve(&self, pacer: &Pacer, now: Instant, deadline: Option<Instant>) -> Reservation {
        let paused = pacer.paused_until(now);
        let rate = pacer.rate();
        let mut v = self.view();
        if let Some(at) = v.take_slot(now, paused) {
            if deadline.is_some_and(|d| at > d) {
                // Too late for this caller: the next sender takes it.
                drop(v);
                self.release(pacer, at, now);
                return Reservation::PastDeadline(at);
            }
            if v.wants_slots() {
                self.shared.wake.notify_one();
            }
            return Reservation::Slot(at);
        }
        match v.mode {
            CoordinationMode::Fallback => Reservation::Slot(v.fallback_slot(now, rate, paused)),
            _ if !v.joined && now.saturating_duration_since(v.started) >= JOIN_WAIT => {
                // Redis never answered since start: fall back rather than wait forever.
                v.fall_back(now);
                Reservation::Slot(v.fallback_slot(now, rate, paused))
            }
            _ => {
                v.starved = v.starved.saturating_add(1);
                drop(v);
                self.shared.wake.notify_one();
                Reservation::Retry(now + RETRY_SLOT)
            }
        }
    }

    fn release(&self, _pacer: &Pacer, slot: Instant, now: Instant) {
        // A slot handed out but not used (its item went back to the queue): the next
        // sender takes it, unless it is stale by then.
        if slot + STALE_SLOT >= now {
            let mut v = self.view();
            v.slots.push_front(slot);
            v.taken = v.taken.saturating_sub(1);
            v.slots.make_contiguous().sort_unstable();
        }
    }

    fn pull(&self, pacer: &Pacer, now: Instant) {
        let (pause, adopt, share) = {
            let mut v = self.view();
            (v.pause_until, v.adopt.take(), v.share)
        };
        if let Some(until) = pause.filter(|u| *u > now) {
            pacer.adopt_pause(now, until);
        }
        if let Some((rate, ceiling)) = adopt {
            pacer.adopt_shared(now, rate, ceiling);
        }
        pacer.set_share(share);
    }

    fn push(&self, pacer: &Pacer, now: Instant) {
        let snap = pacer.snapshot(now);
        let mut v = self.view();
        // A shared estimate not yet pulled into the pacer supersedes its numbers: publishing
        // them would overwrite the estimate this node is about to take.
        let adopting = v.adopt.map(|(rate, _)| rate);
        if adopting.is_none() {
            v.rate = snap.rate;
            v.ceiling = snap.ceiling;
        }
        v.informed = true;
        let mut wake = false;
        if let Some(until) = snap.paused_until {
            // Publish a pause this pacer took that the shared one does not cover yet.
            let known = v.pause_until.max(v.published_pause).max(v.pending_pause);
            if known.is_none_or(|k| until > k + Duration::from_millis(5)) {
                v.pending_pause = Some(until);
                wake = true;
            }
        }
        // A cut to a rate still above the estimate being adopted is no news.
        let news = adopting.is_none_or(|shared| snap.rate < shared);
        if snap.decreases > v.own_decreases && news {
            v.own_decreases = snap.decreases;
            v.pending_decrease = Some((snap.rate, snap.ceiling));
            // Slots at hand were spaced at the old rate (see `take_decrease`).
            v.slots.clear();
            wake = true;
        }
        drop(v);
        if wake {
            self.shared.wake.notify_one();
        }
    }

    fn deposit(&self, budget: &RetryBudget, now: Instant) {
        // The local budget too: it is what a node falls back on.
        budget.deposit(now);
        let mut v = self.view();
        v.deposits = v.deposits.saturating_add(1);
    }

    fn try_withdraw(&self, budget: &RetryBudget, now: Instant) -> bool {
        let mut v = self.view();
        if v.mode == CoordinationMode::Fallback {
            drop(v);
            return budget.try_withdraw(now);
        }
        if v.tokens > 0 {
            v.tokens -= 1;
            return true;
        }
        v.denied = v.denied.saturating_add(1);
        drop(v);
        self.shared.wake.notify_one();
        false
    }

    fn refund(&self, budget: &RetryBudget, withdrawn_at: Instant) {
        budget.refund(withdrawn_at);
        let mut v = self.view();
        v.refunds = v.refunds.saturating_add(1);
    }

    fn status(&self, _pacer: &Pacer, now: Instant) -> CoordinationStatus {
        let v = self.view();
        let paused_until = v.pause_until.filter(|u| *u > now);
        // Ages as of `now`: the listing is up to a second old.
        let since = v
            .listed_at
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        CoordinationStatus {
            node: self.shared.node.clone(),
            mode: v.mode,
            nodes: v.nodes,
            // In fallback it sends its pacer's rate divided by the nodes: that share.
            share: if v.mode == CoordinationMode::Fallback {
                1.0 / f64::from(v.nodes.max(1))
            } else {
                v.share
            },
            paused_until,
            pause_by: paused_until.and((!v.pause_by.is_empty()).then(|| v.pause_by.clone())),
            fallback_for: v
                .fallback_since
                .filter(|_| v.mode == CoordinationMode::Fallback)
                .map(|at| now.saturating_duration_since(at)),
            nodes_assumed: !v.joined,
            shared_rate: v.shared_rate,
            shared_ceiling: v.shared_ceiling,
            peers: v
                .peers
                .iter()
                .map(|p| NodeSeen {
                    last_seen_ago: p.last_seen_ago + since,
                    ..p.clone()
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_node;
#[cfg(test)]
mod tests_ops;
