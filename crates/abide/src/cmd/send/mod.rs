//! `abide send`: enqueue JSON lines into the durable outbox and deliver until drained.

mod flags;
pub(crate) use self::flags::Args;

use abide_outbox::Store as _;
use std::process::ExitCode;
use std::sync::Arc;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Config, Dispatcher, DispatcherOptions, NewItem};
use anyhow::Context;

use crate::deliver::{deliver, Ending, Feed, Interrupt, Outbox, Said as _};
use crate::input;
use crate::input::stream as input_stream;
use crate::report::progress::{Display, Mode};
use crate::report::{RunReport, Snapshot};
use crate::{db, providers};

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
