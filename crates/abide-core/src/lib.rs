//! # abide-core
//!
//! Pure policy for cooperating with rate limits: no async runtime, no I/O, no clock reads
//! (time comes in as arguments or through a [`Clock`]), no global RNG (one is passed in).
//!
//! # Quick start
//! Classify a response, let the host's pacer learn from it, and ask when to send next:
//! ```
//! # use abide_core::*; use rand::SeedableRng; use std::time::{Duration, UNIX_EPOCH};
//! # let (clock, mut rng) = (ManualClock::new(UNIX_EPOCH), rand_chacha::ChaCha8Rng::seed_from_u64(7));
//! let headers = http::HeaderMap::from_iter([(http::header::RETRY_AFTER, "30".parse()?)]);
//! let obs = Observation::Http { status: http::StatusCode::TOO_MANY_REQUESTS, headers: &headers, body: b"" };
//! let verdict = Classifier::default().classify(&obs, clock.now(), &mut rng);
//! let pacer = Pacer::new(PacerConfig::default(), clock.monotonic());
//! pacer.on_verdict(clock.monotonic(), &verdict); // throttle: slow down, pause 30 s
//! assert!(pacer.reserve(clock.monotonic()) >= clock.monotonic() + Duration::from_secs(30));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Crate map
//! In the order a response flows through them:
//!
//! | module | what it decides |
//! |---|---|
//! | [`clock`] | injected wall and monotonic time ([`SystemClock`], [`ManualClock`]) |
//! | [`classify`] | what a response means: success, throttle, retry, refresh credentials, terminal, out of quota, unknown; vendor error bodies read by structure ([`Classifier`], [`Verdict`]) |
//! | [`retry_after`] | `Retry-After` (RFC 9110 §10.2.3) parsed and clamped to [floor, cap], with its reason ([`RetryAfterPolicy`]) |
//! | [`ratelimit`] | rate-limit header dialects (IETF, `X-RateLimit-*`, Azure, Shopify, Discord, GitHub), clamped ([`parse_rate_limit`], [`ratelimit::read`]) |
//! | [`warnings`] | `Deprecation` (RFC 9745) and `Sunset` (RFC 8594) ([`parse_warnings`]) |
//! | [`backoff`] | our own delay when the server gave none: capped exponential with jitter ([`Backoff`]) |
//! | [`budget`] | whether one more retry is allowed at all, shared by every worker ([`RetryBudget`]) |
//! | [`pacer`] | when the next request to a host may go: a rate that learns the limit (ceiling estimate, cubic recovery), pauses, advertised targets ([`Pacer`]) |
//! | [`session`] | the whole decision for one host, in one place: slot, budget, send, verdict → delivered / failed / deferred / retry at T / hand back ([`Session`], [`Delivery`]); the outbox, `abide sim` and in-process clients all drive it |
//!
//! Beside them, [`echo`] says what of a value we were given may be shown in an error, a log
//! or a report (bounded, without credentials), for every crate that quotes input.
//!
//! A server's `Retry-After` outranks [`Backoff`]; a [`RetryBudget`] bounds retries across
//! the fleet; a throttle changes the *sender* through the [`Pacer`], not only the one item.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod backoff;
pub mod budget;
pub mod classify;
pub mod clock;
pub mod coordination;
pub mod echo;
pub mod names;
pub mod pacer;
pub mod ratelimit;
pub mod retry_after;
pub mod rfc3339;
mod serde_secs;
pub mod session;
pub mod sleep;
pub mod warnings;

pub use backoff::{Backoff, Jitter};
pub use budget::{BudgetSnapshot, RetryBudget, RetryBudgetConfig};
pub use classify::{
    BodyRule, Classifier, ClassifyOverrides, HeaderRule, Observation, TransportFailure, Verdict,
    VerdictClass, MAX_CLASSIFY_BODY,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use coordination::{
    Coordination, CoordinationMode, CoordinationStatus, Local, NodeSeen, Reservation,
    MAX_NODES_SHOWN,
};
pub use names::UnknownName;
pub use pacer::{NotYet, Pacer, PacerConfig, PacerSnapshot, SlotCounts};
pub use ratelimit::{parse_rate_limit, Dialect, RateLimitInfo, RateLimitSource, Reader};
pub use retry_after::{DelayReason, RetryAfter, RetryAfterError, RetryAfterPolicy, RetryDelay};
pub use session::{
    Answer, BudgetRole, Decision, DeferReason, Delivery, HandBackReason, ItemContext, RetryConfig,
    Session, SessionConfig, SettingError, Step,
};
pub use warnings::{parse_warnings, Warning};
