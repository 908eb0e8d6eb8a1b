//! [`RedisGates`]: the gates of a [`GateSet`] enforced in Redis, so several server instances
//! behind one balancer share one set of limits.
//!
//! Each decision is one Lua script (`EVALSHA`, one round trip) that reads and charges every
//! gate atomically, with the same algorithms, `429` / `Retry-After` / `RateLimit` rules and
//! idempotent concurrency reservations as the in-memory set. Time is the Redis server's
//! `TIME`, so instances with drifting clocks still agree. Concurrency reservations are
//! leases stored with their expiry: a node that dies without releasing loses its slots
//! when the lease ends, and the key itself expires with its last lease.
//!
//! Callers are stored under a 64-bit FNV-1a hash of their key or account, never the raw key.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use redis::aio::ConnectionManager;
use redis::Script;

use crate::admission::insert_rate_limit;
use crate::gate::{Algorithm, Kind};
use crate::tally::status;
use crate::{GateSet, GateStatus, Rejection, Scope};

/// Why a shared decision could not be made (Redis unreachable, refused the script, or
/// answered in a shape this code does not expect). The caller must not admit on it.
#[derive(Debug, thiserror::Error)]
#[error("redis gate store: {0}")]
pub struct StoreError(#[from] redis::RedisError);

/// The gates of a [`GateSet`] kept in Redis. Cheap to clone (the connection is shared).
#[derive(Clone)]
pub struct RedisGates {
    gates: Arc<GateSet>,
    conn: ConnectionManager,
    prefix: Arc<str>,
    check: Arc<Script>,
    release: Arc<Script>,
    give_back: Arc<Script>,
    /// Distinguishes this process's tickets from other instances'.
    instance: u64,
    seq: Arc<AtomicU64>,
}

impl fmt::Debug for RedisGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisGates")
            .field("gates", &self.gates.gates())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// A request let through by every shared gate.
#[derive(Debug)]
#[must_use = "an admission may hold concurrency leases that must be released"]
pub struct SharedAdmission {
    statuses: Vec<GateStatus>,
    leases: Vec<SharedLease>,
    /// Slots reserved ahead at delaying gates.
    holds: Vec<SharedHold>,
    delay: Duration,
}

impl SharedAdmission {
    /// How long the request must wait before it is served (as [`crate::Admission::delay`]).
    pub fn delay(&self) -> Duration {
        self.delay
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

    /// Hand the leases to a guard that gives them back when released or dropped.
    pub fn into_guard(self, store: RedisGates) -> SharedLeaseGuard {
        SharedLeaseGuard {
            store,
            leases: self.leases,
            holds: self.holds,
        }
    }
}

/// A concurrency reservation held in Redis. `Debug` shows no caller key.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedLease {
    key: String,
    member: String,
    ticket: String,
}

impl fmt::Debug for SharedLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedLease")
            .field("ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}

/// Gives shared leases back: [`SharedLeaseGuard::release`] awaits it; dropping the guard
/// unreleased (a cancelled request) releases in a background task when a tokio runtime is
/// there, and otherwise leaves the leases to expire.
#[derive(Debug)]
pub struct SharedLeaseGuard {
    store: RedisGates,
    leases: Vec<SharedLease>,
    holds: Vec<SharedHold>,
}

/// A slot reserved ahead at a delaying GCRA gate in Redis, while its request waits.
#[derive(Debug, Clone)]
struct SharedHold {
    key: String,
    ticket: String,
    /// The gate's interval and tolerance in microseconds, as the script was given them.
    interval: f64,
    tolerance: f64,
}

impl SharedLeaseGuard {
    /// The request's delay ([`SharedAdmission::delay`]) is over and it is served now: its
    /// reserved slots are spent, not given back. (Their records leave Redis with the next
    /// decision after the slot, which drops due reservations.)
    pub fn arrived(&mut self) {
        self.holds.clear();
    }

    /// Release now.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot be reached; the leases then expire on their own.
    pub async fn release(mut self) -> Result<(), StoreError> {
        let holds = std::mem::take(&mut self.holds);
        for h in &holds {
            self.store.give_back(h).await?;
        }
        let leases = std::mem::take(&mut self.leases);
        for l in &leases {
            self.store.release(l).await?;
        }
        Ok(())
    }
}

impl Drop for SharedLeaseGuard {
    fn drop(&mut self) {
        if self.leases.is_empty() && self.holds.is_empty() {
            return;
        }
        let (leases, holds) = (
            std::mem::take(&mut self.leases),
            std::mem::take(&mut self.holds),
        );
        let store = self.store.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for h in &holds {
                    if let Err(e) = store.give_back(h).await {
                        tracing::warn!(error = %e, "reserved slot not given back; it stays spent");
                    }
                }
                for l in &leases {
                    if let Err(e) = store.release(l).await {
                        tracing::warn!(error = %e, "shared lease not released; it will expire");
                    }
                }
            });
        }
    }
}

/// FNV-1a, 64 bits: a stable name for a caller in Redis that is not the caller's key.
fn fnv64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl RedisGates {
    /// Connect to `url` (e.g. `redis://127.0.0.1:6379`) with a connection manager that
    /// reconnects on its own, keeping state under `prefix` (instances that share limits use
    /// the same prefix and the same gate definitions).
    ///
    /// # Errors
    /// [`StoreError`] for a malformed URL or an unreachable server.
    pub async fn connect(url: &str, gates: Arc<GateSet>, prefix: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new(client).await?;
        let instance = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), prefix);
        Ok(Self {
            gates,
            conn,
            prefix: Arc::from(prefix),
            check: Arc::new(Script::new(include_str!("check.lua"))),
            release: Arc::new(Script::new(include_str!("release.lua"))),
            give_back: Arc::new(Script::new(include_str!("give_back.lua"))),
            instance,
            seq: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The gate definitions.
    pub fn gates(&self) -> &Arc<GateSet> {
        &self.gates
    }

    /// Decide one request, shared with every instance on the same Redis and prefix; `trace`
    /// as in [`GateSet::check_traced`].
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot decide; never treat it as an admission.
    pub async fn check_traced(
        &self,
        key: &str,
        account: Option<&str>,
        trace: Option<&str>,
    ) -> Result<Result<SharedAdmission, Rejection>, StoreError> {
        self.decide(key, account, trace, false).await
    }

    /// Decide one request, letting it wait for its slot at delaying gates, as
    /// [`GateSet::check_delayed`]: the slot is reserved in Redis in the same script, so every
    /// instance on the same Redis and prefix queues behind the same schedule. Hand the
    /// admission to [`SharedAdmission::into_guard`] before waiting
    /// [`SharedAdmission::delay`] (a dropped guard gives the slot back) and call
    /// [`SharedLeaseGuard::arrived`] when the wait is over.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot decide; never treat it as an admission.
    pub async fn check_delayed(
        &self,
        key: &str,
        account: Option<&str>,
        trace: Option<&str>,
    ) -> Result<Result<SharedAdmission, Rejection>, StoreError> {
        self.decide(key, account, trace, true).await
    }

    async fn decide(
        &self,
        key: &str,
        account: Option<&str>,
        trace: Option<&str>,
        delay: bool,
    ) -> Result<Result<SharedAdmission, Rejection>, StoreError> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let ticket = format!("{:x}-{seq:x}", self.instance);
        let mut inv = self.check.prepare_invoke();
        inv.arg(&ticket);
        let mut applied = Vec::new();
        // (gate, interval_us, tolerance_us) of the GCRA gates, for a give-back.
        let mut gcra = Vec::new();
        for (i, g) in self.gates.gates().iter().enumerate() {
            let id = match g.scope {
                Scope::Key => key,
                Scope::Account => match account {
                    Some(a) => a,
                    None => continue,
                },
            };
            let rkey = format!("{}:{}:{:016x}", self.prefix, g.name, fnv64(id));
            inv.key(&rkey);
            let member = match (trace, g.scope) {
                (None, _) => format!("#{ticket}"),
                (Some(t), Scope::Key) => format!("t:{t}"),
                (Some(t), Scope::Account) => format!("t:{:016x}:{t}", fnv64(key)),
            };
            match &g.kind {
                Kind::Rate(q) => {
                    let w = micros(q.window());
                    match q.algorithm() {
                        Algorithm::Gcra => {
                            let interval = w / f64::from(q.limit());
                            let tolerance = interval * f64::from(q.burst().saturating_sub(1));
                            inv.arg("g").arg(interval).arg(tolerance).arg(q.limit());
                            gcra.push((i, interval, tolerance));
                        }
                        a => {
                            let kind = if a == Algorithm::FixedWindow {
                                "f"
                            } else {
                                "s"
                            };
                            inv.arg(kind).arg(w).arg(q.limit()).arg(0);
                        }
                    }
                    match g.delay.filter(|_| delay) {
                        Some(d) => {
                            let ns = d.max_wait_ns(q.interval_ns());
                            inv.arg(micros(Duration::from_nanos(ns)).floor())
                        }
                        None => inv.arg(""),
                    };
                }
                Kind::Concurrency {
                    limit,
                    lease,
                    retry_hint,
                } => {
                    inv.arg("c")
                        .arg(micros(*lease))
                        .arg(limit.get())
                        .arg(micros(*retry_hint))
                        .arg(&member);
                }
            }
            applied.push((i, rkey, member));
        }
        if applied.is_empty() {
            return Ok(Ok(SharedAdmission {
                statuses: Vec::new(),
                leases: Vec::new(),
                holds: Vec::new(),
                delay: Duration::ZERO,
            }));
        }
        let mut conn = self.conn.clone();
        let out: Vec<i64> = inv.invoke_async(&mut conn).await?;
        if out.len() != applied.len() * 3 {
            return Err(StoreError(redis::RedisError::from((
                redis::ErrorKind::TypeError,
                "unexpected answer from the gate script",
            ))));
        }
        let gates = self.gates.gates();
        let mut statuses = Vec::new();
        let mut rejected = Vec::new();
        let mut leases = Vec::new();
        let mut holds = Vec::new();
        let mut wait = Duration::ZERO;
        for ((i, rkey, member), r) in applied.into_iter().zip(out.chunks(3)) {
            let remaining = u32::try_from(r[1].max(0)).unwrap_or(u32::MAX);
            let reset = Duration::from_micros(u64::try_from(r[2].max(0)).unwrap_or(0));
            if r[0] == 2 {
                // Held: `reset` is the wait, rounded down to microseconds by the script;
                // one more keeps the request from being served before its slot.
                let held = reset + Duration::from_micros(1);
                wait = wait.max(held);
                statuses.push(status(&gates[i], 0, held));
                if let Some((_, interval, tolerance)) = gcra.iter().find(|(g, ..)| *g == i) {
                    holds.push(SharedHold {
                        key: rkey,
                        ticket: ticket.clone(),
                        interval: *interval,
                        tolerance: *tolerance,
                    });
                }
            } else if r[0] == 1 {
                statuses.push(status(&gates[i], remaining, reset));
                if matches!(gates[i].kind, Kind::Concurrency { .. }) {
                    leases.push(SharedLease {
                        key: rkey,
                        member,
                        ticket: ticket.clone(),
                    });
                }
            } else {
                // Never tell a caller to come back at once (the script's microseconds are
                // rounded down).
                rejected.push(status(&gates[i], 0, reset.max(Duration::from_micros(1))));
            }
        }
        if rejected.is_empty() {
            Ok(Ok(SharedAdmission {
                statuses,
                leases,
                holds,
                delay: wait,
            }))
        } else {
            Ok(Err(Rejection { rejected }))
        }
    }

    /// Give a held request's reserved slot back (it went away before its slot).
    async fn give_back(&self, hold: &SharedHold) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let freed: i64 = self
            .give_back
            .key(&hold.key)
            .arg(&hold.ticket)
            .arg(hold.interval)
            .arg(hold.tolerance)
            .arg("1")
            .invoke_async(&mut conn)
            .await?;
        Ok(freed == 1)
    }

    /// Give a shared lease back. `Ok(true)` when this call freed it; releasing twice or
    /// after expiry frees nothing.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot be reached (the lease then expires on its own).
    pub async fn release(&self, lease: &SharedLease) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let freed: i64 = self
            .release
            .key(&lease.key)
            .arg(&lease.member)
            .arg(&lease.ticket)
            .invoke_async(&mut conn)
            .await?;
        Ok(freed == 1)
    }
}
