//! The `abide` policy: a thin adapter over [`abide_core::Session`], the decision logic the
//! outbox runs, with the outbox's defaults (`abide send` with a providers file that sets
//! nothing but the scenario's pacer).
//!
//! Nothing here decides anything: the engine's worker asks the item's [`Delivery`] when it
//! may send (a slot of the shared pacer, the shared retry budget, a hand-back when the host
//! is paused for long), sends, and reports the answer; the session classifies it, lets the
//! pacer learn, and decides. Items are never held by a sleeping worker: a retry or a
//! hand-back goes back to the queue, as in the outbox.

use std::collections::HashMap;
use std::time::{Instant, SystemTime};

use abide_core::{
    BudgetRole, Decision as Core, Delivery, ItemContext, PacerConfig, Session, SessionConfig, Step,
};
use rand::RngCore;

use crate::policy::{Attempt, ClientPolicy, Decision, Next};
use crate::provider::Response;

#[derive(Debug)]
pub(crate) struct AbidePolicy {
    session: Session,
    /// The delivery of each item a worker holds.
    held: HashMap<usize, Held>,
}

#[derive(Debug)]
struct Held {
    delivery: Delivery,
    /// The session already said "send" (the engine sends at its next event).
    cleared: bool,
}

impl AbidePolicy {
    pub(crate) fn new(epoch: Instant, pacer: PacerConfig) -> Self {
        let cfg = SessionConfig {
            pacer,
            ..SessionConfig::default()
        };
        // Every scenario runs abide as a providers file could configure it.
        debug_assert_eq!(cfg.validate(), Ok(()));
        Self {
            session: Session::new(cfg, epoch),
            held: HashMap::new(),
        }
    }
}

impl ClientPolicy for AbidePolicy {
    fn holds_worker(&self) -> bool {
        false
    }

    fn poll(
        &mut self,
        now: Instant,
        wall: SystemTime,
        attempt: Attempt,
        rng: &mut dyn RngCore,
    ) -> Next {
        let session = &self.session;
        let held = self.held.entry(attempt.item).or_insert_with(|| Held {
            delivery: session.delivery(ItemContext {
                window_attempts: attempt.retries,
                window_start: attempt.arrived,
                role: if attempt.retries == 0 {
                    BudgetRole::First
                } else {
                    BudgetRole::Retry
                },
                send_by: None,
            }),
            cleared: false,
        });
        if held.cleared {
            return Next::Send;
        }
        match held.delivery.poll(session, now, wall, rng) {
            Step::Send => {
                held.cleared = true;
                Next::Send
            }
            Step::WaitUntil(at) => Next::At(at),
            Step::HandBack { after, .. } => {
                self.held.remove(&attempt.item);
                Next::Back(after)
            }
        }
    }

    fn decide(
        &mut self,
        now: Instant,
        wall: SystemTime,
        resp: &Response,
        attempt: Attempt,
        rng: &mut dyn RngCore,
    ) -> Decision {
        let Some(mut held) = self.held.remove(&attempt.item) else {
            // Every send is preceded by a poll that created the delivery.
            return Decision::Deferred;
        };
        let obs = match resp.transport {
            Some(t) => abide_core::Observation::Transport(t),
            None => abide_core::Observation::Http {
                status: resp.status,
                headers: &resp.headers,
                body: &resp.body,
            },
        };
        let answer = held.delivery.on_answer(&self.session, now, wall, &obs, rng);
        match answer.decision {
            Core::Delivered => Decision::Delivered,
            Core::Failed => Decision::Lost,
            Core::Deferred(_) => Decision::Deferred,
            // A connection never made is no attempt: not counted toward the cap.
            Core::Retry { after } if !answer.sent => Decision::Unsent(after),
            Core::Retry { after } => Decision::Retry(after),
            // The simulated provider never asks for credentials; resend at once.
            Core::Resend => Decision::Retry(std::time::Duration::ZERO),
        }
    }
}
