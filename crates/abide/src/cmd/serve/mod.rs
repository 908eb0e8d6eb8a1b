//! `abide serve`: the outbox as a daemon, with an HTTP API and Prometheus metrics; the
//! dispatcher runs in the same process.

pub(crate) mod api;
pub(crate) mod conn;
pub(crate) mod dashboard;
pub(crate) mod metrics;
pub(crate) mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Dispatcher, DispatcherOptions};
use anyhow::{bail, Context};

use self::metrics as serve_metrics;
use self::state::Api;
use crate::args::{self, DbArgs, RedisArgs};
use crate::deliver::{Interrupt, Outbox};
use crate::providers;

const LONG_ABOUT: &str = "\
Run the outbox as a daemon: an HTTP API to enqueue and inspect items, the dispatcher
delivering them in the same process (paced per provider, throttles honoured, nothing lost),
and Prometheus metrics. SIGTERM or Ctrl-C shuts down gracefully: the API stops accepting,
the dispatcher stops claiming and records every request already on the wire.

EXAMPLES
  export ABIDE_TOKEN=$(openssl rand -hex 32) ABIDE_SMS_TOKEN=demo-key
  abide serve --config examples/providers.toml --db outbox.db --listen 127.0.0.1:8787
  curl -s -H \"Authorization: Bearer $ABIDE_TOKEN\" -d '{\"provider\":\"sms\",\"path\":\"/v1/messages\",
       \"body\":{\"to\":\"+15550100\",\"text\":\"hi\"},\"idempotency_key\":\"order-42\"}' \\
       http://127.0.0.1:8787/v1/items
  curl -s -H \"Authorization: Bearer $ABIDE_TOKEN\" http://127.0.0.1:8787/v1/stats | jq .counts
  curl -s http://127.0.0.1:8787/metrics | grep abide_items

HTTP API (JSON; every /v1 route needs `Authorization: Bearer <token>`)
  POST /v1/items           one item (an object in the `abide send` line format) or an array
                           of up to 10000. Checked whole: one bad item -> 422 listing each
                           bad index, nothing stored. 202 {\"id\",\"created\"} (or
                           {\"items\":[...]}); `created: false` = that idempotency_key was
                           already enqueued (a safe retry of the POST). Without a key the
                           item id becomes the key: send one if you may retry the POST.
  GET  /v1/items/{id}      the item (state, attempts, next_attempt_at, last provider code,
                           reason) and every attempt (what the remote said, our verdict, the
                           delay chosen and why, latency). Times RFC 3339 (UTC),
                           durations delay_ms/latency_ms. 404 if unknown.
  GET  /v1/items?state=S   the items in one state, newest first, a page at a time
                           (&provider=P, &limit=1..1000 (100), &offset= the last page's
                           next_offset; 10000 items back at most): ids, providers, attempts,
                           reason, last provider code; never request data.
  GET  /v1/openapi.json    this API as OpenAPI 3.1 (open, no token needed).
  GET  /v1/stats           counts per state, oldest pending age, attempts per remote code,
                           and per provider: pace, learned target, pause left, throttle rate,
                           counts and this process's totals; \"suspended\": why it sends
                           nothing this run (an SMPP bind refused for good), else null.
  POST /v1/requeue         DEFERRED -> QUEUED; body {} or {\"provider\":\"sms\",\"ids\":[...]}.
                           At most 10000 ids (413 beyond). 200 {\"requeued\": N}.
  GET  /metrics            Prometheus text: abide_items{state}, abide_oldest_pending_age_seconds,
                           abide_remote_responses_total{remote}, abide_receipts{state}
                           (SMPP receipts; state=\"unmatched\" names no item), and per provider
                           abide_provider_{pace,target,ceiling,advertised}_requests_per_second,
                           abide_provider_throttle_ratio, abide_provider_pause_remaining_seconds,
                           abide_provider_sunset_timestamp_seconds, abide_provider_suspended
                           (1: an SMPP bind refused for good), abide_dispatcher_X_total
                           for X in attempts, delivered, throttled, retries_scheduled,
                           retry_budget_denied, failed, deferred, transport_failures. Open by
                           default (counts only, no item data) so a scraper needs no secret;
                           --metrics-auth puts it (and the dashboard's data) behind the
                           token. Old names, renamed:
                           abide_provider_pace_per_second, _throttle_rate, _paused_seconds and
                           abide_dispatcher_total{what} (docs/operations.md).
  GET  /                   The dashboard (HTML; read-only without the token, actions send it):
                           items per state, oldest waiting item, per provider pace / learned
                           ceiling / advertised limit, throttles, the last pause with its raw
                           Retry-After, attempts per remote status, recent FAILED/DEFERRED
                           items with a requeue button. Data: GET /dashboard/state.json.
  GET  /healthz            ok, or 503 while results cannot be written (open).

CONNECTIONS
  A connection with no request in progress (idle, or a head never finished) is closed after
  10 s; a request, its body included, must be answered within 30 s (else 408). At most
  --max-connections are open (default 512): a new one closes the one idle longest, and is
  refused while every connection has a request in progress (a warning says so). On a
  loopback --listen the Host header must be the listen address or localhost, else 421 (a
  web page cannot reach the API by DNS rebinding). While the database cannot be written,
  requests that need it answer 503 with Retry-After.

AUTH
  The token is read once at start from the environment variable named by --token-env (never
  from a flag, so it stays out of `ps` and shell history); it is never logged and is compared
  in constant time. Without it `serve` refuses to start (exit 2).

The first line on stdout is `listening on http://ADDR`. With an SQLite --db, serve holds
<db>.lock like `send` (one sender per file) and reclaims a dead process's IN_FLIGHT items at
start.";

/// Arguments of `abide serve`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    /// Providers file (TOML); see docs/providers-file.md.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    #[command(flatten)]
    db: DbArgs,
    /// Address for the HTTP API; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Name of the environment variable holding the API bearer token.
    #[arg(long, default_value = "ABIDE_TOKEN", value_name = "VAR")]
    token_env: String,
    /// Most open connections; at the cap a new one closes the connection idle longest
    /// (one with a request in progress never), and is refused while all are busy.
    #[arg(long, default_value_t = conn::DEFAULT_MAX_CONNECTIONS, value_name = "N",
        value_parser = parse_max_connections)]
    max_connections: usize,
    /// Require the token on /metrics too.
    #[arg(long)]
    metrics_auth: bool,
    /// Concurrent senders per provider (overrides `concurrency` in the config).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: Option<u16>,
    /// Lease on a claimed item (see `abide send --help`).
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = args::parse_lease)]
    lease: Duration,
    #[command(flatten)]
    pub(crate) redis: RedisArgs,
    #[command(flatten)]
    pub(crate) logs: crate::logs::LogArgs,
}

fn parse_max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => Err("must be 1..=65536".into()),
    }
}

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
