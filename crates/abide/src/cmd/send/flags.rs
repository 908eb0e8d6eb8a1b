//! The flags of `abide send` and its long help.

use std::path::PathBuf;
use std::time::Duration;

use crate::args::{DbArgs, RedisArgs};
use crate::input;
use crate::report::progress::Mode;

const LONG_ABOUT: &str = "\
Enqueue JSON lines into the durable outbox (an SQLite file by default) and deliver them to the
configured providers as fast as each allows and no faster, until nothing is left to do.

Each provider gets N concurrent senders (`concurrency` in the config, or --workers) that share
one pacer and one retry budget: a throttle pauses the whole provider until its Retry-After
(any RFC 9110 form, floored and capped) and slows the pace. A throttled item is never failed;
it waits PENDING and goes again with the same idempotency key.

EXAMPLES
  abide provider &                                          # a fake provider on :8080
  ABIDE_SMS_TOKEN=demo-key abide send --config examples/providers.toml examples/messages.jsonl
  generate-messages | abide send --config providers.toml --db /var/lib/abide/outbox.db -
  abide send --config providers.toml --json in.jsonl | jq .run
  abide send --config providers.toml            # no input: deliver what the outbox holds
                                                # (after Ctrl-C, a crash, or `abide requeue`)

RESUMING
  Interrupted and run again with the same --db and input, `send` resumes: every line's
  idempotency key is stable (given or derived from its content), so lines already in the
  outbox are not enqueued again and SUBMITTED items are never re-sent. Ctrl-C (or SIGTERM)
  stops claiming, waits for requests on the wire and records them; a second Ctrl-C exits at
  once. After kill -9, the next run reclaims the dead run's IN_FLIGHT items at start (it holds
  the lock file <db>.lock, so no other sender can own them) and retries them with the same
  idempotency key: the provider sees a duplicate, never a second message. With a Postgres
  --db no lock is taken and dead leases are reclaimed when --lease runs out.

REPORT
  stdout gets the final report (--json for JSON): delivered, attempts, throttled, retries,
  terminal failures, deferred, 429s per logical request, achieved rate, per-provider pace and
  throttle rate, the whole outbox per state, and every attempt counted by what the remote side
  said (http_202, http_429, smpp_0x58, no_response, ...). Progress goes to stderr: a live bar
  on a terminal, a line every 2 s otherwise: done, on the wire (sent, not yet answered),
  waiting, deferred, failed (these add up to every item), pace, achieved rate, throttled %.

EXIT CODES
  0    drained; no FAILED or DEFERRED item in the outbox
  1    drained, but some items are FAILED (terminal) or DEFERRED (see `abide requeue`),
       or wait for a provider the providers file does not name (a warning names the count)
  2    usage, config or input error, or an unset credentials_env variable (nothing
       enqueued); or the database is locked by another sender
  3    results could not be written to the database for 60 s (disk full, read-only,
       server down): sending stopped as soon as writes failed; run again when the
       database is fixed (unrecorded items are resent with their idempotency keys)
  4    a provider refused its credential for good: an SMPP bind refused (ESME_RINVPASWD,
       ESME_RINVSYSID, ESME_RINVSYSTYP, or ESME_RBINDFAIL three times), or an HTTP key
       refused again right after a fresh read before anything was accepted; the error
       names the setting to fix; its items wait QUEUED/PENDING for the next run
  5    a provider has not answered once in --unreachable-after (default 2m): the error
       names its URL and what the connection said; its items wait for the next run
  130  interrupted (Ctrl-C, SIGTERM); run again to resume";

/// Arguments of `abide send`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = format!("{LONG_ABOUT}\n\n{}", input::FORMAT_HELP))]
pub(crate) struct Args {
    /// Providers file (TOML); see docs/providers-file.md and examples/providers.toml.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,
    #[command(flatten)]
    pub(crate) db: DbArgs,
    /// JSON-lines input file, or `-` for stdin (copied to a temporary file: it is read
    /// twice); checked whole, streamed: one bad line and nothing is enqueued (exit 2).
    /// Without it, only what the outbox already holds is delivered (a --db that does not
    /// exist is refused, exit 2).
    #[arg(value_name = "INPUT.jsonl|-")]
    pub(crate) input: Option<String>,
    /// Concurrent senders per HTTP provider (overrides `concurrency` in the config; an SMPP
    /// provider keeps its `window`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: Option<u16>,
    /// Lease on a claimed item: a sender that hangs longer loses it and the item is retried
    /// (same idempotency key). At least every provider's timeout_secs + 2 s. A number with
    /// a unit: e.g. 30s, 2m, 1m30s (a bare number is refused).
    #[arg(long, default_value = "30s", value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::args::parse_lease)]
    pub(crate) lease: Duration,
    /// Print the final report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// No progress on stderr (same as --progress none).
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Progress display on stderr.
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) progress: Mode,
    /// Seed for retry jitter (reproducible schedules); default: from the OS.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    #[command(flatten)]
    pub(crate) redis: RedisArgs,
    /// After draining, keep SMPP binds up this long (at most) for the delivery receipts of
    /// SUBMITTED items, storing them as they come; a number with a unit, e.g. 10s, 2m.
    /// Receipts that come later are delivered by the SMSC at the next bind.
    #[arg(long, default_value = "0s", value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_wait)]
    pub(crate) receipt_wait: Duration,
    /// Stop (exit 5) when a provider has not answered once this long after its first
    /// failed attempt (a wrong base_url, a host that is down), naming its URL and the
    /// error; its items wait for the next run. A provider that answered earlier in the run
    /// and then went down is waited for as any outage. `0s` waits for ever (up to each
    /// item's max_age_secs). A number with a unit, at most 1h.
    #[arg(long, default_value = "2m", value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_wait)]
    pub(crate) unreachable_after: Duration,
    #[command(flatten)]
    pub(crate) logs: crate::logs::LogArgs,
}

/// `--receipt-wait`: a duration up to 1 h.
fn parse_wait(s: &str) -> Result<Duration, String> {
    let d = crate::args::parse_duration(s)?;
    if d > Duration::from_secs(3600) {
        return Err("must be at most 1h".into());
    }
    Ok(d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn receipt_wait_needs_a_unit_and_keeps_its_bound() {
        assert_eq!(parse_wait("0s"), Ok(Duration::ZERO));
        assert!(parse_wait("30").unwrap_err().contains("unit"));
        assert_eq!(parse_wait("2h").unwrap_err(), "must be at most 1h");
    }
}
