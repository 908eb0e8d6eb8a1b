//! # abide-client
//!
//! abide in-process, for any HTTP client: a [`Policy`] (the rules, and one shared
//! [`Session`](abide_core::Session) per host) and the driver, [`drive`], that takes one
//! logical request through its host's session: it classifies every answer, honours
//! `Retry-After` (floored and capped), paces each host, draws retries from one retry budget
//! per host and stops with an error that says why. Every clone of a policy, and every
//! client and task built from it, shares the per-host state, so a throttle seen by one task
//! slows all of them.
//!
//! The adapters are thin: `abide-tower` (a tower `Layer`) and `abide-reqwest` (a
//! `reqwest-middleware` `Middleware`) each implement [`Attempts`] for their client and call
//! [`drive`]; a reverse proxy does the same with its own send function.
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
//! Errors are [`Stopped`]: the [`StopReason`] (attempt cap, maximum age, a wait longer
//! than `max_wait`, a terminal answer, a body that cannot be replayed, ...) and the
//! [`LastAnswer`] the server gave.
//!
//! # Driving it from a client
//! Describe the request ([`RequestInfo`] → [`Outgoing`]), implement [`Attempts`] (how to
//! send one copy, whether another can be sent), and await [`drive`]:
//!
//! ```
//! use abide_client::{drive, Attempts, Outgoing, Policy, Reply, RequestInfo, SendFailure};
//! use http::{HeaderMap, Method, StatusCode};
//!
//! /// A client that answers 503 once, then 200: the status and headers it got.
//! struct Flaky { calls: u32 }
//!
//! impl Attempts for Flaky {
//!     type Response = (StatusCode, HeaderMap);
//!     fn head(r: &Self::Response) -> (StatusCode, &HeaderMap) { (r.0, &r.1) }
//!     fn can_resend(&self) -> bool { true } // the body (none here) can be copied
//!     async fn send(&mut self, extra: &HeaderMap) -> Result<Reply<Self::Response>, SendFailure> {
//!         // `extra` holds the headers abide adds (an idempotency key, refreshed credentials).
//!         self.calls += 1;
//!         let status = if self.calls == 1 { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
//!         Ok(Reply { response: (status, HeaderMap::new()), body: bytes::Bytes::new() })
//!     }
//! }
//!
//! # let clock = abide_core::ManualClock::new(std::time::UNIX_EPOCH);
//! # let sleeper = std::sync::Arc::new(abide_client::ManualSleeper::new(clock.clone()));
//! let policy = Policy::builder()
//! #   .with_clock(std::sync::Arc::new(clock), sleeper)
//!     .build()?;
//! let headers = HeaderMap::new();
//! let info = RequestInfo { method: &Method::GET, scheme: "https", host: "api.example", port: None, headers: &headers };
//! let out = Outgoing::new(&policy, &info, "/v1/things");
//! # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
//! let (status, _) = drive(&policy, out, Flaky { calls: 0 }).await?;
//! assert_eq!(status, StatusCode::OK);
//! # Ok::<(), abide_client::Stopped>(()) })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Across processes
//! With the feature `redis`, `PolicyBuilder::with_coordination` shares each host's limit
//! with the policies of other processes through Redis (abide-redis), as outbox nodes share
//! a provider's: one send schedule, one pause, one learned rate, one retry budget.
//!
//! # Map
//! [`policy`] (the rules, the shared hosts), [`engine`] (the driver), [`sleep`] (injected
//! waiting), [`error`].

#![cfg_attr(test, allow(clippy::unwrap_used))]

#[cfg(feature = "redis")]
mod coordination;
pub mod engine;
pub mod error;
pub mod policy;
mod registry;
pub mod sleep;

pub use abide_core::VerdictClass;
#[cfg(feature = "redis")]
pub use abide_redis::CoordinationConfig;
pub use engine::{drive, Attempts, Outgoing, Reply, SendFailure};
pub use error::{BoxError, ConfigError, LastAnswer, StopReason, Stopped, WaitCause};
pub use policy::{Policy, PolicyBuilder, RefreshFuture, RequestInfo, IDEMPOTENCY_KEY};
pub use sleep::{ManualSleeper, Sleeper, TokioSleeper};
