//! `abide send`: enqueue JSON lines into the durable outbox and deliver until drained.

use abide_outbox::Store as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Config, Dispatcher, DispatcherOptions, NewItem};
use anyhow::Context;

use crate::args::{self, DbArgs, RedisArgs};
use crate::deliver::{deliver, Ending, Feed, Interrupt, Outbox, Said as _};
use crate::input;
use crate::input::stream as input_stream;
use crate::report::progress::{Display, Mode};
use crate::report::{RunReport, Snapshot};
use crate::{db, providers};

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
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = args::parse_lease)]
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
    #[arg(long, default_value = "0s", value_name = "DURATION", value_parser = parse_wait)]
    pub(crate) receipt_wait: Duration,
    /// Stop (exit 5) when a provider has not answered once this long after its first
    /// failed attempt (a wrong base_url, a host that is down), naming its URL and the
    /// error; its items wait for the next run. A provider that answered earlier in the run
    /// and then went down is waited for as any outage. `0s` waits for ever (up to each
    /// item's max_age_secs). A number with a unit, at most 1h.
    #[arg(long, default_value = "2m", value_name = "DURATION", value_parser = parse_wait)]
    pub(crate) unreachable_after: Duration,
    #[command(flatten)]
    pub(crate) logs: crate::logs::LogArgs,
}

/// `--receipt-wait`: a duration up to 1 h.
fn parse_wait(s: &str) -> Result<Duration, String> {
    let d = args::parse_duration(s)?;
    if d > Duration::from_secs(3600) {
        return Err("must be at most 1h".into());
    }
    Ok(d)
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Ctrl-C and SIGTERM are caught from here on: one that comes while the input is read
    // or enqueued stops the run cleanly after the enqueue (exit 130), never half-way.
    let rt = tokio::runtime::Runtime::new()?;
    let interrupt = {
        let _in_runtime = rt.enter();
        Interrupt::listen().context("installing the Ctrl-C/SIGTERM handler")?
    };
    let cfg = providers::load_config(&args.config, args.workers, args.lease)?;
    // Check the whole input before touching the database: a bad line enqueues nothing.
    // Streamed: memory does not grow with the input (see `input_stream`).
    let checked = match &args.input {
        None => None,
        Some(src) => {
            let progress = !args.quiet && args.progress != Mode::None;
            match input_stream::check(src, &input::configured(&cfg), progress)? {
                Ok(checked) => Some(checked),
                Err(e) => {
                    eprint!("abide: {src}: {e}");
                    return Ok(ExitCode::from(2));
                }
            }
        }
    };
    args.logs.init("warn");
    rt.block_on(send(args, cfg, checked, interrupt))
}

async fn send(
    args: Args,
    cfg: Config,
    checked: Option<input_stream::Checked>,
    interrupt: Interrupt,
) -> anyhow::Result<ExitCode> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // No input: deliver what the outbox holds. A mistyped --db would otherwise create an
    // empty file and report "drained" (exit 0) while the real outbox still waits.
    if checked.is_none() {
        db::require_existing(
            &args.db.url,
            "without an input file `abide send` only delivers what an existing outbox holds",
        )?;
    }
    args.redis.check(&args.config, &cfg).await?;
    let outbox = Outbox::open(&args.db.url, clock.now()).await?;
    if outbox.reclaimed > 0 {
        eprintln!(
            "abide: {} item(s) were IN_FLIGHT in a run that died; retrying them with their idempotency keys",
            outbox.reclaimed
        );
    }
    let opts = DispatcherOptions {
        lease: args.lease,
        seed: args.seed,
        unreachable_after: Some(args.unreachable_after).filter(|d| !d.is_zero()),
        redis_url: args.redis.url(&cfg),
        coordination_prefix: args.redis.coordination_prefix(&cfg),
        ..DispatcherOptions::default()
    };
    let mode = if args.quiet {
        Mode::None
    } else {
        args.progress
    };
    let check_cfg = cfg.clone();
    let check = input::configured(&check_cfg);
    let d = Dispatcher::new(outbox.store.clone(), cfg, Arc::clone(&clock), opts)?;
    if let Some(checked) = &checked {
        // Every explicit key against the outbox first: a key it holds for another
        // message stops the run before any chunk is committed.
        let store = &outbox.store;
        let probe = |chunk: Vec<NewItem>| async move { Ok(store.check_keys(&chunk).await?) };
        input_stream::probe_keys(checked, &check, probe).await?;
    }
    let display = Display::new(mode);
    // The enqueue's own progress lines go between plain progress lines; a bar shows the
    // outbox growing instead.
    let ticker = display.plain();
    // Delivery starts with the first committed chunk, not after the last one: the rest
    // of the input is enqueued meanwhile (a million lines take minutes to enqueue), and
    // the run is drained only once it is all in. Enqueueing wakes the claimers.
    let (feed_closer, feed) = Feed::open();
    let enqueueing = async {
        let done = match checked {
            None => Ok(None),
            Some(checked) => {
                let d = &d;
                let sink = |chunk: Vec<NewItem>| async move { Ok(d.enqueue(&chunk).await?) };
                input_stream::enqueue(checked, &check, ticker, sink)
                    .await
                    .map(Some)
            }
        };
        match &done {
            Ok(_) => feed_closer.complete(),
            Err(_) => feed_closer.broken(),
        }
        done
    };
    let delivering = deliver(&d, display, args.receipt_wait, &interrupt, feed);
    let (input, delivered) = tokio::join!(enqueueing, delivering);
    let input = match input {
        Ok(input) => input,
        Err(e) => {
            // Delivery stopped as after a Ctrl-C: what was enqueued is recorded and stays.
            d.close().await;
            drop(d);
            // The enqueue's error (what went in) is the one to report; a database that
            // also fails to close (the same full disk) is said beside it.
            if let Err(c) = outbox.close(&args.db.url).await {
                eprintln!("abide: warning: closing the outbox database: {c:#}");
            }
            return Err(e);
        }
    };
    let (p, ending) = match delivered {
        Ok(done) => done,
        Err(e) => match e.downcast_ref::<abide_outbox::Error>() {
            // Documented exit code: the run stopped itself rather than send what it could
            // not record; the next run resends the unrecorded items with their keys.
            Some(abide_outbox::Error::ResultsNotRecorded { interrupted, .. }) => {
                eprintln!("abide: error: {e}");
                let t = d.totals();
                eprintln!(
                    "abide: this run: {} delivered and recorded, {} attempts; items whose \
                     results were not recorded are resent with their idempotency keys by the \
                     next run",
                    t.delivered, t.attempts
                );
                // Asked to stop: the documented exit code of an interrupted run.
                let code = if *interrupted { 130 } else { 3 };
                return Ok(ExitCode::from(code));
            }
            _ => return Err(e),
        },
    };
    let snap = Snapshot::load(&outbox.store, clock.now()).await?;
    let report = RunReport::new(&p, ending.outcome(), input, snap);
    // A reader that went away (`| head`) does not change the exit code nor skip the
    // clean close below; any other write error is reported after it.
    let printed = if args.json {
        crate::cmd::out(&format!("{}\n", serde_json::to_string_pretty(&report)?))
    } else {
        crate::cmd::out(&report.render_text(&args.db.url))
    };
    for (name, why) in d.suspended() {
        eprintln!("abide: error: provider {name:?} suspended: {why}");
    }
    if ending == Ending::Unreachable {
        for (name, why) in d.unreachable() {
            eprintln!(
                "abide: error: provider {name:?}: {why}; check its base_url (or address) in \
                 {}, or give --unreachable-after more time; its items wait for the next run",
                args.config.display()
            );
        }
    }
    // Drained means: nothing left for the providers this config names. Items of a
    // provider it does not name (renamed, or the wrong providers file) would wait for
    // ever without a word, and the run exit 0.
    let orphans = match ending {
        Ending::Drained => unconfigured_waiting(&d, &report.outbox.counts).await,
        _ => 0,
    };
    if orphans > 0 {
        eprintln!(
            "abide: warning: {orphans} item(s) in {} wait for a provider that {} does not \
             name; this run did not send them (`abide status --db {}` counts them, and a \
             providers file naming their provider sends them)",
            args.db.url,
            args.config.display(),
            args.db.url
        );
    }
    // SMPP binds unbind; HTTP has nothing to say.
    d.close().await;
    drop(d);
    outbox.close(&args.db.url).await?;
    match printed {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("writing the report to stdout"))
        }
        _ if orphans > 0 => Ok(ExitCode::from(1)),
        _ => Ok(ending.exit_code(&report.outbox.counts)),
    }
}

/// Items `QUEUED`, `IN_FLIGHT` or `PENDING` in the whole outbox (`all`) beyond those of the
/// providers `d` is configured for. A database error reads as none.
async fn unconfigured_waiting<S: abide_outbox::Store>(
    d: &Dispatcher<S>,
    all: &abide_outbox::Counts,
) -> u64 {
    let active = |c: &abide_outbox::Counts| c.queued + c.in_flight + c.pending;
    let mut configured = 0;
    for p in &d.config().providers {
        match d.store().counts_by_state(Some(&p.name)).await {
            Ok(c) => configured += active(&c),
            Err(_) => return 0,
        }
    }
    active(all).saturating_sub(configured)
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
