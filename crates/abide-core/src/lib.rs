//! # abide-core
//!
//! Pure policy for cooperating with rate limits: no async runtime, no I/O.
//!
//! OWNER NOTE: quick start and crate map to be written once modules land.

pub mod classify;
pub mod clock;
pub mod ratelimit;
pub mod retry_after;
mod serde_secs;

pub use classify::{Classifier, Observation, TransportFailure, Verdict, VerdictClass};
pub use clock::{Clock, ManualClock, SystemClock};
pub use ratelimit::{parse_rate_limit, RateLimitInfo, RateLimitSource};
pub use retry_after::{DelayReason, RetryAfter, RetryAfterError, RetryAfterPolicy, RetryDelay};
