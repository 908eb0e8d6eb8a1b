//! The item state machine, as one pure table.
//!
//! ```text
//!            claim             accept
//!  QUEUED ──────────▶ IN_FLIGHT ──────▶ SUBMITTED
//!    ▲                 │   │  └─ fail ──▶ FAILED
//!    │ due             │   └─ retry / lease expired
//!    │                 ▼
//!    └───────────── PENDING ── defer ──▶ DEFERRED ── requeue ──▶ QUEUED
//!                                          FAILED ── requeue ──▶ QUEUED
//!    (cancel: QUEUED, PENDING or DEFERRED → FAILED, reason `cancelled`; never IN_FLIGHT)
//!    (requeue is a person's decision to try again: it starts a fresh attempt window)
//!    (fail over: QUEUED → QUEUED and PENDING → PENDING, on another provider; waiting
//!     items move, whether they were tried already or the provider was paused before
//!     they could be)
//! ```
//!
//! Every store computes the target state with [`transition`] and conditions its `UPDATE` on
//! the source state (and, for `IN_FLIGHT`, on the lease owner), so an illegal move is
//! rejected by the database rather than merely avoided by well-behaved callers.

use serde::{Deserialize, Serialize};

abide_core::named_enum! {
    /// Where an item is in its life. `ALL` is in display order; `as_str` is the stable
    /// name stored in the database and shown to people (`IN_FLIGHT`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum State("item state") {
        /// Waiting to be claimed by a worker.
        Queued = "QUEUED",
        /// Claimed by a worker holding a lease; an attempt may be on the wire.
        InFlight = "IN_FLIGHT",
        /// Waiting for `next_attempt_at` before another attempt.
        Pending = "PENDING",
        /// Accepted by the provider. Terminal.
        Submitted = "SUBMITTED",
        /// Rejected for good (e.g. HTTP 400); the reason is stored. Terminal for the
        /// dispatcher: only a person sends it round again (`requeue`).
        Failed = "FAILED",
        /// Past its attempt cap or maximum age: waits for a person (`requeue`).
        Deferred = "DEFERRED",
    }
}

impl State {
    /// True for states a dispatcher still has work to do on (`QUEUED`, `IN_FLIGHT`,
    /// `PENDING`). `DEFERRED` waits for a person, so it does not keep a run going.
    pub fn is_active(self) -> bool {
        matches!(self, State::Queued | State::InFlight | State::Pending)
    }
}

/// Something that happens to an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A worker takes the item with a lease.
    Claim,
    /// The provider accepted the request.
    Accept,
    /// A retryable outcome (throttle, transient error, unknown): try again later.
    Retry,
    /// A terminal outcome: never retry.
    Fail,
    /// The lease ran out while in flight (the worker crashed or hung).
    LeaseExpired,
    /// `next_attempt_at` has passed.
    Due,
    /// The attempt cap or maximum age was reached: hand over to a person.
    Defer,
    /// A person sends a deferred or failed item round again, in a fresh attempt window
    /// (attempt cap and maximum age count from the requeue). For a `FAILED` item this is
    /// the person overruling the classifier, e.g. after fixing the account or the payload.
    Requeue,
    /// A waiting item moves to the fail-over provider (state unchanged).
    FailOver,
    /// A person withdraws an item no request is on the wire for (`QUEUED`, `PENDING` or
    /// `DEFERRED`): it ends `FAILED` with the reason [`CANCELLED_REASON`]. An `IN_FLIGHT`
    /// item may be on the wire and cannot be withdrawn; a final one is already settled.
    Cancel,
}

/// The stored reason of an item a person cancelled (a `FAILED` item that no provider
/// refused: `requeue --failed` sends it round again like any other).
pub const CANCELLED_REASON: &str = "cancelled";

impl Event {
    /// Every event.
    pub const ALL: [Event; 10] = [
        Event::Claim,
        Event::Accept,
        Event::Retry,
        Event::Fail,
        Event::LeaseExpired,
        Event::Due,
        Event::Defer,
        Event::Requeue,
        Event::FailOver,
        Event::Cancel,
    ];
}

/// `event` is not allowed in state `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition: {event:?} in state {from}")]
pub struct IllegalTransition {
    /// The state the item was in.
    pub from: State,
    /// The event that was refused.
    pub event: Event,
}

/// The whole state machine: the state after `event` in state `from`.
///
/// # Errors
/// [`IllegalTransition`] for any pair not in the table.
pub fn transition(from: State, event: Event) -> Result<State, IllegalTransition> {
    use Event as E;
    use State as S;
    match (from, event) {
        (S::Queued, E::Claim) => Ok(S::InFlight),
        (S::InFlight, E::Accept) => Ok(S::Submitted),
        (S::InFlight, E::Retry) => Ok(S::Pending),
        (S::InFlight, E::Fail) => Ok(S::Failed),
        (S::InFlight, E::LeaseExpired) => Ok(S::Pending),
        (S::Pending, E::Due) => Ok(S::Queued),
        (S::Pending, E::Defer) => Ok(S::Deferred),
        (S::Pending, E::FailOver) => Ok(S::Pending),
        (S::Queued, E::FailOver) => Ok(S::Queued),
        (S::Deferred, E::Requeue) => Ok(S::Queued),
        (S::Failed, E::Requeue) => Ok(S::Queued),
        (S::Queued | S::Pending | S::Deferred, E::Cancel) => Ok(S::Failed),
        _ => Err(IllegalTransition { from, event }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>(), Ok(s));
            assert_eq!(
                serde_json::to_string(&s).ok(),
                Some(format!("\"{}\"", s.as_str()))
            );
        }
        assert!("queued".parse::<State>().is_err());
    }

    #[test]
    fn table_has_exactly_fourteen_legal_pairs() {
        let legal: Vec<_> = State::ALL
            .iter()
            .flat_map(|&s| Event::ALL.iter().map(move |&e| (s, e)))
            .filter(|&(s, e)| transition(s, e).is_ok())
            .collect();
        assert_eq!(legal.len(), 14, "{legal:?}");
    }

    #[test]
    fn terminal_states_accept_nothing_but_a_persons_requeue() {
        for e in Event::ALL {
            assert!(transition(State::Submitted, e).is_err());
            let failed = transition(State::Failed, e);
            if e == Event::Requeue {
                assert_eq!(failed, Ok(State::Queued));
            } else {
                assert!(failed.is_err(), "{e:?}");
            }
        }
    }
}
