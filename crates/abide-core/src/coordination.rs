//! The seam through which several nodes sending to one host (one provider, one API key)
//! share what its limit is about: the send schedule, the host pause, the learned rate and
//! the retry budget.
//!
//! # Why
//! A provider's limit belongs to the API key, not to the process. Two nodes that each
//! learn the limit alone send twice it together, and a `Retry-After` one node hears does
//! not pause the other. A [`Session`](crate::session::Session) keeps deciding alone (the
//! one decision logic); a [`Coordination`] only *shares the state* it decides with:
//!
//! - **the send schedule**: a slot comes from a schedule common to every node, so the sum
//!   over nodes follows the pacer's rate ([`Coordination::reserve`]);
//! - **the host pause**: a pause one node's pacer took is published, and every node's
//!   pacer is paused until the same instant ([`Coordination::push`], [`Coordination::pull`]);
//! - **the learned rate**: a decrease one node made is adopted by the others
//!   ([`Pacer::adopt_shared`]), a node joining late starts from the shared estimate, and
//!   each pacer is told its share of the traffic ([`Pacer::set_share`]) so that what it sees
//!   accepted reads as the whole host's;
//! - **the retry budget**: deposits, withdrawals and refunds draw on one budget.
//!
//! [`Local`] is today's behaviour, in memory, for one node: it hands every call to the
//! pacer and the budget. A shared implementation (Redis, in `abide-outbox`) keeps a local
//! view that a background task exchanges with the shared store; these calls never wait on
//! the network, and time is the monotonic `now` passed in.

use std::fmt;
use std::time::{Duration, Instant};

use crate::budget::RetryBudget;
use crate::pacer::{NotYet, Pacer};

/// The answer to [`Coordination::reserve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Send at this instant (or later, as for [`Pacer::reserve`]).
    Slot(Instant),
    /// No slot is at hand yet (no shared slot, or the next one lies beyond the pacer's
    /// slot horizon): ask again at this instant.
    Retry(Instant),
    /// The next slot (this instant) lies after the caller's deadline; nothing was taken.
    PastDeadline(Instant),
}

crate::named_enum! {
    /// How a node's state is shared right now (`local`, `redis` or `fallback`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum CoordinationMode("coordination mode") {
        /// One node, in memory: nothing is shared.
        #[default]
        Local = "local",
        /// Shared through Redis.
        Redis = "redis",
        /// Redis is configured but unreachable or slow: this node sends its share of the last
        /// shared rate (divided by the live node count) until Redis answers again.
        Fallback = "fallback",
    }
}

/// A node another node saw through the shared store (its heartbeat), for status displays.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct NodeSeen {
    /// The node's id.
    pub node: String,
    /// Time since its last heartbeat, as of the status (seconds in JSON).
    #[serde(
        rename = "last_seen_ago_secs",
        serialize_with = "crate::serde_secs::secs"
    )]
    pub last_seen_ago: Duration,
    /// How it said it shares (`redis`, or the mode it rejoined from), as it published it.
    pub mode: String,
    /// Its fraction of the slots granted to all nodes (0..=1), as it published it.
    pub share: f64,
    /// Its pacer's rate (requests per second), as it published it.
    pub rate: f64,
}

/// What a coordination layer says of itself, for status displays and metrics.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct CoordinationStatus {
    /// This node's id (unique per process).
    pub node: String,
    /// How state is shared right now.
    pub mode: CoordinationMode,
    /// Nodes seen alive (their heartbeats not expired), this one included; 1 when local.
    pub nodes: u32,
    /// This node's fraction of the host's traffic (0..=1).
    pub share: f64,
    /// End of the shared pause, if the host is paused (monotonic; not serialised).
    #[serde(skip)]
    pub paused_until: Option<Instant>,
    /// The node that set the shared pause, when known.
    pub pause_by: Option<String>,
    /// How long this node has been in fallback (seconds in JSON); `None` unless it is.
    #[serde(
        rename = "fallback_for_secs",
        serialize_with = "crate::serde_secs::opt"
    )]
    pub fallback_for: Option<Duration>,
    /// `nodes` is an assumption (the configured count, Redis never answered since start),
    /// not a count of heartbeats.
    pub nodes_assumed: bool,
    /// The learned rate shared by every node (requests per second), when one is.
    pub shared_rate: Option<f64>,
    /// The learned ceiling shared by every node (requests per second), when one is.
    pub shared_ceiling: Option<f64>,
    /// The nodes seen alive at the last look (at most [`MAX_NODES_SHOWN`]), this one
    /// included; empty when local.
    pub peers: Vec<NodeSeen>,
}

/// Most nodes a [`CoordinationStatus`] lists (a bound on what a shared store reports).
pub const MAX_NODES_SHOWN: usize = 32;

/// Shares one host's schedule, pause, learned rate and retry budget between nodes; see the
/// [module docs](self). Every method is synchronous and cheap: no method waits on I/O.
pub trait Coordination: Send + Sync + fmt::Debug {
    /// A send slot at or after `now` for a request to the host whose pacer is `pacer`, no
    /// later than `deadline` when there is one (see [`Pacer::reserve_within`]).
    fn reserve(&self, pacer: &Pacer, now: Instant, deadline: Option<Instant>) -> Reservation;
    /// A slot from [`Coordination::reserve`] that will not be used (its item goes back to
    /// its queue unsent), at `now`: another sender may take it. The default drops it, as a
    /// pacer's own slot is dropped (it no longer holds back a unit of an advertised quota).
    fn release(&self, pacer: &Pacer, slot: Instant, _now: Instant) {
        pacer.release(slot);
    }
    /// Before a decision at `now`: bring what other nodes shared into `pacer` (a pause, a
    /// decrease, this node's share of the traffic).
    fn pull(&self, pacer: &Pacer, now: Instant);
    /// After an answer at `now`: share what `pacer` just learned (a pause, a decrease).
    fn push(&self, pacer: &Pacer, now: Instant);
    /// One first attempt at `now` (earns retry allowance).
    fn deposit(&self, budget: &RetryBudget, now: Instant);
    /// Spend one retry at `now`; `false` when the budget refuses it.
    fn try_withdraw(&self, budget: &RetryBudget, now: Instant) -> bool;
    /// A retry withdrawn at `withdrawn_at` succeeded: give it back (see [`crate::budget`]).
    fn refund(&self, budget: &RetryBudget, withdrawn_at: Instant);
    /// This node and how it shares, at `now`.
    fn status(&self, pacer: &Pacer, now: Instant) -> CoordinationStatus;
}

/// One node, in memory: the pacer's own schedule and pauses, the node's own budget.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Coordination for Local {
    fn reserve(&self, pacer: &Pacer, now: Instant, deadline: Option<Instant>) -> Reservation {
        match pacer.reserve_within(now, deadline) {
            Ok(at) => Reservation::Slot(at),
            Err(NotYet::AskAgainAt(at)) => Reservation::Retry(at),
            Err(NotYet::PastDeadline(at)) => Reservation::PastDeadline(at),
        }
    }

    fn pull(&self, _pacer: &Pacer, _now: Instant) {}

    fn push(&self, _pacer: &Pacer, _now: Instant) {}

    fn deposit(&self, budget: &RetryBudget, now: Instant) {
        budget.deposit(now);
    }

    fn try_withdraw(&self, budget: &RetryBudget, now: Instant) -> bool {
        budget.try_withdraw(now)
    }

    fn refund(&self, budget: &RetryBudget, withdrawn_at: Instant) {
        budget.refund(withdrawn_at);
    }

    fn status(&self, pacer: &Pacer, now: Instant) -> CoordinationStatus {
        CoordinationStatus {
            node: "local".into(),
            mode: CoordinationMode::Local,
            nodes: 1,
            share: 1.0,
            paused_until: pacer.paused_until(now),
            ..CoordinationStatus::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};

    use rand::SeedableRng;

    use super::*;
    use crate::classify::Observation;
    use crate::session::{BudgetRole, ItemContext, Session, SessionConfig, Step};
    use crate::{Clock, ManualClock};

    /// A coordination that grants no slot at first, then slots it was handed, refuses
    /// every retry, and counts what the session shares.
    #[derive(Debug, Default)]
    struct Scripted {
        refusals: AtomicU32,
        pushes: AtomicU32,
        pulls: AtomicU32,
        deposits: AtomicU32,
    }

    impl Coordination for Scripted {
        fn reserve(&self, _pacer: &Pacer, now: Instant, _: Option<Instant>) -> Reservation {
            if self.refusals.fetch_add(1, Ordering::SeqCst) < 2 {
                Reservation::Retry(now + Duration::from_millis(5))
            } else {
                Reservation::Slot(now + Duration::from_millis(1))
            }
        }
        fn pull(&self, _pacer: &Pacer, _now: Instant) {
            self.pulls.fetch_add(1, Ordering::SeqCst);
        }
        fn push(&self, _pacer: &Pacer, _now: Instant) {
            self.pushes.fetch_add(1, Ordering::SeqCst);
        }
        fn deposit(&self, _budget: &RetryBudget, _now: Instant) {
            self.deposits.fetch_add(1, Ordering::SeqCst);
        }
        fn try_withdraw(&self, _budget: &RetryBudget, _now: Instant) -> bool {
            false
        }
        fn refund(&self, _budget: &RetryBudget, _withdrawn_at: Instant) {}
        fn status(&self, _pacer: &Pacer, _now: Instant) -> CoordinationStatus {
            CoordinationStatus {
                node: "n".into(),
                mode: CoordinationMode::Redis,
                nodes: 2,
                share: 0.5,
                ..CoordinationStatus::default()
            }
        }
    }

    #[test]
    fn the_session_takes_slots_budget_and_sharing_from_its_coordination() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let coord = Arc::new(Scripted::default());
        let s = Session::with_coordination(
            SessionConfig::default(),
            clock.monotonic(),
            Arc::clone(&coord) as Arc<dyn Coordination>,
        );
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut d = s.delivery(ItemContext::first(clock.now()));
        let mut waits = Vec::new();
        let step = loop {
            match d.poll(&s, clock.monotonic(), clock.now(), &mut rng) {
                Step::WaitUntil(at) => {
                    waits.push(at - clock.monotonic());
                    clock.advance(at - clock.monotonic());
                }
                other => break other,
            }
        };
        assert_eq!(step, Step::Send);
        // Two refusals (ask again in 5 ms), then the granted slot 1 ms out.
        let ms = Duration::from_millis;
        assert_eq!(waits, [ms(5), ms(5), ms(1)]);
        assert_eq!(coord.deposits.load(Ordering::SeqCst), 1);
        assert!(coord.pulls.load(Ordering::SeqCst) >= 3);
        let obs = Observation::Http {
            status: http::StatusCode::ACCEPTED,
            headers: &http::HeaderMap::new(),
            body: b"",
        };
        let _ = d.on_answer(&s, clock.monotonic(), clock.now(), &obs, &mut rng);
        assert_eq!(coord.pushes.load(Ordering::SeqCst), 1);
        // The shared budget refuses a retry: the item is handed back, never sent.
        let retry = ItemContext {
            role: BudgetRole::Retry,
            window_attempts: 1,
            ..ItemContext::first(clock.now())
        };
        let mut d = s.delivery(retry);
        let step = loop {
            match d.poll(&s, clock.monotonic(), clock.now(), &mut rng) {
                Step::WaitUntil(at) => clock.advance(at - clock.monotonic()),
                other => break other,
            }
        };
        assert!(
            matches!(step, Step::HandBack { reason, .. } if reason == crate::HandBackReason::RetryBudgetExhausted),
            "{step:?}"
        );
    }

    #[test]
    fn local_is_the_pacer_and_budget_alone() {
        let clock = ManualClock::new(UNIX_EPOCH);
        let t0 = clock.monotonic();
        let cfg = crate::PacerConfig {
            initial_rate: 4.0,
            ..crate::PacerConfig::default()
        };
        let pacer = Pacer::new(cfg, t0);
        assert_eq!(Local.reserve(&pacer, t0, None), Reservation::Slot(t0));
        assert_eq!(
            Local.reserve(&pacer, t0, None),
            Reservation::Slot(t0 + Duration::from_millis(250))
        );
        // A slot after the caller's deadline is not taken: the next caller gets it.
        let soon = Some(t0 + Duration::from_millis(100));
        let next = t0 + Duration::from_millis(500);
        assert_eq!(
            Local.reserve(&pacer, t0, soon),
            Reservation::PastDeadline(next)
        );
        assert_eq!(Local.reserve(&pacer, t0, None), Reservation::Slot(next));
        let budget = RetryBudget::new(
            crate::RetryBudgetConfig {
                ttl: Duration::from_secs(10),
                min_per_sec: 0,
                retry_ratio: 1.0,
            },
            t0,
        );
        assert!(!Local.try_withdraw(&budget, t0));
        Local.deposit(&budget, t0);
        assert!(Local.try_withdraw(&budget, t0));
        let st = Local.status(&pacer, t0);
        assert_eq!((st.mode.as_str(), st.nodes), ("local", 1));
    }
}
