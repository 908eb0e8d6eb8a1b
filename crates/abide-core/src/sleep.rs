//! How waiting is done, for the callers that drive a [`crate::Session`] (the outbox, the
//! in-process clients).
//!
//! The [`crate::Clock`] stamps times; a [`Sleeper`] waits until a monotonic deadline of
//! that same clock. With the `tokio` feature: production uses `TokioSleeper` (tokio timers,
//! so tests may also run under tokio's paused time); tests driven by a
//! [`crate::ManualClock`] use `ManualSleeper`, which jumps the clock to the deadline
//! instead, so a `Retry-After: 600` passes in microseconds. The policy itself never waits.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// A boxed, `Send` future returned by [`Sleeper::sleep_until`].
pub type SleepFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Waits until a deadline expressed in the monotonic time of the caller's clock.
pub trait Sleeper: Debug + Send + Sync {
    /// Resolve at or after `deadline` (immediately if it has passed).
    ///
    /// # Cancel safety
    /// Dropping the future cancels the wait and has no other effect.
    fn sleep_until(&self, deadline: Instant) -> SleepFuture<'_>;
}

#[cfg(feature = "tokio")]
pub use runtime::{ManualSleeper, TokioSleeper};

#[cfg(feature = "tokio")]
mod runtime {
    use std::sync::Arc;
    use std::time::Instant;

    use super::{SleepFuture, Sleeper};
    use crate::clock::{Clock, ManualClock};

    /// Waiting with tokio timers, measuring the remaining time on `clock`.
    #[derive(Debug, Clone)]
    pub struct TokioSleeper {
        clock: Arc<dyn Clock>,
    }

    impl TokioSleeper {
        /// Sleep according to `clock` (normally [`crate::SystemClock`]).
        pub fn new(clock: Arc<dyn Clock>) -> Self {
            Self { clock }
        }
    }

    impl Sleeper for TokioSleeper {
        fn sleep_until(&self, deadline: Instant) -> SleepFuture<'_> {
            let wait = deadline.saturating_duration_since(self.clock.monotonic());
            Box::pin(async move {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            })
        }
    }

    /// Virtual waiting for tests: advances a [`ManualClock`] to the deadline (never backwards)
    /// and yields once.
    #[derive(Debug, Clone)]
    pub struct ManualSleeper {
        clock: ManualClock,
    }

    impl ManualSleeper {
        /// Advance `clock` when asked to sleep.
        pub fn new(clock: ManualClock) -> Self {
            Self { clock }
        }
    }

    impl Sleeper for ManualSleeper {
        fn sleep_until(&self, deadline: Instant) -> SleepFuture<'_> {
            let ahead = deadline.saturating_duration_since(self.clock.monotonic());
            if !ahead.is_zero() {
                self.clock.advance(ahead);
            }
            Box::pin(tokio::task::yield_now())
        }
    }
}
