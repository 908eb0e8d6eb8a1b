//! # abide-provider
//!
//! A fake rate-limited messaging API that replays real provider quirks, for tests, demos and
//! benchmarks. Built on [`abide_gate`]; time comes from an injected [`Clock`], so a test can
//! drive schedules, grace periods and suspensions with a `ManualClock`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use abide_core::SystemClock;
//! use std::sync::Arc;
//!
//! let p = abide_provider::spawn(
//!     abide_provider::ProviderConfig::default(),
//!     Arc::new(SystemClock),
//!     "127.0.0.1:0".parse().unwrap(),
//! )
//! .await?;
//! println!("POST {}/v1/messages", p.url());
//! let stats = p.stats();
//! p.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! ## Endpoints
//! - `POST /v1/messages` (JSON object body, `Authorization: Bearer <key>`, optional
//!   `Idempotency-Key`): `202 {"id": "msg_…"}`; a repeated idempotency key gets the original
//!   answer and counts as a duplicate. Throttles per [`Behaviour`].
//! - `GET /v1/quota` (bearer key): the caller's gates; never charges, works while exhausted.
//! - `GET /_stats`: [`StatsSnapshot`] as JSON. `GET /_stats/keys`: [`KeyCounts`] (requests
//!   per idempotency key) as JSON. `GET /healthz`: `ok`.
//!
//! ## Map
//! [`config`] (what to limit, what quirks to replay and when), [`StatsSnapshot`],
//! [`spawn`] / [`RunningProvider`].

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod config;
mod dates;
mod server;
mod shared;
mod stats;
mod styles;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use abide_core::Clock;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use abide_gate::Algorithm;
pub use config::{
    parse_duration, Abuse, ApiKey, Behaviour, HeaderStyle, Limits, ProviderConfig, Rate, RedisUrl,
    RetryAfterStyle, ScheduleEntry, SuspensionStyle, ThrottleStyle, DEMO_KEY, MAX_SUSPEND_SECS,
};
pub use stats::{KeyCounts, SecondCount, StatsSnapshot, HISTORY_SECS, MAX_COUNTED_KEYS};

/// Errors of abide-provider.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is missing, malformed or out of range.
    #[error("configuration: {0}")]
    Config(String),
    /// The limits do not make a valid gate set.
    #[error("limits: {0}")]
    Gate(#[from] abide_gate::Error),
}

impl ProviderConfig {
    /// Check that the configuration can run (keys present, limits valid).
    ///
    /// # Errors
    /// [`Error::Config`] or [`Error::Gate`] naming the broken value.
    pub fn validate(&self) -> Result<(), Error> {
        server::App::new(self.clone(), Arc::new(abide_core::SystemClock)).map(drop)
    }
}

/// Start a provider on `addr` (use port 0 for any free port) inside the current tokio
/// runtime, reading time from `clock`.
///
/// # Errors
/// `InvalidInput` for an invalid configuration; `ConnectionRefused` when a configured
/// Redis cannot be reached; any error from binding the socket.
///
/// # Cancel safety
/// Cancelling before it returns leaves nothing running.
pub async fn spawn(
    config: ProviderConfig,
    clock: Arc<dyn Clock>,
    addr: SocketAddr,
) -> io::Result<RunningProvider> {
    let redis = config.redis_url.clone();
    let prefix = config.redis_prefix.clone();
    let mut app = server::App::new(config, clock)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if let Some(url) = redis {
        let store = abide_gate::RedisGates::connect(&url.0, Arc::clone(&app.gates), &prefix)
            .await
            .map_err(|e| io::Error::new(io::ErrorKind::ConnectionRefused, e))?;
        app.redis = Some(store);
    }
    let app = Arc::new(app);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = oneshot::channel::<()>();
    let router = server::router(Arc::clone(&app));
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await
    });
    tracing::info!(%addr, "fake provider listening");
    Ok(RunningProvider {
        addr,
        app,
        shutdown: Some(tx),
        task: Some(task),
    })
}

/// A provider running in the background. Dropping it asks the server to stop.
#[derive(Debug)]
pub struct RunningProvider {
    addr: SocketAddr,
    app: Arc<server::App>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl RunningProvider {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A snapshot of the counters (the same data as `GET /_stats`).
    pub fn stats(&self) -> StatsSnapshot {
        self.app.stats()
    }

    /// Requests received per idempotency key (the same data as `GET /_stats/keys`).
    pub fn requests_by_key(&self) -> KeyCounts {
        self.app.key_counts()
    }

    /// Stop accepting connections, let in-flight requests finish, and wait for the server.
    ///
    /// # Errors
    /// An I/O error the server ended with.
    pub async fn shutdown(mut self) -> io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(t) => t.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningProvider {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
