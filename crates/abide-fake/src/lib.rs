//! # abide-fake
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
//! let p = abide_fake::spawn(
//!     abide_fake::ProviderConfig::default(),
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
//! - `GET /v1/export?bytes=N`: `N` bytes (at most 1 GiB), streamed in 64 KiB chunks; no
//!   key, no limits, not counted: a large download for streaming tests.
//! - `GET /_stats`: [`StatsSnapshot`] as JSON (with an `smpp` object when the SMPP listener
//!   runs). `GET /_stats/keys`: [`KeyCounts`] (requests per idempotency key) as JSON.
//!   `GET /healthz`: `ok`.
//!
//! ## SMPP
//! [`spawn_listeners`] with [`Listeners::smpp`] also runs a fake SMSC (SMPP 3.4 over TCP)
//! under the same gates and schedule: see [`smpp`] and [`SmppConfig`].
//!
//! ## Map
//! [`config`] (what to limit, what quirks to replay and when), [`StatsSnapshot`],
//! [`spawn`] / [`RunningProvider`].

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod app;
pub mod config;
mod dates;
mod error;
mod export;
mod idempotency;
mod noise;
mod server;
mod shared;
pub mod smpp;
mod stats;
mod styles;
mod vendor_throttles;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use abide_core::Clock;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use abide_gate::Algorithm;
pub use config::{
    parse_duration, Abuse, ApiKey, Behaviour, GateMode, HeaderStyle, Limits, ProviderConfig, Rate,
    ReceiptState, RedisUrl, RetryAfterStyle, ScheduleEntry, Spread, SuspensionStyle, ThrottleStyle,
    DEMO_KEY, MAX_SLOW_MS, MAX_SUSPEND_SECS,
};
pub use error::Error;
pub use smpp::config::{
    ReceiptPolicy, SmppAccount, SmppConfig, DEMO_PASSWORD, DEMO_SYSTEM_ID, MAX_PDU_BYTES,
};
pub use smpp::stats::SmppStats;
pub use smpp::IDEMPOTENCY_TLV;
pub use stats::{KeyCounts, SecondCount, StatsSnapshot, HISTORY_SECS, MAX_COUNTED_KEYS};

impl ProviderConfig {
    /// Check that the configuration can run (keys present, limits valid).
    ///
    /// # Errors
    /// [`Error::Config`] or [`Error::Gate`] naming the broken value.
    pub fn validate(&self) -> Result<(), Error> {
        app::App::new(self.clone(), Arc::new(abide_core::SystemClock)).map(drop)
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
    spawn_listeners(
        config,
        clock,
        Listeners {
            http: Some(addr),
            smpp: None,
        },
    )
    .await
}

/// Where the provider listens. Port 0 picks a free port.
#[derive(Debug, Clone, Copy, Default)]
pub struct Listeners {
    /// The HTTP API (`/v1/messages`, `/_stats`); `None`: no HTTP.
    pub http: Option<SocketAddr>,
    /// The fake SMSC (SMPP 3.4); `None`: no SMPP.
    pub smpp: Option<SocketAddr>,
}

/// Start a provider with the given listeners (at least one) inside the current tokio
/// runtime, reading time from `clock`. Both listeners share one set of gates, one schedule
/// and one [`StatsSnapshot`].
///
/// # Errors
/// As [`spawn`]; `InvalidInput` also when no listener is given.
///
/// # Cancel safety
/// Cancelling before it returns leaves nothing running.
pub async fn spawn_listeners(
    config: ProviderConfig,
    clock: Arc<dyn Clock>,
    listeners: Listeners,
) -> io::Result<RunningProvider> {
    if listeners.http.is_none() && listeners.smpp.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no listener: give an HTTP or an SMPP address",
        ));
    }
    let redis = config.redis_url.clone();
    let prefix = config.redis_prefix.clone();
    let mut app =
        app::App::new(config, clock).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if let Some(url) = redis {
        let store = abide_gate::RedisGates::connect(&url.0, Arc::clone(&app.gates), &prefix)
            .await
            .map_err(|e| io::Error::new(io::ErrorKind::ConnectionRefused, e))?;
        app.redis = Some(store);
    }
    let smsc = listeners.smpp.map(|_| Arc::new(smpp::Smsc::new(&app)));
    app.smpp_stats = smsc
        .clone()
        .map(|s| -> app::SmppStatsReader { Arc::new(move || s.stats()) });
    let app = Arc::new(app);
    let smpp = match (smsc, listeners.smpp) {
        (Some(smsc), Some(addr)) => Some(smpp::Listener::start(smsc, addr).await?),
        _ => None,
    };
    let mut running = RunningProvider {
        http_addr: None,
        smpp,
        app: Arc::clone(&app),
        shutdown: None,
        task: None,
    };
    if let Some(addr) = listeners.http {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let router = server::router(app);
        running.task = Some(tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        }));
        running.shutdown = Some(tx);
        running.http_addr = Some(addr);
        tracing::info!(%addr, "fake provider listening");
    }
    Ok(running)
}

/// A provider running in the background. Dropping it asks the server to stop.
#[derive(Debug)]
pub struct RunningProvider {
    http_addr: Option<SocketAddr>,
    smpp: Option<smpp::Listener>,
    app: Arc<app::App>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl RunningProvider {
    /// The HTTP address (the SMPP address when HTTP is off).
    pub fn addr(&self) -> SocketAddr {
        match (self.http_addr, &self.smpp) {
            (Some(a), _) => a,
            (None, Some(s)) => s.addr,
            // spawn_listeners refuses to start without a listener.
            (None, None) => SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }

    /// The SMPP address, when the SMPP listener runs.
    pub fn smpp_addr(&self) -> Option<SocketAddr> {
        self.smpp.as_ref().map(|s| s.addr)
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
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
        if let Some(s) = self.smpp.take() {
            s.stop();
        }
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
