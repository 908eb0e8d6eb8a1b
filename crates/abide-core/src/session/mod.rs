//! One host's delivery decisions, in one place.
//!
//! # Why
//! What happens to one request, from "may it go now?" to "what next, after this answer?",
//! is one decision; spread over callers it drifts apart (a queue's dispatcher and workers,
//! a simulator, in-process clients each deciding a little differently). A [`Session`] owns
//! that whole decision for one host (one provider, one
//! API key): classification → `Retry-After` clamp → retry budget → pacer → what to do. It
//! does no I/O and reads no clock: callers pass `Instant`s and `SystemTime`s, send the
//! request themselves, and wait themselves. The outbox, `abide sim` and in-process clients
//! all drive the same type, so a decision is made (and tested) once.
//!
//! ```text
//!            ┌──────────── Delivery::poll ────────────┐        Delivery::on_answer
//!  item ──▶  paused long? → hand back                 │ send ──▶ classify → pacer learns
//!            reserve a slot → wait until it           │          → success / fail / defer
//!            admitted? (a pause began) → reserve again│          / retry at T / resend
//!            retry budget: deposit / withdraw / wait  │
//!            └────────────────────────────────────────┘
//! ```
//!
//! A [`Session`] is shared by every worker sending to the host (`&self` everywhere; the
//! pacer and the budget lock briefly inside). Besides the pace, it bounds the requests on
//! the wire for the host when the server advertises a concurrency quota (`in_flight.rs`):
//! a full host is one more [`Step::WaitUntil`], so every caller honours it. A [`Delivery`]
//! is one item's passage through it: created when a worker takes the item, dropped when
//! the item is sent back to its queue (retry, hand-back) or resolved; dropped with its
//! request on the wire, it gives the request's place back.
//!
//! # Example
//! ```
//! # use abide_core::*; use abide_core::session::*; use rand::SeedableRng;
//! # use std::time::{Duration, UNIX_EPOCH};
//! let clock = ManualClock::new(UNIX_EPOCH);
//! let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
//! let session = Session::new(SessionConfig::default(), clock.monotonic());
//! let mut d = session.delivery(ItemContext::first(clock.now()));
//! assert_eq!(d.poll(&session, clock.monotonic(), clock.now(), &mut rng), Step::Send);
//! let headers = http::HeaderMap::from_iter([(http::header::RETRY_AFTER, "30".parse()?)]);
//! let obs = Observation::Http { status: http::StatusCode::TOO_MANY_REQUESTS, headers: &headers, body: b"" };
//! let answer = d.on_answer(&session, clock.monotonic(), clock.now(), &obs, &mut rng);
//! assert_eq!(answer.decision, Decision::Retry { after: Duration::from_secs(30) });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod decide;
mod delivery;
mod in_flight;
pub mod limits;
mod outage;
mod refusal;
mod setting_error;
#[cfg(test)]
mod tests;
mod validate;

use std::sync::Arc;
use std::time::Instant;

pub use config::{RetryConfig, SessionConfig};
pub use decide::is_past_max_age;
pub use decide::{Decision, DeferReason};
pub use delivery::{Answer, Delivery, HandBackReason, Step};
pub use in_flight::{InFlightSnapshot, DECREASE as IN_FLIGHT_DECREASE, HELD_BACK_SHARE};
pub use setting_error::SettingError;

use crate::budget::RetryBudget;
use crate::classify::Classifier;
use crate::coordination::{Coordination, Local};
use crate::pacer::Pacer;
use in_flight::InFlight;
use outage::Outage;
use refusal::Refusals;

/// What the item being delivered has been through, as its queue knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemContext {
    /// Attempts made in the item's current attempt window (reset by a person's requeue).
    pub window_attempts: u32,
    /// When the current attempt window began (enqueue or requeue time).
    pub window_start: std::time::SystemTime,
    /// What the next attempt means for the retry budget.
    pub role: BudgetRole,
    /// Latest wall time at which a request for this item may still start (e.g. a lease's
    /// end minus the request timeout); `None` without such a bound.
    pub send_by: Option<std::time::SystemTime>,
}

impl ItemContext {
    /// A new item, never tried, whose window starts at `window_start`.
    pub fn first(window_start: std::time::SystemTime) -> Self {
        Self {
            window_attempts: 0,
            window_start,
            role: BudgetRole::First,
            send_by: None,
        }
    }
}

/// What an item's next attempt means for the host's retry budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetRole {
    /// New work for this host (never tried, or just failed over to it): deposits.
    First,
    /// Repeats an attempt the remote refused or failed: withdraws, or waits if refused.
    Retry,
    /// Repeats an attempt whose answer was never seen (a reclaimed lease after a crash or
    /// hang). No remote failure is being retried, so it spends nothing; it is not new work
    /// either (a crash loop must not inflate the allowance), so it earns nothing. It is
    /// still paced like every other send.
    Resume,
}

/// One host's shared decision state: classifier, pacer, retry budget, rules.
///
/// # Clone
/// Not `Clone`: share one `Session` per host (e.g. in an `Arc`) so that every worker draws
/// on the same pace, pauses and budget. [`Session::pacer`] and [`Session::budget`] hand out
/// the shared parts for displays.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    classifier: Classifier,
    pacer: Arc<Pacer>,
    budget: Arc<RetryBudget>,
    outage: Outage,
    refusals: Refusals,
    /// Out-of-quota answers in a row: the account's, so the host pauses from the first.
    quota: Refusals,
    in_flight: Arc<InFlight>,
    coordination: Arc<dyn Coordination>,
}

impl Session {
    /// A session whose pacer and budget start at `now`, alone on its host
    /// ([`Local`] coordination).
    pub fn new(cfg: SessionConfig, now: Instant) -> Self {
        Self::with_coordination(cfg, now, Arc::new(Local))
    }

    /// A session whose schedule, pauses, learned rate and retry budget are shared with
    /// other nodes through `coordination` (see [`crate::coordination`]); it decides as
    /// [`Session::new`]'s does.
    pub fn with_coordination(
        cfg: SessionConfig,
        now: Instant,
        coordination: Arc<dyn Coordination>,
    ) -> Self {
        let classifier = Classifier::default()
            .with_retry_after_policy(cfg.retry_after.clone())
            .with_overrides(cfg.classify.clone())
            .with_dialect(cfg.rate_limit_dialect);
        Self {
            pacer: Arc::new(Pacer::new(cfg.pacer, now)),
            budget: Arc::new(RetryBudget::new(cfg.budget, now)),
            outage: Outage::new(cfg.outage_pause, cfg.max_outage_pause),
            refusals: Refusals::new(
                cfg.refusal_streak,
                cfg.refusal_span,
                cfg.refusal_pause,
                cfg.retry_after.cap,
            ),
            quota: Refusals::new(1, cfg.refusal_span, cfg.refusal_pause, cfg.retry_after.cap),
            in_flight: Arc::default(),
            coordination,
            classifier,
            cfg,
        }
    }

    /// Start delivering one item.
    pub fn delivery(&self, item: ItemContext) -> Delivery {
        Delivery::new(item)
    }

    /// The rules.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// The classifier (HTTP and SMPP tables with this host's overrides).
    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// The host's pacer, shared by every delivery.
    pub fn pacer(&self) -> &Arc<Pacer> {
        &self.pacer
    }

    /// The host's retry budget, shared by every delivery.
    pub fn budget(&self) -> &Arc<RetryBudget> {
        &self.budget
    }

    /// How the host's state is shared with other nodes.
    pub fn coordination(&self) -> &Arc<dyn Coordination> {
        &self.coordination
    }

    /// The host's requests in flight and their limit (`session/in_flight.rs`: set from an
    /// advertised concurrency quota, lowered by its refusals; per node).
    pub fn in_flight(&self) -> InFlightSnapshot {
        self.in_flight.snapshot()
    }

    /// Whether the host is in a transport outage (connections refused) right now, and
    /// since how many consecutive failures.
    pub fn outage_streak(&self) -> u32 {
        self.outage.streak()
    }
}
