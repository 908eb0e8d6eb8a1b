//! # abide-core
//!
//! Pure policy for cooperating with rate limits: no async runtime, no I/O.
//!
//! OWNER NOTE: quick start and crate map to be written once modules land.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod backoff;
pub mod budget;
pub mod classify;
pub mod clock;
pub mod pacer;
pub mod ratelimit;
pub mod retry_after;
mod serde_secs;
pub mod warnings;

pub use backoff::{Backoff, Jitter};
pub use budget::{BudgetSnapshot, RetryBudget, RetryBudgetConfig};
pub use classify::{Classifier, Observation, TransportFailure, Verdict, VerdictClass};
pub use clock::{Clock, ManualClock, SystemClock};
pub use pacer::{Pacer, PacerConfig, PacerSnapshot};
pub use ratelimit::{parse_rate_limit, RateLimitInfo, RateLimitSource};
pub use retry_after::{DelayReason, RetryAfter, RetryAfterError, RetryAfterPolicy, RetryDelay};
pub use warnings::{parse_warnings, Warning};
