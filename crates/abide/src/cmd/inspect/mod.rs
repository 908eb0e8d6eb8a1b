//! `abide inspect`: explain how abide reads one response (verdict, delay and its reason,
//! rate limits in the dialect used, deprecation warnings) as stable JSON on stdout.

mod block;

use std::io::Read;
use std::process::ExitCode;
use std::time::SystemTime;

use abide_core::ratelimit::{self, Malformed, RateLimitInfo};
use abide_core::{
    parse_warnings, Clock, Dialect, ManualClock, Observation, Session, SessionConfig, SystemClock,
    Warning, MAX_CLASSIFY_BODY,
};
use anyhow::{bail, Context};
use http::{HeaderMap, StatusCode};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use self::block::{append, parse_block, parse_header_line, shown, MAX_BLOCK_BYTES};

const LONG_HELP: &str = "\
INPUT
  Give the status with --status (or --smpp for an SMPP command_status) and headers with
  repeated --header 'Name: value' flags, or pipe a raw header block with --stdin (or `-`).
  The block may start with a status line such as `HTTP/1.1 429 Too Many Requests`; it ends
  at the first empty line; the first 4 KiB of a body after it are read as the body (as the
  outbox keeps them), unless --body is given. --status overrides the status line.
  Flags and stdin headers combine; a repeated header (two Retry-After lines) is kept.
  The header block may be at most 1 MiB and 10000 lines.

BODIES
  Vendors' throttles that are not a 429 are read from the body by structure (parsed JSON
  fields, an XML <Error><Code>, a vendor header), never by a word in free text: a GraphQL
  200 THROTTLED (its wait from the query cost), Slack's 200 ratelimited, Salesforce's 403
  REQUEST_LIMIT_EXCEEDED, Google's usageLimits, Meta's codes 4/17/32/613, AWS throttling
  codes, S3 SlowDown, Azure ServerBusy. Google's dailyLimitExceeded and OpenAI's
  insufficient_quota are out_of_quota: deferred for a person, never retried on a timer.
  A delay the body names (retry_after, RetryInfo, `6m0s`) applies when no header names one.
  --config FILE --provider NAME applies that provider's [provider.classify] overrides and
  its [[provider.classify.body]] / [[provider.classify.header]] rules.

DIALECTS (--dialect, as rate_limit_dialect in the providers file)
  auto (default)  detect from names that mean one thing: X-Shopify-Shop-Api-Call-Limit
                  (shopify); X-RateLimit-Bucket/-Scope/-Global (discord);
                  X-RateLimit-Resource or X-GitHub-Request-Id (github); else IETF RateLimit
                  fields of any draft, then X-RateLimit-* / X-Rate-Limit-* (a reset above
                  10^9 is epoch seconds, above 10^12 epoch milliseconds)
  ietf            RateLimit / RateLimit-Policy, RateLimit-Limit/-Remaining/-Reset
  x-ratelimit     X-RateLimit-* and X-Rate-Limit-*: Limit, Remaining, Used, Reset, Reset-After
  azure           retry-after-ms / x-ms-retry-after-ms (read in every dialect),
                  x-ms-ratelimit-remaining-*
  shopify         X-Shopify-Shop-Api-Call-Limit: used/size, a leaky bucket draining in 20 s
  discord         X-RateLimit-* with Bucket, Global, Scope; Reset-After preferred
  github          X-RateLimit-* with Resource, Used, epoch Reset; a 403/429 whose body says
                  \"secondary rate limit\" is a throttle waiting at least 60 s

OUTPUT (one JSON object on stdout; field names and meanings are stable)
  verdict           success | throttle | retry | refresh_credentials | terminal | out_of_quota | unknown
  reason            stable reason code, e.g. http_429, http_403_retry_after, smpp_0x58_throttled
  delay_secs        seconds abide would wait before the next attempt (within floor 1 s and
                    cap 600 s); null for success, terminal and out_of_quota
  delay_reason      honoured | floored | capped | unparseable | absent; null when delay_secs is.
                    absent = no Retry-After, the default backoff base (0.5 s) floored to 1 s
  pause_secs        seconds abide pauses every send to this host: a throttle's Retry-After
                    delay, or the reset of an exhausted rate limit (at most 600 s); null
                    when none. The next attempt waits the longer of delay_secs and this.
  retry_after_raw   the retry-after-ms (preferred) or Retry-After line(s) as received, joined with \", \" (control
                    characters as \\xNN, invalid UTF-8 as U+FFFD, cut with … after about
                    256 bytes); null when absent
  retry_after_secs  what that header parsed to before floor and cap (largest value, a date
                    converted against --now); null when absent or unparseable. A value
                    over 18446744073709551615 s (u64) saturates there; JSON shows it as
                    1.8446744073709552e19 and sets retry_after_saturated
  retry_after_saturated  true when retry_after_secs is that saturated maximum, not the
                    number received (see retry_after_raw for it)
  rate_limit        null, or {source, policy, limit, remaining, reset_secs, window_secs,
                    exhausted, advertised_rate_per_sec, used, scope, leaky_bucket}.
                    An exhausted limit without a reset takes its reset from Retry-After
  warnings          list of {kind: deprecation, at, link} and {kind: sunset, at}
  now               the clock used, RFC 3339
  status            the HTTP status, or null; smpp_command_status: the SMPP code, or null
  dialect           the rate-limit dialect that read the headers (auto when none matched)
  dialect_detected  true when --dialect auto chose it
  rate_limit_warnings  list of {header, raw}: rate-limit headers present but unreadable,
                    ignored

  An unparseable Retry-After waits 300 s plus a jitter of up to 60 s drawn from --seed
  (default 0, so the same input and --now always print the same output).

EXIT STATUS
  0 when the response was read (whatever the verdict); 2 for bad input (a malformed
  header line, a bad --now, --status, --smpp or --dialect), with the offending line or
  flag named.";

/// Arguments of `abide inspect`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    /// HTTP status code of the response (or give a status line on stdin).
    #[arg(long, value_name = "N")]
    status: Option<u16>,
    /// SMPP command_status instead of an HTTP status, e.g. 0x58 (hex) or 88.
    #[arg(long, value_name = "CODE", conflicts_with = "status")]
    smpp: Option<String>,
    /// A response header `Name: value`; repeat for several (or the same one twice).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Read a raw header block (optionally starting with a status line) from stdin.
    #[arg(long)]
    stdin: bool,
    /// `-` reads stdin, like --stdin.
    #[arg(value_name = "-", hide = true)]
    dash: Option<String>,
    /// Wall-clock time to judge HTTP-dates against, RFC 3339 (default: now).
    #[arg(long, value_name = "RFC3339")]
    now: Option<String>,
    /// Seed for the jitter of an unparseable Retry-After (default 0: reproducible output).
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed: u64,
    /// Rate-limit header dialect: auto, ietf, x-ratelimit, azure, shopify, discord, github.
    #[arg(long, value_name = "NAME", default_value = "auto", value_parser = parse_dialect)]
    dialect: Dialect,
    /// The response body (its first 4 KiB are used, as the outbox keeps them).
    #[arg(long, value_name = "TEXT")]
    body: Option<String>,
    /// A providers file: classify as its provider --provider would (its status overrides,
    /// body and header rules, dialect, Retry-After clamp).
    #[arg(long, value_name = "FILE", requires = "provider")]
    config: Option<std::path::PathBuf>,
    /// The provider of --config whose rules apply.
    #[arg(long, value_name = "NAME", requires = "config")]
    provider: Option<String>,
}

/// The rules the response is judged by: a provider's from `--config` (with `--dialect`,
/// when named, replacing its dialect), or the defaults with `--dialect`.
fn session_config(args: &Args, dialect: Dialect) -> anyhow::Result<SessionConfig> {
    let (Some(path), Some(name)) = (&args.config, &args.provider) else {
        return Ok(SessionConfig {
            rate_limit_dialect: dialect,
            ..SessionConfig::default()
        });
    };
    let config =
        abide_outbox::Config::load(path).with_context(|| format!("--config {}", path.display()))?;
    let Some(p) = config.provider(name) else {
        let names: Vec<_> = config.providers.iter().map(|p| p.name.as_str()).collect();
        bail!(
            "--provider {}: no such provider in {} (it has {})",
            abide_core::echo::clip(name),
            path.display(),
            names.join(", ")
        );
    };
    let mut cfg = p.session_config();
    if dialect != Dialect::Auto {
        cfg.rate_limit_dialect = dialect;
    }
    Ok(cfg)
}

/// The JSON printed on stdout. Field order is part of the contract.
#[derive(Debug, Serialize)]
struct Report {
    verdict: &'static str,
    reason: String,
    delay_secs: Option<f64>,
    delay_reason: Option<&'static str>,
    pause_secs: Option<f64>,
    retry_after_raw: Option<String>,
    retry_after_secs: Option<f64>,
    retry_after_saturated: bool,
    rate_limit: Option<RateLimitReport>,
    warnings: Vec<Warning>,
    now: String,
    status: Option<u16>,
    smpp_command_status: Option<u32>,
    dialect: Dialect,
    dialect_detected: bool,
    rate_limit_warnings: Vec<Malformed>,
}

#[derive(Debug, Serialize)]
struct RateLimitReport {
    #[serde(flatten)]
    info: RateLimitInfo,
    exhausted: bool,
    advertised_rate_per_sec: Option<f64>,
    used: Option<u64>,
    scope: Option<String>,
    leaky_bucket: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let from_stdin = args.stdin || args.dash.is_some();
    if let Some(other) = args.dash.as_deref().filter(|d| *d != "-") {
        bail!("unexpected argument {other:?} (only `-` is accepted, meaning stdin)");
    }
    let now = match &args.now {
        Some(s) => parse_now(s)?,
        None => SystemClock.now(),
    };
    let dialect = args.dialect;
    let rules = session_config(&args, dialect)?;

    let mut headers = HeaderMap::new();
    let mut status_line = None;
    let mut body: Vec<u8> = Vec::new();
    if from_stdin {
        // Only the header block matters: read no more than its limit (a body after it, or
        // an endless stream, is never read into memory).
        let mut input = Vec::new();
        std::io::stdin()
            .take(MAX_BLOCK_BYTES as u64 + 1)
            .read_to_end(&mut input)
            .context("reading stdin")?;
        let (status, body_at) = parse_block(&input, &mut headers)?;
        status_line = status;
        if let Some(at) = body_at {
            let rest = &input[at..];
            body = rest[..rest.len().min(MAX_CLASSIFY_BODY)].to_vec();
        }
    }
    if let Some(b) = &args.body {
        let b = b.as_bytes();
        body = b[..b.len().min(MAX_CLASSIFY_BODY)].to_vec();
    }
    for (i, h) in args.headers.iter().enumerate() {
        let (name, value) = parse_header_line(h.as_bytes())
            .with_context(|| format!("--header #{} {}", i + 1, shown(h.as_bytes())))?;
        append(&mut headers, name, value)?;
    }

    let report = if let Some(code) = &args.smpp {
        let code = parse_smpp(code)?;
        if !headers.is_empty() {
            bail!("--smpp takes no headers: SMPP responses carry none");
        }
        build(
            &Observation::Smpp {
                command_status: code,
            },
            &headers,
            now,
            args.seed,
            rules.clone(),
        )
    } else {
        let status = match args.status.or(status_line) {
            Some(s) => s,
            None => bail!("missing --status (or a status line on stdin, or --smpp)"),
        };
        let code = StatusCode::from_u16(status)
            .ok()
            .filter(|_| (100..=599).contains(&status))
            .with_context(|| format!("--status {status}: not an HTTP status (100-599)"))?;
        build(
            &Observation::Http {
                status: code,
                headers: &headers,
                body: &body,
            },
            &headers,
            now,
            args.seed,
            rules.clone(),
        )
    }?;
    let json = serde_json::to_string_pretty(&report).context("serialising the report")?;
    crate::cmd::out(&format!("{json}\n"))?;
    Ok(ExitCode::SUCCESS)
}

fn build(
    obs: &Observation<'_>,
    headers: &HeaderMap,
    now: SystemTime,
    seed: u64,
    rules: SessionConfig,
) -> anyhow::Result<Report> {
    // The session the provider gets: its classifier and pacer decide here as they do in
    // the outbox.
    let dialect = rules.rate_limit_dialect;
    let mono = ManualClock::new(now).monotonic();
    let session = Session::new(rules, mono);
    let classifier = session.classifier();
    let reading = ratelimit::read(headers, now, dialect);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let verdict = classifier.classify(obs, now, &mut rng);

    // What the server said, independent of whether the verdict uses it (a terminal 404
    // with Retry-After still shows the raw value). The RNG only jitters the delay, which
    // is not read here.
    let said = classifier.server_delay(headers, now, &mut ChaCha8Rng::seed_from_u64(seed));

    let delay = match verdict.class {
        class if !class.waits() => None,
        _ => Some(verdict.retry_after.clone().unwrap_or_else(|| {
            let rules = session.config();
            rules.retry_after.from_backoff(rules.retry.backoff.base)
        })),
    };
    // The host-wide pause, by the pacer's own rules (as the outbox applies them), so that
    // a 429 with only `RateLimit: r=0;t=30` does not look like a 1 s wait.
    let pacer = session.pacer();
    pacer.on_verdict(mono, &verdict);
    let pause = pacer.paused_until(mono).map(|until| until - mono);
    let (status, smpp_command_status) = match *obs {
        Observation::Http { status, .. } => (Some(status.as_u16()), None),
        Observation::Smpp { command_status } => (None, Some(command_status)),
        Observation::Transport(_) => (None, None),
    };
    Ok(Report {
        verdict: verdict.class.as_str(),
        reason: verdict.reason,
        delay_secs: delay.as_ref().map(|d| d.delay.as_secs_f64()),
        delay_reason: delay.as_ref().map(|d| d.reason.as_str()),
        pause_secs: pause.map(|p| p.as_secs_f64()),
        retry_after_raw: said.as_ref().and_then(|d| d.raw.clone()),
        retry_after_secs: said
            .as_ref()
            .and_then(|d| d.retry_after)
            .map(|d| d.as_secs_f64()),
        retry_after_saturated: said
            .as_ref()
            .and_then(|d| d.retry_after)
            .is_some_and(|d| d.as_secs() == u64::MAX),
        rate_limit: verdict.rate_limit.map(|info| RateLimitReport {
            exhausted: info.exhausted(),
            advertised_rate_per_sec: info.advertised_rate(),
            info,
            used: reading.used,
            scope: reading.scope.clone(),
            leaky_bucket: reading.leaky_bucket,
        }),
        warnings: parse_warnings(headers),
        now: format_now(now)?,
        status,
        smpp_command_status,
        dialect: reading.reader.map_or(Dialect::Auto, Dialect::from),
        dialect_detected: reading.detected,
        rate_limit_warnings: reading.malformed,
    })
}

fn parse_now(s: &str) -> anyhow::Result<SystemTime> {
    // One message: time's parse error repeats its cause in its own text, so chaining it
    // with context printed the cause twice.
    let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|e| {
        anyhow::anyhow!("--now {s:?}: not an RFC 3339 time (e.g. 2026-06-15T08:00:00Z): {e}")
    })?;
    Ok(t.into())
}

fn format_now(now: SystemTime) -> anyhow::Result<String> {
    OffsetDateTime::from(now)
        .format(&Rfc3339)
        .context("formatting the clock as RFC 3339")
}

/// `--dialect`: a name as `rate_limit_dialect` in the providers file takes it.
fn parse_dialect(s: &str) -> Result<Dialect, String> {
    s.parse::<Dialect>().map_err(|e| e.to_string())
}

fn parse_smpp(s: &str) -> anyhow::Result<u32> {
    abide_core::classify::smpp::parse_command_status(s)
        .with_context(|| format!("--smpp {s:?}: not a command_status (e.g. 0x58 or 88)"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn smpp_codes() {
        assert_eq!(parse_smpp("0x58").unwrap(), 0x58);
        assert_eq!(parse_smpp("88").unwrap(), 88);
        assert!(parse_smpp("throttled").is_err());
    }
}
