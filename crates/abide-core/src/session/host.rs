//! One host's shared decision state: [`Session`].

use std::sync::Arc;
use std::time::Instant;

use super::config::SessionConfig;
use super::in_flight::{InFlight, InFlightSnapshot};
use super::outage::Outage;
use super::refusal::Refusals;
use crate::budget::RetryBudget;
use crate::classify::Classifier;
use crate::coordination::{Coordination, Local};
use crate::pacer::Pacer;

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
    pub(super) outage: Outage,
    pub(super) refusals: Refusals,
    /// Out-of-quota answers in a row: the account's, so the host pauses from the first.
    pub(super) quota: Refusals,
    pub(super) in_flight: Arc<InFlight>,
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
