//! Transport failures are host-level signals.
//!
//! A refused connection says nothing about one item and everything about the host: while it
//! is down, every worker would otherwise spend its paced slot on another connection attempt
//! (971 attempts in a 10 s outage at full pace, measured). So a transport failure pauses the
//! whole host, 1 s at first and doubling per consecutive failure up to a cap, like a
//! throttle that named no delay; the first answer of any kind ends the episode.
//!
//! Requests already on the wire when the pause began fail too, but they say nothing new:
//! only a failure whose slot was reserved after the last outage pause was set grows it, as
//! the pacer does for throttles.
//!
//! A connection never made (refused, connect timeout) is no attempt of its item
//! ([`super::Answer::sent`] is `false`: not counted toward the attempt cap, not recorded):
//! the host's pause is all it costs. A failure after the request was written stays one.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::backoff::capped_doubling;
use crate::pacer::Pacer;

#[derive(Debug)]
pub(crate) struct Outage {
    first: Duration,
    cap: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    streak: u32,
    /// When the last outage pause was set.
    paused_at: Option<Instant>,
}

impl Outage {
    pub(crate) fn new(first: Duration, cap: Duration) -> Self {
        let first = first.max(Duration::from_millis(100));
        Self {
            first,
            cap: cap.max(first),
            state: Mutex::new(State::default()),
        }
    }

    /// A transport failure of a request whose slot was reserved at `reserved_at`. Pauses
    /// the host; returns `true` when this failure began an episode (warn once per episode).
    pub(crate) fn on_failure(&self, pacer: &Pacer, now: Instant, reserved_at: Instant) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.paused_at.is_some_and(|at| reserved_at < at) {
            return false;
        }
        s.streak = s.streak.saturating_add(1);
        let pause = capped_doubling(self.first, self.cap, s.streak.saturating_sub(1));
        s.paused_at = Some(now);
        pacer.pause_until(now + pause);
        s.streak == 1
    }

    /// Any answer from the host ends the episode.
    pub(crate) fn on_answer(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.streak = 0;
        s.paused_at = None;
    }

    pub(crate) fn streak(&self) -> u32 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .streak
    }
}
