//! A run of refusals across items is a refused credential, not a run of bad items.
//!
//! A `403` without `Retry-After` is terminal for its item ([`crate::classify`]): the provider
//! refused that request, and one such answer says nothing about the others. But when it
//! refuses item after item, the cause is not the items: the key is suspended or revoked,
//! and failing each item in turn burns through the whole queue in seconds. A throttle
//! changes the sender, not only the item; so does this.
//!
//! So [`SessionConfig::refusal_streak`](super::SessionConfig::refusal_streak) terminal
//! `403`s in a row (no other answer from the host between them, each within
//! [`SessionConfig::refusal_span`](super::SessionConfig::refusal_span) of the previous one;
//! each from a different item, since a terminal answer ends its item) mean the credential is
//! refused. From then on the host pauses (our own backoff, as for a throttle that named no
//! delay: [`SessionConfig::refusal_pause`](super::SessionConfig::refusal_pause) at first,
//! doubling per further round up to the `Retry-After` cap) and every item refused during the
//! episode is deferred (parked for a person, nothing lost) instead of failed. The items of
//! the streak before it was recognised keep their verdict (`FAILED`, `requeue --failed`
//! sends them again). Any other answer from the host ends the episode; transport failures
//! neither count nor end it (`outage.rs` handles them).
//!
//! A `403` the operator classified as a throttle (`403 = "throttle"`) never gets here: it
//! pauses the host through the pacer already. `401` asks for a credential refresh instead.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::backoff::capped_doubling;
use crate::pacer::Pacer;

#[derive(Debug)]
pub(crate) struct Refusals {
    streak: u32,
    span: Duration,
    first: Duration,
    cap: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Refusals in a row.
    streak: u32,
    /// When the last one came.
    last: Option<Instant>,
    /// Pauses set in this episode.
    rounds: u32,
    /// When the last pause was set.
    paused_at: Option<Instant>,
}

/// What a refusal meant, from [`Refusals::on_answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not (yet) a refused credential: the answer keeps its verdict.
    No,
    /// Part of a refused-credential episode: the host is paused, the item is deferred.
    /// `began` for the answer that recognised it (warn once per episode).
    Credential { began: bool },
}

impl Refusals {
    /// `streak` refusals within `span` of each other are a refused credential (0: never);
    /// the host then pauses `first`, doubling per round up to `cap`.
    pub(crate) fn new(streak: u32, span: Duration, first: Duration, cap: Duration) -> Self {
        let first = first.max(Duration::from_millis(100));
        Self {
            streak,
            span,
            first,
            cap: cap.max(first),
            state: Mutex::new(State::default()),
        }
    }

    /// An answer from the host (not a transport failure) at `now` to a request whose slot
    /// was reserved at `reserved_at`; `refusal` when it was a terminal `403`.
    pub(crate) fn on_answer(
        &self,
        pacer: &Pacer,
        now: Instant,
        reserved_at: Instant,
        refusal: bool,
    ) -> Refused {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !refusal || self.streak == 0 {
            *s = State::default();
            return Refused::No;
        }
        // Before an episode, refusals far apart are unrelated items; during one, the pause
        // itself keeps them apart.
        if s.rounds == 0
            && s.last
                .is_some_and(|l| now.saturating_duration_since(l) > self.span)
        {
            s.streak = 0;
        }
        s.streak = s.streak.saturating_add(1);
        s.last = Some(now);
        if s.streak < self.streak {
            return Refused::No;
        }
        // Sent before the last pause began: an echo of that round, it grows nothing.
        if s.paused_at.is_some_and(|at| reserved_at < at) {
            return Refused::Credential { began: false };
        }
        s.rounds = s.rounds.saturating_add(1);
        let pause = capped_doubling(self.first, self.cap, s.rounds - 1);
        s.paused_at = Some(now);
        pacer.pause_until(now + pause);
        Refused::Credential {
            began: s.rounds == 1,
        }
    }
}
