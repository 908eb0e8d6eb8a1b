//! A per-host limit on requests in flight: set from an advertised concurrency quota, lowered
//! by the refusals of that quota (AIMD).
//!
//! # Why
//! A server may bound what one key has in flight as well as its rate (IETF
//! `RateLimit-Policy: "key";q=75;w=1, "conc";q=6`: 75/s, and 6 at once). The pacer spaces
//! sends in time and cannot see that bound: 24 senders paced at 72.8/s against 60 ms answers
//! have 4.4 requests in flight on average but more whenever answers bunch. Cutting the rate
//! on each concurrency refusal keeps them rare, at the price of running at 0.8 of the
//! limit (BENCHMARKS.md, "`abide demo`: where its run goes"). So the
//! session counts the requests on the wire per host and holds a send while they are at the
//! limit, and the pacer leaves its rate alone on a concurrency refusal.
//!
//! # The limit
//! - **No signal, no limit**: without a concurrency quota or refusal the count is kept (for
//!   displays) but never holds a send.
//! - **Set from the quota**: the first answer naming one sets the limit to it (floored at 1,
//!   capped at [`MAX_CONCURRENCY`](crate::ratelimit::MAX_CONCURRENCY)); it never climbs
//!   above the latest quota advertised.
//! - **Multiplicative decrease** ([`DECREASE`]) on a refusal that names the concurrency
//!   quota (no place left while the rate quota had some), once per change: a refusal of a
//!   request sent before the limit was last set or lowered is an echo of the old limit (at
//!   a cold start every request sent before the first answer went out unlimited) and
//!   decides nothing, as the pacer decreases once per round of reservations.
//! - **Additive increase**: `+1 / limit` per success, i.e. +1 per round of `limit` answers
//!   (TCP's congestion avoidance, RFC 5681 §3.1), up to the advertised quota.
//!
//! # Waiting, with no clock and no waker
//! [`Delivery::poll`](super::Delivery::poll) answers a full host with
//! [`Step::WaitUntil`](super::Step::WaitUntil), the step every caller already honours, at
//! the instant the oldest request on the wire is expected to be answered (its send time +
//! the mean latency), at least 1 ms and at most 100 ms ahead. No caller re-implements the
//! gate, and none needs a notification channel the session would have to own.
//!
//! # Places are owned
//! A place is a [`Permit`] held by the delivery between `Step::Send` and `on_answer`; it
//! is released on drop, so a delivery abandoned with its request on the wire (a cancelled
//! future, a shutdown, a panic) gives it back. A cloned delivery holds no place.
//!
//! Per node: the count and the limit are not shared through coordination (nodes sharing a
//! key would each hold up to the quota).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::classify::{Verdict, VerdictClass};
use crate::ratelimit::RateLimitInfo;
use crate::ratelimit::MAX_CONCURRENCY;

/// Factor applied to the in-flight limit on a concurrency refusal.
pub const DECREASE: f64 = 0.75;

/// Shortest wait for a place (a request overdue is polled for this often).
const MIN_WAIT: Duration = Duration::from_millis(1);
/// Longest wait for a place before polling again.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// Wait for a place before any latency is known.
const FIRST_WAIT: Duration = Duration::from_millis(5);

/// The host's requests in flight and their limit; shared by every delivery of a session.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Send instants of the requests on the wire.
    sent: Vec<Instant>,
    /// The limit, fractional while it grows; `None`: unlimited.
    limit: Option<f64>,
    /// The latest concurrency quota advertised.
    advertised: Option<u32>,
    /// When the limit was last set or lowered.
    changed_at: Option<Instant>,
    /// Mean time from send to answer (EWMA, 1/8).
    latency: Option<Duration>,
    sends: u64,
    held_sends: u64,
    decreases: u64,
}

/// A view of a host's in-flight limit, for reports and `/v1/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct InFlightSnapshot {
    /// Requests on the wire now.
    pub on_wire: u32,
    /// The limit now; `None`: unlimited (no concurrency quota seen).
    pub limit: Option<u32>,
    /// The concurrency quota the server advertised last.
    pub advertised: Option<u32>,
    /// Requests sent.
    pub sends: u64,
    /// Of those, requests that waited for a place at least once: the limit held them back.
    pub held_sends: u64,
    /// Decreases after concurrency refusals.
    pub decreases: u64,
}

/// Share of sends that waited for a place above which the in-flight limit, not the pace,
/// is said to hold a run back ([`InFlightSnapshot::held_back`]).
pub const HELD_BACK_SHARE: f64 = 0.1;

impl InFlightSnapshot {
    /// Share of sends that waited for a place (0 without sends).
    #[allow(clippy::cast_precision_loss)] // counts stay far below 2^53
    pub fn held_share(&self) -> f64 {
        if self.sends == 0 {
            0.0
        } else {
            self.held_sends as f64 / self.sends as f64
        }
    }

    /// The limit held back at least [`HELD_BACK_SHARE`] of the sends: it, not the pace,
    /// set how fast the host was sent to.
    pub fn held_back(&self) -> bool {
        self.limit.is_some() && self.held_share() >= HELD_BACK_SHARE
    }
}

/// One place on the wire, released when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    owner: Option<Arc<InFlight>>,
    sent_at: Instant,
    /// Requests on the wire when this one was sent (itself included).
    on_wire: u32,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            owner.lock().remove(self.sent_at);
        }
    }
}

impl State {
    fn remove(&mut self, sent_at: Instant) {
        if let Some(i) = self.sent.iter().position(|s| *s == sent_at) {
            self.sent.swap_remove(i);
        }
    }

    fn allowed(&self) -> Option<u32> {
        self.limit.map(|l| (l.floor() as u32).max(1))
    }
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place on the wire at `now`, or when to ask again. `waited`: this send already
    /// waited for a place (counted once, in [`InFlightSnapshot::held_sends`]).
    pub(crate) fn try_acquire(
        self: &Arc<Self>,
        now: Instant,
        waited: bool,
    ) -> Result<Permit, Instant> {
        let mut s = self.lock();
        let on_wire = s.sent.len() as u32;
        if s.allowed().is_some_and(|n| on_wire >= n) {
            let at = match (s.sent.iter().min(), s.latency) {
                (Some(oldest), Some(latency)) => *oldest + latency,
                _ => now + FIRST_WAIT,
            };
            return Err(at.clamp(now + MIN_WAIT, now + MAX_WAIT));
        }
        s.sent.push(now);
        s.sends += 1;
        s.held_sends += u64::from(waited);
        Ok(Permit {
            owner: Some(Arc::clone(self)),
            sent_at: now,
            on_wire: on_wire + 1,
        })
    }

    /// The answer to `permit`'s request arrived at `now`: release its place and learn from
    /// the verdict's rate-limit fields.
    pub(crate) fn on_answer(&self, mut permit: Permit, now: Instant, verdict: &Verdict) {
        let rl = verdict.rate_limit.as_ref();
        let refused = verdict.class == VerdictClass::Throttle;
        permit.owner = None;
        let mut s = self.lock();
        s.remove(permit.sent_at);
        let sample = now.saturating_duration_since(permit.sent_at);
        s.latency = Some(match s.latency {
            Some(l) => (l * 7 + sample) / 8,
            None => sample,
        });
        let quota = rl.and_then(|rl| rl.concurrency.as_ref());
        if let Some(q) = quota.and_then(|q| q.allowed()) {
            s.advertised = Some(q);
            let q = f64::from(q);
            if s.limit.is_none_or(|l| l > q) {
                s.limit = Some(q);
                s.changed_at = Some(now);
            }
        }
        let concurrency_refusal = refused && rl.is_some_and(RateLimitInfo::concurrency_refused);
        if concurrency_refusal {
            let echo = s.changed_at.is_some_and(|at| permit.sent_at < at);
            if !echo {
                let base = s.limit.unwrap_or(f64::from(permit.on_wire));
                s.limit = Some((base * DECREASE).floor().max(1.0));
                s.changed_at = Some(now);
                s.decreases += 1;
            }
        } else if verdict.class == VerdictClass::Success {
            if let Some(l) = s.limit {
                let cap = s.advertised.unwrap_or(MAX_CONCURRENCY);
                s.limit = Some((l + 1.0 / l).min(f64::from(cap)));
            }
        }
    }

    pub(crate) fn snapshot(&self) -> InFlightSnapshot {
        let s = self.lock();
        InFlightSnapshot {
            on_wire: s.sent.len() as u32,
            limit: s.allowed(),
            advertised: s.advertised,
            sends: s.sends,
            held_sends: s.held_sends,
            decreases: s.decreases,
        }
    }
}
