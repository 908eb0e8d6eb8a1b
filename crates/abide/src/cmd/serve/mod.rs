//! `abide serve`: the outbox as a daemon, with an HTTP API and Prometheus metrics; the
//! dispatcher runs in the same process.

pub(crate) mod api;
pub(crate) mod flags;
pub(crate) use self::flags::Args;

mod cancel;
pub(crate) mod conn;
pub(crate) mod dashboard;
pub(crate) mod history;
pub(crate) mod metrics;
pub(crate) mod state;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Dispatcher, DispatcherOptions};
use anyhow::{bail, Context};

use self::metrics as serve_metrics;
use self::state::Api;
use crate::deliver::{Interrupt, Outbox};
use crate::providers;

/// Shortest API token not warned about, in bytes (128 bits of hex-encoded randomness would
/// be 32; 16 is the floor below which guessing becomes a real risk).
const MIN_TOKEN_BYTES: usize = 16;

/// Warnings worth a line on stderr before serving: a short token, or an API reachable from
/// other hosts (bearer tokens travel in clear text without a TLS proxy in front).
fn start_warnings(token_len: usize, listen: SocketAddr) -> Vec<String> {
    let mut w = Vec::new();
    if token_len < MIN_TOKEN_BYTES {
        w.push(format!(
            "the API token is {token_len} bytes, shorter than {MIN_TOKEN_BYTES}; use e.g. $(openssl rand -hex 32)"
        ));
    }
    if !listen.ip().is_loopback() {
        w.push(format!(
            "--listen {listen} is not a loopback address: the API is reachable from other hosts; put a TLS proxy in front or listen on 127.0.0.1"
        ));
    }
    w
}

/// A conventional environment variable name (`ABIDE_TOKEN`): upper-case letters, digits
/// and `_`, not starting with a digit. Anything else given to `--token-env` may be the
/// secret itself, and is not repeated.
fn looks_like_a_variable_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = providers::load_config(&args.config, args.workers, args.lease)?;
    let token = match std::env::var(&args.token_env) {
        Ok(t) if !t.trim().is_empty() => t,
        _ if looks_like_a_variable_name(&args.token_env) => bail!(
            "the API token variable {} is unset or empty; export it (e.g. {}=$(openssl rand -hex 32))",
            args.token_env,
            args.token_env
        ),
        // Perhaps the token itself: never echoed.
        _ => bail!(
            "--token-env takes the NAME of an environment variable (default ABIDE_TOKEN), not \
             the token: the value given names no variable that is set; export ABIDE_TOKEN=\
             $(openssl rand -hex 32) and omit --token-env"
        ),
    };
    let token_digest = state::digest(token.trim());
    for w in start_warnings(token.trim().len(), args.listen) {
        eprintln!("abide: warning: {w}");
    }
    drop(token);
    args.logs.init("info");
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .context("installing the Prometheus recorder")?;
    serve_metrics::describe();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        // Caught from here on: a signal before the listener is up still stops cleanly.
        let interrupt = Interrupt::listen().context("installing the SIGTERM handler")?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        args.redis.check(&args.config, &cfg).await?;
        let outbox = Outbox::open(&args.db.url, clock.now()).await?;
        if outbox.reclaimed > 0 {
            tracing::warn!(
                items = outbox.reclaimed,
                "reclaimed IN_FLIGHT items of a process that died"
            );
        }
        let opts = DispatcherOptions {
            lease: args.lease,
            // A service stays up through a store fault: it stops sending and reports 503
            // on /healthz until the database accepts writes again.
            store_fault_limit: Duration::MAX,
            redis_url: args.redis.url(&cfg),
            coordination_prefix: args.redis.coordination_prefix(&cfg),
            ..DispatcherOptions::default()
        };
        match &opts.redis_url {
            Some(url) => tracing::info!(redis = %abide_outbox::echo::redact_url(url),
                "sharing each provider's limit with the other nodes on this Redis"),
            None => tracing::info!("coordination local: this node alone sends to each provider"),
        }
        let d = Dispatcher::new(outbox.store.clone(), cfg.clone(), Arc::clone(&clock), opts)?;
        tracing::info!(node = %d.node(), "node id (lease owner, coordination)");
        let progress = Arc::new(RwLock::new(None));
        let fault = d.clone();
        let api = Api {
            store_fault: Arc::new(move || fault.store_fault()),
            store: outbox.store.clone(),
            config: Arc::new(cfg),
            clock,
            token_digest,
            progress: Arc::clone(&progress),
            metrics,
            metrics_auth: args.metrics_auth,
            history: Arc::new(history::History::new(history::KEEP, history::EVERY)),
        };
        let (listener, addr) = crate::cmd::listen(args.listen).await?;
        tracing::info!(%addr, "abide serve listening");

        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            interrupt.nth(1).await;
            tracing::info!("shutting down: no new requests or claims; finishing those on the wire");
            let _ = stop_tx.send(true);
        });
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|v| *v).await;
        };
        let refresher = {
            let d = d.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    if let Ok(p) = d.progress().await {
                        if let Ok(mut slot) = progress.write() {
                            *slot = Some(p);
                        }
                    }
                }
            })
        };
        let sampler = {
            let api = api.clone();
            tokio::spawn(async move {
                let ticks = history::interval(history::EVERY);
                history::keep(&api.history, ticks, || dashboard::sample(&api)).await;
            })
        };
        let app = api::router(api).layer(axum::middleware::from_fn_with_state(
            conn::allowed_hosts(addr),
            conn::host_check,
        ));
        let server = conn::serve(
            listener,
            app,
            args.max_connections,
            stopped(stop_rx.clone()),
        );
        let dispatcher = d.run_until(stopped(stop_rx));
        let (served, delivered) = tokio::join!(server, dispatcher);
        refresher.abort();
        sampler.abort();
        served.context("HTTP server")?;
        let p = match delivered {
            Ok(p) => p,
            // SIGTERM while the database refused writes: stopped at once, not at a limit.
            Err(e @ abide_outbox::Error::ResultsNotRecorded { .. }) => {
                let t = d.totals();
                tracing::error!(error = %e, delivered = t.delivered, attempts = t.attempts,
                    "stopped while results could not be written; unrecorded items are resent \
                     with their keys by the next run");
                d.close().await;
                return Ok(ExitCode::from(130));
            }
            Err(e) => return Err(e.into()),
        };
        d.close().await;
        tracing::info!(
            delivered = p.totals.delivered,
            attempts = p.totals.attempts,
            "stopped"
        );
        outbox.close(&args.db.url).await?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_tokens_and_open_addresses_are_warned_about() {
        let lo: SocketAddr = "127.0.0.1:8787".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:8787".parse().expect("addr");
        let lo6: SocketAddr = "[::1]:8787".parse().expect("addr");
        assert!(start_warnings(64, lo).is_empty());
        assert!(start_warnings(16, lo6).is_empty());
        let w = start_warnings(15, lo);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("15 bytes"), "{w:?}");
        let w = start_warnings(64, any);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("0.0.0.0:8787"), "{w:?}");
    }
}
