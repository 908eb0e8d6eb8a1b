//! The `abide` policy: the real abide-core code, wired as an outbox would wire it.
//!
//! Nothing here decides anything abide-core does not: the classifier reads the provider's
//! `HeaderMap`, its verdict feeds the one shared pacer, the `Retry-After` delay comes from the
//! classifier (clamped by `RetryAfterPolicy`), our own delay from `Backoff`, and every retry
//! draws from the one `RetryBudget`. Items are never held by a sleeping worker: a retry goes
//! back to the queue, as in the outbox.

use std::time::{Duration, Instant, SystemTime};

use abide_core::{
    Backoff, Classifier, Observation, Pacer, PacerConfig, RetryBudget, RetryBudgetConfig,
    VerdictClass,
};
use rand::RngCore;

use crate::policy::{Attempt, ClientPolicy, Decision};
use crate::provider::Response;

/// Attempts after which an item is parked for a person (the outbox's DEFERRED), not lost.
const MAX_ATTEMPTS: u32 = 12;

/// How long an item waits when the retry budget says no: it stays queued, nothing is lost.
const BUDGET_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) struct AbidePolicy {
    classifier: Classifier,
    backoff: Backoff,
    budget: RetryBudget,
    pacer: Pacer,
}

impl AbidePolicy {
    pub(crate) fn new(now: Instant, pacer: PacerConfig) -> Self {
        Self {
            classifier: Classifier::default(),
            backoff: Backoff::default(),
            budget: RetryBudget::new(RetryBudgetConfig::default(), now),
            pacer: Pacer::new(pacer, now),
        }
    }
}

impl ClientPolicy for AbidePolicy {
    fn holds_worker(&self) -> bool {
        false
    }

    fn first_attempt(&mut self, now: Instant) {
        self.budget.deposit(now);
    }

    fn send_at(&mut self, now: Instant) -> Instant {
        self.pacer.reserve(now)
    }

    fn recheck(&mut self, now: Instant) -> Option<Instant> {
        // A slot reserved before a throttle paused the host must not fire into the pause.
        self.pacer.admit(now).err().map(|_| self.pacer.reserve(now))
    }

    fn decide(
        &mut self,
        now: Instant,
        wall: SystemTime,
        resp: &Response,
        attempt: Attempt,
        rng: &mut dyn RngCore,
    ) -> Decision {
        let obs = Observation::Http {
            status: resp.status,
            headers: &resp.headers,
        };
        let verdict = self.classifier.classify(&obs, wall, rng);
        // When the slot was reserved tells the pacer whether this answer is news about the
        // current rate or an echo of one it already cut.
        self.pacer.on_verdict_for(now, attempt.reserved, &verdict);
        match verdict.class {
            VerdictClass::Success => return Decision::Delivered,
            VerdictClass::Terminal => return Decision::Lost,
            VerdictClass::Throttle
            | VerdictClass::Retry
            | VerdictClass::RefreshCredentials
            | VerdictClass::Unknown => {}
        }
        if attempt.retries + 1 >= MAX_ATTEMPTS {
            return Decision::Deferred;
        }
        if !self.budget.try_withdraw(now) {
            return Decision::Retry(BUDGET_WAIT);
        }
        let delay = match verdict.retry_after {
            Some(ra) => ra.delay,
            None => {
                let own = self
                    .backoff
                    .delay(attempt.retries + 1, attempt.previous, rng);
                self.classifier.retry_after.from_backoff(own).delay
            }
        };
        Decision::Retry(delay)
    }
}
