//! Answers from a script, in memory: tests and benchmarks of everything but the network.
//! From the providers file ([`ScriptedConfig`]), one fixed answer.

mod config;

pub use config::ScriptedConfig;
pub(crate) use config::KIND;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use abide_core::Clock;

use super::{Response, SendFuture, Transport};
use crate::model::Item;

/// One request the [`ScriptedTransport`] received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The item's id.
    pub id: String,
    /// The idempotency key it carried.
    pub idempotency_key: String,
    /// When it arrived (the transport's clock, monotonic).
    pub at: Instant,
}

type Script = dyn FnMut(&Item, usize) -> Response + Send;

/// A [`Transport`] that answers each request from a script: a function of the item and
/// the number of requests received before it. Records every request ([`Sent`]).
///
/// ```
/// # use abide_outbox::transport::{Response, ScriptedTransport};
/// # use std::sync::Arc;
/// let clock = Arc::new(abide_core::ManualClock::new(std::time::UNIX_EPOCH));
/// // The first two requests are throttled, then everything is accepted.
/// let t = ScriptedTransport::new(clock, |_item, n| {
///     if n < 2 { Response::with_headers(429, &[("retry-after", "3")]) } else { Response::status(202) }
/// });
/// assert!(t.sent().is_empty());
/// ```
pub struct ScriptedTransport {
    clock: Arc<dyn Clock>,
    latency: Duration,
    script: Mutex<Box<Script>>,
    sent: Mutex<Vec<Sent>>,
}

impl fmt::Debug for ScriptedTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedTransport")
            .field("latency", &self.latency)
            .field("sent", &self.lock_sent().len())
            .finish_non_exhaustive()
    }
}

impl ScriptedTransport {
    /// Answer with `script(item, requests_before)`, stamping requests with `clock`.
    pub fn new(
        clock: Arc<dyn Clock>,
        script: impl FnMut(&Item, usize) -> Response + Send + 'static,
    ) -> Self {
        Self {
            clock,
            latency: Duration::ZERO,
            script: Mutex::new(Box::new(script)),
            sent: Mutex::new(Vec::new()),
        }
    }

    /// Answer after `latency` (a tokio timer: use it with tokio's paused time in tests).
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Every request received so far, in arrival order.
    pub fn sent(&self) -> Vec<Sent> {
        self.lock_sent().clone()
    }

    fn lock_sent(&self) -> std::sync::MutexGuard<'_, Vec<Sent>> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Transport for ScriptedTransport {
    fn send<'a>(&'a self, item: &'a Item) -> SendFuture<'a> {
        let answer = {
            let mut sent = self.lock_sent();
            let n = sent.len();
            sent.push(Sent {
                id: item.id.clone(),
                idempotency_key: item.idempotency_key.clone(),
                at: self.clock.monotonic(),
            });
            drop(sent);
            (self.script.lock().unwrap_or_else(PoisonError::into_inner))(item, n)
        };
        let latency = self.latency;
        Box::pin(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            answer
        })
    }
}
