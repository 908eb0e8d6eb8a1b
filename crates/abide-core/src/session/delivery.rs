//! One item's passage through a [`Session`]: wait for a slot, settle the retry budget,
//! send, and decide from the answer.

use std::time::{Duration, Instant, SystemTime};

use rand::RngCore;

use super::decide::{decide, decide_unsent, DecideInput, Decision, DeferReason};
use super::host::Session;
use super::in_flight::Permit;
use super::item::{BudgetRole, ItemContext};
use super::refusal::Refused;
use crate::classify::{Observation, TransportFailure, Verdict, VerdictClass};
use crate::coordination::Reservation;
use crate::retry_after::RetryDelay;

/// What the caller does next, from [`Delivery::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Send the request now, then report the answer to [`Delivery::on_answer`].
    Send,
    /// Wait until this instant (monotonic), then poll again.
    WaitUntil(Instant),
    /// Give the item back to its queue unsent: no attempt was made, none is counted. It is
    /// due again `after` from now.
    HandBack {
        /// Wait before the item is due again.
        after: Duration,
        /// Why.
        reason: HandBackReason,
    },
}

crate::named_enum! {
    /// Why an item was handed back unsent. `as_str` is the stable stored reason.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum HandBackReason("hand-back reason") {
        /// The host is paused for longer than a worker waits holding an item.
        ProviderPaused = "provider_paused",
        /// The item's `send_by` passed (its lease is about to end).
        LeaseNearExpiry = "lease_near_expiry",
        /// The retry budget refused this retry; it waits instead of being dropped.
        RetryBudgetExhausted = "retry_budget_exhausted",
        /// The caller is shutting down (never produced by the session; for callers' records).
        Shutdown = "shutdown",
    }
}

/// What the session made of one answer, from [`Delivery::on_answer`].
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The classifier's verdict (what the remote said, as we read it).
    pub verdict: Verdict,
    /// What we decided.
    pub decision: Decision,
    /// For a retry: the delay chosen and why (`Retry-After` honoured, floored, capped,
    /// unparseable, or our own backoff).
    pub delay: Option<RetryDelay>,
    /// This transport failure began an outage episode of the host (warn once).
    pub outage_began: bool,
    /// This answer is one of a run of refusals across items: the host's credential is
    /// refused, the host is paused, and a refused item is deferred instead of failed
    /// (`session/refusal.rs`).
    pub credential_refused: bool,
    /// This answer recognised that run (warn once).
    pub refusal_began: bool,
    /// The request reached the remote, or may have: an attempt, to be recorded and charged.
    /// `false` for a connection never made ([`TransportFailure::Connect`]): not counted
    /// toward the attempt cap, and nothing the remote said (the decision is then always
    /// [`Decision::Retry`], no sooner than the host's outage pause ends).
    pub sent: bool,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// When the slot was reserved: tells the pacer whether an answer is news.
    reserved_at: Instant,
    at: Instant,
}

impl Session {
    /// Start delivering one item.
    pub fn delivery(&self, item: ItemContext) -> Delivery {
        Delivery::new(item)
    }
}

/// One item's passage through a [`Session`]; see the [module docs](super).
///
/// # Clone
/// A clone holds no place on the wire: the place of a request sent under the original is
/// released by the original (its `on_answer`, or its drop).
#[derive(Debug)]
pub struct Delivery {
    item: ItemContext,
    slot: Option<Slot>,
    /// Reservation time of the request now on the wire.
    sent_slot: Option<Instant>,
    rounds: u32,
    sends: u32,
    budget_settled: bool,
    refreshed: bool,
    /// When this delivery's retry was withdrawn from the budget (refunded on success).
    withdrawn_at: Option<Instant>,
    /// The place of the request on the wire (host's in-flight limit); released on drop.
    permit: Option<Permit>,
    /// The next send already waited for a place.
    waited_for_place: bool,
}

impl Clone for Delivery {
    fn clone(&self) -> Self {
        Self {
            item: self.item,
            slot: self.slot,
            sent_slot: self.sent_slot,
            rounds: self.rounds,
            sends: self.sends,
            budget_settled: self.budget_settled,
            refreshed: self.refreshed,
            withdrawn_at: self.withdrawn_at,
            permit: None,
            waited_for_place: self.waited_for_place,
        }
    }
}

impl Delivery {
    pub(super) fn new(item: ItemContext) -> Self {
        Self {
            item,
            slot: None,
            sent_slot: None,
            rounds: 0,
            sends: 0,
            budget_settled: false,
            refreshed: false,
            withdrawn_at: None,
            permit: None,
            waited_for_place: false,
        }
    }

    /// Requests sent under this delivery so far (attempts: a connection never made is not
    /// one once its answer is in).
    pub fn sends(&self) -> u32 {
        self.sends
    }

    /// What the caller does next at monotonic `now` / wall `wall`: wait for the host's pace,
    /// send, or hand the item back. Call again after every wait.
    pub fn poll(
        &mut self,
        s: &Session,
        now: Instant,
        wall: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Step {
        let cfg = s.config();
        let coord = s.coordination();
        // What other nodes on the host's limit shared: a pause, a decrease, our share.
        coord.pull(s.pacer(), now);
        let slot = loop {
            let slot = match self.slot {
                Some(slot) => slot,
                None => {
                    // A long pause (a suspension backing off, a long Retry-After): do not
                    // hold the item through it where other workers cannot see it.
                    if let Some(until) = s.pacer().paused_until(now) {
                        let left = until - now;
                        if left > cfg.hold_through_pause {
                            return hand_back(left, HandBackReason::ProviderPaused);
                        }
                    }
                    // A slot past `send_by` is not taken: given up, it would still push
                    // every later slot back (a queue of them stalled whole runs).
                    let deadline = self
                        .item
                        .send_by
                        .map(|by| now + by.duration_since(wall).unwrap_or_default());
                    let at = match coord.reserve(s.pacer(), now, deadline) {
                        Reservation::Slot(at) => at,
                        Reservation::PastDeadline(at) => {
                            return hand_back(
                                at.saturating_duration_since(now),
                                HandBackReason::LeaseNearExpiry,
                            );
                        }
                        // No slot at hand yet (beyond the horizon, or no shared slot): no
                        // attempt made, ask again then, at the rate of then.
                        Reservation::Retry(later) => {
                            let later = later.max(now);
                            let wait = later - now;
                            if self.item.send_by.is_some_and(|by| wall + wait >= by) {
                                return hand_back(wait, HandBackReason::LeaseNearExpiry);
                            }
                            return Step::WaitUntil(later);
                        }
                    };
                    let slot = Slot {
                        reserved_at: now,
                        at,
                    };
                    self.slot = Some(slot);
                    slot
                }
            };
            if now < slot.at {
                // A slot the item cannot use before its `send_by` (a lease ending): give
                // the item back now, due at the slot, rather than wait holding it.
                let wait = slot.at - now;
                if self.item.send_by.is_some_and(|by| wall + wait >= by) {
                    self.slot = None;
                    coord.release(s.pacer(), slot.at, now);
                    return hand_back(wait, HandBackReason::LeaseNearExpiry);
                }
                return Step::WaitUntil(slot.at);
            }
            // A pause that began while we waited voids the slot: never send into a pause.
            match s.pacer().admit(now) {
                Ok(()) => break slot,
                Err(until) => {
                    self.slot = None;
                    s.pacer().release(slot.at);
                    if self.rounds >= cfg.max_admit_rounds {
                        let left = until.saturating_duration_since(now);
                        return hand_back(left, HandBackReason::ProviderPaused);
                    }
                    self.rounds += 1;
                }
            }
        };
        if self.item.send_by.is_some_and(|by| wall >= by) {
            self.slot = None;
            coord.release(s.pacer(), slot.at, now);
            return hand_back(Duration::ZERO, HandBackReason::LeaseNearExpiry);
        }
        // The host's limit on requests in flight: wait, keeping the slot, until one is
        // answered (the slot is only used late; the pace is not exceeded).
        if self.permit.is_none() {
            match s.in_flight.try_acquire(now, self.waited_for_place) {
                Ok(permit) => {
                    self.permit = Some(permit);
                    self.waited_for_place = false;
                }
                Err(at) => {
                    self.waited_for_place = true;
                    return Step::WaitUntil(at);
                }
            }
        }
        if !self.budget_settled {
            match self.item.role {
                BudgetRole::First => coord.deposit(s.budget(), now),
                BudgetRole::Resume => {}
                BudgetRole::Retry if coord.try_withdraw(s.budget(), now) => {
                    self.withdrawn_at = Some(now);
                }
                BudgetRole::Retry => {
                    // Budget exhaustion never drops work: the item waits longer.
                    self.slot = None;
                    self.permit = None;
                    coord.release(s.pacer(), slot.at, now);
                    let n = self.item.window_attempts.max(1);
                    let backoff = cfg.retry.backoff.delay(n, None, rng);
                    let after = backoff.max(cfg.budget_denied_delay);
                    return hand_back(after, HandBackReason::RetryBudgetExhausted);
                }
            }
            self.budget_settled = true;
        }
        self.slot = None;
        self.sent_slot = Some(slot.reserved_at);
        self.sends += 1;
        Step::Send
    }

    /// Classify the answer to the request just sent, let the host's pacer (and outage
    /// tracking) learn from it, and decide what happens to the item.
    pub fn on_answer(
        &mut self,
        s: &Session,
        now: Instant,
        wall: SystemTime,
        obs: &Observation<'_>,
        rng: &mut dyn RngCore,
    ) -> Answer {
        let cfg = s.config();
        let mut verdict = s.classifier().classify(obs, wall, rng);
        if !cfg.use_rate_limit_headers {
            verdict.rate_limit = None;
        }
        let reserved_at = self.sent_slot.take().unwrap_or(now);
        if let Some(permit) = self.permit.take() {
            s.in_flight.on_answer(permit, now, &verdict);
        }
        // The reservation time tells the pacer whether this answer is news about its
        // current rate or an echo of a round it already cut.
        s.pacer().on_verdict_for(now, reserved_at, &verdict);
        // Share what the pacer just learned (a pause, a decrease) with the other nodes.
        s.coordination().push(s.pacer(), now);
        let outage_began = match obs {
            Observation::Transport(_) => s.outage.on_failure(s.pacer(), now, reserved_at),
            _ => {
                s.outage.on_answer();
                false
            }
        };
        let refused = match obs {
            Observation::Transport(_) => Refused::No,
            Observation::Http { status, .. } => {
                let refusal = status.as_u16() == 403 && verdict.class == VerdictClass::Terminal;
                s.refusals.on_answer(s.pacer(), now, reserved_at, refusal)
            }
            Observation::Smpp { .. } => s.refusals.on_answer(s.pacer(), now, reserved_at, false),
        };
        if !matches!(obs, Observation::Transport(_)) {
            // Out of quota is the account's, not the item's: the host pauses (refusal_pause,
            // doubling per such answer in a row, up to the Retry-After cap), so the rest of
            // the queue is not sent only to be refused; each item answered so is deferred.
            let out = verdict.class == VerdictClass::OutOfQuota;
            let _ = s.quota.on_answer(s.pacer(), now, reserved_at, out);
        }
        let (credential_refused, refusal_began) = match refused {
            Refused::No => (false, false),
            Refused::Credential { began } => (true, began),
        };
        // No byte reached the remote: not an attempt (it stays a host outage, above). The
        // retry drawn from the budget for it added no traffic: give it back.
        let sent = !matches!(obs, Observation::Transport(TransportFailure::Connect));
        if !sent {
            self.sends = self.sends.saturating_sub(1);
            if let Some(at) = self.withdrawn_at.take() {
                s.coordination().refund(s.budget(), at);
            }
        }
        if verdict.class == VerdictClass::Success {
            // A retry that succeeded added no failing traffic: it pays for the next one
            // (crate::budget, "Recovery").
            if let Some(at) = self.withdrawn_at.take() {
                s.coordination().refund(s.budget(), at);
            }
        }
        if verdict.class == VerdictClass::RefreshCredentials && !self.refreshed {
            self.refreshed = true;
            return Answer {
                verdict,
                decision: Decision::Resend,
                delay: None,
                outage_began,
                credential_refused,
                refusal_began,
                sent,
            };
        }
        let pause_left = s.pacer().paused_until(now).map(|u| u - now);
        let input = DecideInput {
            rules: &cfg.retry,
            clamp: &s.classifier().retry_after,
            item: &self.item,
            made: self.sends,
            wall,
            pause_left,
        };
        let (mut decision, delay) = if sent {
            decide(input, &verdict, rng)
        } else {
            decide_unsent(input, &verdict, rng)
        };
        if credential_refused && decision == Decision::Failed {
            // The credential is refused, not this item: park it for a person, unlost.
            decision = Decision::Deferred(DeferReason::CredentialRefused {
                streak: cfg.refusal_streak,
                last: verdict.reason.clone(),
            });
        }
        Answer {
            verdict,
            decision,
            delay,
            outage_began,
            credential_refused,
            refusal_began,
            sent,
        }
    }
}

fn hand_back(after: Duration, reason: HandBackReason) -> Step {
    Step::HandBack { after, reason }
}
