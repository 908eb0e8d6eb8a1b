//! The flags of `abide serve` and its long help (the routes of its API included).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::conn;
use crate::args::{DbArgs, RedisArgs};

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
  POST /v1/items/{id}/cancel
                           QUEUED, PENDING or DEFERRED -> FAILED (reason cancelled): 200 with
                           the item; 409 when final or IN_FLIGHT (claimed by a sender, which
                           claims a little ahead of the wire: its answer decides); 404.
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
                           items with a requeue button. Data: GET /dashboard/state.json, and
                           the charts' last hour (a sample every 5 s, kept by serve in
                           memory): GET /dashboard/history.json.
  GET  /healthz            ok, or 503 while results cannot be written (open).

CONNECTIONS
  A connection with no request in progress (idle, or a head never finished) is closed after
  10 s; a request, its body included, must be answered within 30 s (else 408). At most
  --max-connections are open (default 512): a new one closes the one idle longest, and is
  refused while every connection has a request in progress (a warning says so). On a
  loopback --listen the host (Host, or an absolute-form target's authority) must be the
  listen address or localhost, else 421 (a web page cannot reach the API by DNS
  rebinding). On any listener two Host lines, none in HTTP/1.1, a Host that is not
  host[:port], or user:password@ in the target is 400 (RFC 9112 §3.2). An unknown route is
  404 and a known route under another method 405 (with Allow), each with a JSON body. While
  the database cannot be written, requests that need it answer 503 with Retry-After.

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
    pub(crate) config: PathBuf,
    #[command(flatten)]
    pub(crate) db: DbArgs,
    /// Address for the HTTP API; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub(crate) listen: SocketAddr,
    /// Name of the environment variable holding the API bearer token.
    #[arg(long, default_value = "ABIDE_TOKEN", value_name = "VAR")]
    pub(crate) token_env: String,
    /// Most open connections; at the cap a new one closes the connection idle longest
    /// (one with a request in progress never), and is refused while all are busy.
    #[arg(long, default_value_t = conn::DEFAULT_MAX_CONNECTIONS, value_name = "N",
        value_parser = parse_max_connections)]
    pub(crate) max_connections: usize,
    /// Require the token on /metrics too.
    #[arg(long)]
    pub(crate) metrics_auth: bool,
    /// Concurrent senders per provider (overrides `concurrency` in the config).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: Option<u16>,
    /// Lease on a claimed item (see `abide send --help`).
    #[arg(long, default_value = "30s", value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::args::parse_lease)]
    pub(crate) lease: Duration,
    #[command(flatten)]
    pub(crate) redis: RedisArgs,
    #[command(flatten)]
    pub(crate) logs: crate::logs::LogArgs,
}

pub(crate) fn parse_max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => Err("must be 1..=65536".into()),
    }
}
