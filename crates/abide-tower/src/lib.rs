//! # abide-tower
//!
//! abide in-process for any tower client: a [`Layer`](tower::Layer) over abide-client's
//! driver, which classifies every answer, honours `Retry-After` (floored and capped),
//! paces each host, draws retries from one retry budget per host and stops with an error
//! that says why. Every service, clone and task built from one [`Policy`] shares one
//! session per host (abide-core's `Session`), so a throttle seen by one task slows all of
//! them.
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
//! [`TryCloneBody`]. Errors are [`Stopped`]: the [`StopReason`] and the [`LastAnswer`] the
//! server gave. The rules, waits and errors are abide-client's (re-exported here); see
//! its crate docs. A request whose body cannot be copied ([`TryCloneBody`] answers
//! `None`) is sent once and never retried.
//!
//! # Map
//! [`AbideLayer`] / [`AbideService`] (the adapter), [`TryCloneBody`] (which bodies can be
//! sent again); [`Policy`], [`PolicyBuilder`] and the errors from abide-client.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod body;
mod layer;
mod service;

#[cfg(feature = "redis")]
pub use abide_client::CoordinationConfig;
pub use abide_client::{
    BoxError, ConfigError, LastAnswer, ManualSleeper, Policy, PolicyBuilder, RequestInfo, Sleeper,
    StopReason, Stopped, TokioSleeper, VerdictClass, WaitCause, IDEMPOTENCY_KEY,
};
pub use body::TryCloneBody;
pub use layer::AbideLayer;
pub use service::{AbideService, ResponseFuture};
