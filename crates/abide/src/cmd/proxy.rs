//! `abide proxy`: abide-proxy in front of the providers of a providers file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use abide_outbox::EnvCredentials;
use abide_proxy::{Proxy, ProxyError, ProxyOptions};
use anyhow::{bail, Context};

use crate::cmd::serve::state::digest;
use crate::deliver::Interrupt;
use crate::{args, providers};

const LONG_ABOUT: &str = "\
Run an HTTP reverse proxy in front of the providers of a providers file: any client, in any
language, gets abide's pacing, pauses and retries by changing its base URL. Each provider is
one abide session (the code `send`, `serve` and the Rust clients run).

ROUTES
  ANY  /{provider}/{path}  to the provider's base_url + path, query kept; a path that could
                           leave the base path is 400 naming the rule; an unknown provider
                           404 naming the configured ones. Absolute-form requests
                           (HTTP_PROXY=http://ADDR) whose origin is a provider's base_url go
                           there too; CONNECT is 501 (inside TLS nothing can be seen).
  GET  /_abide/healthz     ok.
  GET  /_abide/metrics     Prometheus text: requests inside, wait seconds, answers to clients
                           by status; upstream answers, pace, pause and coordination under
                           the names `abide serve` exports (abide_remote_responses_total,
                           abide_provider_*, abide_coordination_*).
  GET  /_abide/stats       JSON: per provider requests inside, pace, pause left, coordination,
                           answers to clients and from the upstream by status.

WAITING
  A request is held while its provider is paced or paused, at most `Abide-Max-Wait:
  <seconds>` (else --max-wait). A longer wait, or --max-waiting requests already inside, is
  answered 429 with Retry-After (whole seconds, at least 1), RateLimit fields and
  `Abide-Stopped: wait_too_long | queue_full` (also when --max-buffered-total bytes of
  request bodies are held). One log line per pause episode, not per request. An upstream 429 reaches the client only when
  attempts or age ran out. A POST without Idempotency-Key is replayed only after an answer
  that says it was not acted on (429, 503 + Retry-After, a refused connection); after a
  timeout or 502/504 the client gets 502/504 saying it may have been acted on.

LISTENER
  A request head must arrive within 10 s (an idle connection is closed after as long); a
  body slower than --min-body-rate bytes/s on average (after a 10 s grace) is answered 408.
  At most --max-connections are open: at the cap a new connection closes the one idle
  longest, and is refused while every open one has a request in progress (a warning says
  so, at most every 10 s) - the rule `abide serve` follows.

CREDENTIALS
  A provider's credentials_env is added upstream; without it the client's Authorization
  passes through. A listener that is not loopback needs --token-env: clients then send
  `Proxy-Authorization: Bearer <token>` (compared in constant time, never logged), and
  /_abide/metrics and /_abide/stats need it too (there `Authorization` also works, as a
  Prometheus scrape sends it); /_abide/healthz stays open.

EXAMPLE
  abide proxy --config examples/providers.toml --listen 127.0.0.1:8788
  curl -s -X POST http://127.0.0.1:8788/sms/v1/messages -d '{\"to\":\"+15550100\",\"text\":\"hi\"}'

The first line on stdout is `listening on http://ADDR`. SIGTERM or Ctrl-C drains: no new
connections; every request inside is answered first.";

/// Arguments of `abide proxy`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    /// Providers file (TOML); see docs/providers-file.md.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8788")]
    listen: SocketAddr,
    /// Name of the environment variable holding the clients' bearer token (required when
    /// --listen is not a loopback address).
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// Longest single wait of a request without `Abide-Max-Wait`.
    #[arg(long, default_value = "30s", value_name = "DURATION", allow_hyphen_values = true, value_parser = args::parse_duration)]
    max_wait: Duration,
    /// Requests per provider inside the proxy before new ones get 429.
    #[arg(long, default_value_t = 10_000, value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    max_waiting: u32,
    /// Largest request body kept for resending, in bytes; larger ones stream once.
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    max_buffered_body: usize,
    /// Bytes of request bodies held at once, all providers together; beyond, 429.
    #[arg(long, default_value_t = 256 << 20, value_name = "BYTES")]
    max_buffered_total: usize,
    /// Most open connections; at the cap a new one closes the connection idle longest
    /// (one with a request in progress never), and is refused while all are busy.
    #[arg(long, default_value_t = abide_proxy::cap::DEFAULT_MAX_CONNECTIONS, value_name = "N",
        value_parser = crate::cmd::serve::flags::parse_max_connections)]
    max_connections: usize,
    /// Slowest request body accepted, in bytes per second on average after a 10 s grace;
    /// a slower one is answered 408. 0: no minimum (the grace still bounds a body that stops).
    #[arg(long, default_value_t = abide_proxy::MinBodyRate::default().bytes_per_sec,
        value_name = "BYTES_PER_SEC")]
    min_body_rate: u64,
    /// Share each provider's limit with other proxies and nodes on this Redis; wins over
    /// `[coordination] redis_url`. Shown redacted everywhere.
    #[arg(long, value_name = "URL", env = "ABIDE_REDIS_URL", hide_env_values = true,
        value_parser = args::parse_redis)]
    redis: Option<String>,
    #[command(flatten)]
    logs: crate::logs::LogArgs,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = providers::load_config(&args.config, None, Duration::from_secs(30))?;
    let token_digest = match &args.token_env {
        Some(var) => match std::env::var(var) {
            Ok(t) if !t.trim().is_empty() => Some(digest(t.trim())),
            _ => bail!("the proxy token variable {var} is unset or empty; export it (e.g. {var}=$(openssl rand -hex 32))"),
        },
        None if !args.listen.ip().is_loopback() => bail!(
            "--listen {} is not a loopback address: other hosts could send through the proxy with its providers' credentials; give --token-env VAR (a bearer token clients send in Proxy-Authorization) or listen on 127.0.0.1",
            args.listen
        ),
        None => None,
    };
    let mut coordination = cfg.coordination.clone();
    if let Some(url) = args::redis_url(args.redis.as_deref(), &cfg) {
        coordination = abide_redis::CoordinationConfig::new(
            Some(url),
            Some(coordination.expected_nodes),
            Some(coordination.key_prefix),
        )
        .context("--redis")?;
    }
    let opts = ProxyOptions {
        max_wait: args.max_wait,
        max_waiting: args.max_waiting as usize,
        max_buffered_body: args.max_buffered_body,
        max_buffered_total: args.max_buffered_total,
        max_connections: args.max_connections,
        min_body_rate: abide_proxy::MinBodyRate {
            bytes_per_sec: args.min_body_rate,
            ..abide_proxy::MinBodyRate::default()
        },
        token_digest,
        coordination: Some(coordination),
        ..ProxyOptions::default()
    };
    args.logs.init("info");
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let interrupt = Interrupt::listen().context("installing the SIGTERM handler")?;
        if let Some(url) = args::redis_url(args.redis.as_deref(), &cfg) {
            args::check_redis(args.redis.as_deref(), &args.config, &url).await?;
        }
        let proxy = Proxy::new(&cfg, &EnvCredentials, opts).map_err(|e| match e {
            // An option comes from a flag, not from the providers file.
            ProxyError::Option { option, problem } => {
                anyhow::anyhow!("--{}: {problem}", option.replace('_', "-"))
            }
            e => anyhow::Error::new(e).context(format!("{}", args.config.display())),
        })?;
        let (listener, addr) = crate::cmd::listen(args.listen).await?;
        tracing::info!(%addr, providers = ?proxy.provider_names(), "abide proxy listening");
        let shutdown = async move {
            interrupt.nth(1).await;
            tracing::info!("shutting down: no new connections; answering the requests inside");
        };
        abide_proxy::serve(proxy, listener, shutdown).await?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use crate::cmd::serve::metrics::{Kind, METRICS};

    #[test]
    fn the_metrics_the_proxy_shares_with_serve_have_serve_s_names_and_types() {
        for (name, kind) in abide_proxy::metric_names::SHARED {
            let m = METRICS
                .iter()
                .find(|m| m.name == *name)
                .unwrap_or_else(|| panic!("{name} is not a metric of abide serve"));
            let want = match m.kind {
                Kind::Gauge => "gauge",
                Kind::Counter => "counter",
            };
            assert_eq!(*kind, want, "{name}");
        }
    }
}
