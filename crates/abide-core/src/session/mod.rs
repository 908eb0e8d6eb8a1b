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
mod host;
mod in_flight;
mod item;
pub mod limits;
mod outage;
mod refusal;
mod setting_error;
#[cfg(test)]
mod tests;
mod validate;

pub use config::{RetryConfig, SessionConfig};
pub use decide::is_past_max_age;
pub use decide::{Decision, DeferReason};
pub use delivery::{Answer, Delivery, HandBackReason, Step};
pub use host::Session;
pub use in_flight::{InFlightSnapshot, DECREASE as IN_FLIGHT_DECREASE, HELD_BACK_SHARE};
pub use item::{BudgetRole, ItemContext};
pub use setting_error::SettingError;
