//! # abide-gate
//!
//! Server-side rate limiting that tells callers the truth: each gate computes its own reset,
//! a rejection's `Retry-After` is rounded **up** (never `0`), and concurrency reservations
//! are idempotent per request trace.
//!
//! ```
//! use abide_gate::{Gate, GateSet, RateQuota, Scope};
//! use std::num::NonZeroU32;
//! use std::time::{Duration, Instant};
//!
//! let ten = NonZeroU32::new(10).unwrap();
//! let gates = GateSet::builder()
//!     .with_gate(Gate::rate("key", "key_rate", Scope::Key, RateQuota::per_second(ten)))
//!     .build()?;
//! let now = Instant::now(); // in real code: abide_core::Clock::monotonic
//! for _ in 0..10 {
//!     let _ = gates.check("api-key", None, now).unwrap();
//! }
//! let no = gates.check("api-key", None, now).unwrap_err();
//! assert_eq!(no.retry_after_secs(), 1); // 0.1 s left, rounded up
//! assert_eq!(no.category(), "key_rate");
//! # Ok::<(), abide_gate::Error>(())
//! ```
//!
//! ## Map
//! - [`Gate`], [`RateQuota`], [`Algorithm`], [`Scope`]: what a gate limits (a rate counted
//!   by GCRA, fixed window or sliding window; or concurrency slots) and what it is keyed on
//!   (API key or account).
//! - [`GateSet`]: gates decided together; [`Admission`] (with [`Lease`]s) or [`Rejection`]
//!   (with `Retry-After`, `RateLimit-Policy`, `RateLimit` and a reason-only JSON body);
//!   [`GateSet::quota`] inspects without charging.
//! - Delaying gates ([`Gate::with_delay`], [`DelayBound`]): a request over a GCRA rate waits
//!   for its slot ([`GateSet::check_delayed`], [`Admission::delay`]) within `burst` and
//!   `max_delay`, like nginx's `limit_req burst delay`; beyond, the same honest 429. A waiter
//!   that goes away gives its slot back ([`LeaseGuard`]); one served calls
//!   [`LeaseGuard::arrived`].
//! - [`GateLayer`] / [`GateService`]: the tower layer for axum, with a quota endpoint,
//!   [`LeaseGuard`]s released when the response ends or the client goes away, and
//!   [`GateMetrics`] keeping gate 429s, delayed requests, application 429s, other 4xx and
//!   5xx apart.
//! - [`retry_after_secs`], [`GateStatus`]: header formatting (RFC 9110 §10.2.3,
//!   draft-ietf-httpapi-ratelimit-headers).
//! - [`safe_trace`]: what logs may say about a caller (never the raw key).
//! - `RedisGates` (feature `redis`): the same gates kept in Redis, one Lua script per
//!   decision, so several instances enforce one limit.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod admission;
mod check;
mod delay;
mod gate;
mod headers;
mod identity;
mod layer;
mod lease;
mod metrics;
mod rate;
#[cfg(feature = "redis")]
mod redis;
mod service;
mod set;
mod table;
mod tally;
mod trace;

pub use admission::{Admission, LeaseGuard, Rejection};
pub use gate::{Algorithm, DelayBound, Gate, RateQuota, Scope, MAX_DELAY, MAX_LEASE, MAX_WINDOW};
pub use headers::{rate_limit_values, retry_after_secs, GateStatus, RATELIMIT, RATELIMIT_POLICY};
pub use identity::{bearer_token, BearerKeys, Identify, Identity};
pub use layer::GateLayer;
pub use lease::Lease;
pub use metrics::{GateCounts, GateMetrics};
#[cfg(feature = "redis")]
pub use redis::{RedisGates, SharedAdmission, SharedLease, SharedLeaseGuard, StoreError};
pub use service::{quota_response, rejection_response, GateService, ResponseFuture};
pub use set::{GateSet, GateSetBuilder};
pub use trace::{request_trace, safe_trace};

/// Errors of abide-gate (configuration only: a refusal is a [`Rejection`], not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A quota that cannot be enforced (e.g. a zero window).
    #[error("invalid quota: {0}")]
    InvalidQuota(&'static str),
    /// A gate name or category that is not a lowercase token (`[a-z0-9_-]{1,64}`).
    #[error("invalid gate name or category {0:?}: use [a-z0-9_-], 1 to 64 characters")]
    InvalidName(String),
    /// A rate algorithm name that is not `gcra`, `fixed-window` or `sliding-window`.
    #[error("unknown rate algorithm {0:?}: expected gcra, fixed-window or sliding-window")]
    UnknownAlgorithm(String),
    /// Two gates with the same name.
    #[error("duplicate gate name {0:?}")]
    DuplicateGate(String),
}
