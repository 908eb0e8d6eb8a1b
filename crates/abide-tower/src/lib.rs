//! # abide-tower
//!
//! abide in-process for any tower client: a [`Layer`](tower::Layer) that classifies every
//! answer, honours `Retry-After` (floored and capped), paces each host, draws retries from
//! one retry budget per host and stops with an error that says why. Every service, clone
//! and task built from one [`Policy`] shares one [`Session`](abide_core::Session) per host,
//! so a throttle seen by one task slows all of them.
//!
//! ```
//! # fn demo<S>(client: S) { use tower::ServiceBuilder;
//! use abide_tower::{AbideLayer, Policy};
//! let policy = Policy::builder().with_max_attempts(5).build().expect("valid policy");
//! let client = ServiceBuilder::new().layer(AbideLayer::new(policy)).service(client);
//! # }
//! ```
//!
//! The client is any `Service<http::Request<B>, Response = http::Response<_>>`
//! (hyper-util's legacy client, a tonic channel, a test stub) whose body `B` implements
//! [`TryCloneBody`]. Errors are [`Stopped`]: the [`StopReason`] (attempt cap, maximum age,
//! a wait longer than `max_wait`, a terminal answer, a body that cannot be replayed, ...)
//! and the [`LastAnswer`] the server gave.
//!
//! # What it does per request
//! - waits for the host's send slot (the pacer learns the limit from throttles and
//!   follows `RateLimit` / `X-RateLimit-*` headers at `headroom` of the advertised rate);
//! - sends, with the same idempotency key on every attempt (generated for non-idempotent
//!   methods when absent; `without_idempotency_keys` opts out);
//! - classifies the answer (HTTP table plus `classify` overrides); a throttle pauses the
//!   whole host; `Retry-After` (RFC 9110 §10.2.3) outranks our backoff; an unparseable one
//!   waits long, never zero;
//! - retries until `max_attempts`, `max_age`, or a wait longer than `max_wait`;
//! - a `401` calls the refresh hook once and sends again;
//! - `Deprecation` (RFC 9745) and `Sunset` (RFC 8594) are logged once per host as
//!   `tracing` warnings.
//!
//! A request whose body cannot be copied ([`TryCloneBody`] answers `None`) is sent once
//! and never retried.
//!
//! # Map
//! [`policy`] (the rules, the shared hosts), [`engine`] (the driver, reusable by other
//! clients: `abide-reqwest` uses it), [`AbideLayer`] / [`AbideService`], [`sleep`]
//! (injected waiting), [`error`].

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod body;
pub mod engine;
pub mod error;
mod layer;
pub mod policy;
mod registry;
mod service;
pub mod sleep;

pub use body::TryCloneBody;
pub use error::{BoxError, ConfigError, LastAnswer, StopReason, Stopped, WaitCause};
pub use layer::AbideLayer;
pub use policy::{Policy, PolicyBuilder, RequestInfo, IDEMPOTENCY_KEY};
pub use service::{AbideService, ResponseFuture};
pub use sleep::{ManualSleeper, Sleeper, TokioSleeper};
