//! What `send`, `serve` and `demo` share: opening the outbox for sending, log set-up,
//! and a drained run of the dispatcher ([`abide_outbox::Dispatcher::run_drained`], whose
//! rules are the outbox's) with live progress and Ctrl-C.
//!
//! Stopping is graceful: the first Ctrl-C (or SIGTERM) stops claiming, hands unsent
//! claimed items back as `PENDING`, waits for requests already on the wire and records
//! their results. A second Ctrl-C exits at once (exit 130); the items it leaves
//! `IN_FLIGHT` are reclaimed by the next `send` on the same database.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use abide_outbox::{AnyStore, Counts, Dispatcher, Progress, Store};
pub(crate) use abide_outbox::{Ending, Feed};

use crate::db;
use crate::report::progress::Display;

/// How a run's [`Ending`] is said: its name in the report and the documented exit code.
pub(crate) trait Said {
    /// `drained`, `interrupted`, `provider_suspended` or `input_failed`, as the report
    /// says it.
    fn outcome(self) -> &'static str;

    /// The documented exit code: 130 interrupted; 4 a provider suspended; 2 the input
    /// failed; 1 drained with items `FAILED` or `DEFERRED` in `counts`; 0 otherwise.
    fn exit_code(self, counts: &Counts) -> ExitCode;
}

impl Said for Ending {
    fn outcome(self) -> &'static str {
        match self {
            Ending::Drained => "drained",
            Ending::Suspended => "provider_suspended",
            Ending::InputFailed => "input_failed",
            Ending::Unreachable => "provider_unreachable",
            _ => "interrupted",
        }
    }

    fn exit_code(self, counts: &Counts) -> ExitCode {
        match self {
            Ending::Suspended => ExitCode::from(4),
            Ending::Unreachable => ExitCode::from(5),
            Ending::InputFailed => ExitCode::from(2),
            Ending::Drained if counts.failed + counts.deferred > 0 => ExitCode::from(1),
            Ending::Drained => ExitCode::SUCCESS,
            _ => ExitCode::from(130),
        }
    }
}

/// An outbox opened for sending: the store, and for SQLite the sender lock (held until
/// this is dropped).
#[derive(Debug)]
pub(crate) struct Outbox {
    pub(crate) store: AnyStore,
    /// Items a dead run left `IN_FLIGHT`, moved back to `PENDING` at open.
    pub(crate) reclaimed: u64,
    _lock: Option<abide_outbox::SenderLock>,
}

impl Outbox {
    /// Take the sender lock (SQLite), open or create the database, and reclaim what a
    /// dead sender left `IN_FLIGHT` (see [`db::open_for_sending`]).
    ///
    /// # Errors
    /// Another sender holds the lock; the database cannot be opened.
    pub(crate) async fn open(db: &str, now: SystemTime) -> anyhow::Result<Self> {
        let opened = db::open_for_sending(db, now).await?;
        Ok(Self {
            store: opened.store,
            reclaimed: opened.reclaimed,
            _lock: opened.lock,
        })
    }

    /// Checkpoint and close the database, then release the sender lock, so the `.db` file
    /// alone holds everything (no `-wal` left behind by a clean exit).
    ///
    /// # Errors
    /// The checkpoint or close failed.
    pub(crate) async fn close(self, db: &str) -> anyhow::Result<()> {
        db::close(&self.store, db).await
    }
}

/// Ctrl-C (SIGINT) and SIGTERM, caught from the moment [`Interrupt::listen`] is called:
/// a signal that comes while the input is read or enqueued is not the default "die at
/// once" but is kept, and the run stops cleanly as soon as it can.
#[derive(Debug, Clone)]
pub(crate) struct Interrupt {
    /// Signals received so far.
    count: tokio::sync::watch::Receiver<u32>,
}

impl Interrupt {
    /// Install the handlers now (before this returns) and count signals in a task.
    /// Needs a tokio runtime context.
    ///
    /// # Errors
    /// A handler could not be installed.
    pub(crate) fn listen() -> std::io::Result<Self> {
        let (tx, count) = tokio::sync::watch::channel(0u32);
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut int = signal(SignalKind::interrupt())?;
            let mut term = signal(SignalKind::terminate())?;
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        Some(()) = int.recv() => {}
                        Some(()) = term.recv() => {}
                        else => return,
                    }
                    tx.send_modify(|n| *n = n.saturating_add(1));
                }
            });
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                tx.send_modify(|n| *n = n.saturating_add(1));
            }
        });
        Ok(Self { count })
    }

    /// Whether a signal came.
    pub(crate) fn raised(&self) -> bool {
        *self.count.borrow() > 0
    }

    /// Resolves once `n` signals in all have come.
    pub(crate) async fn nth(&self, n: u32) {
        let mut rx = self.count.clone();
        if rx.wait_for(|c| *c >= n).await.is_err() {
            // The listener is gone: no signal will come.
            std::future::pending::<()>().await;
        }
    }
}

/// Run `d` until drained (with `feed` complete) or interrupted, showing progress on
/// `display`, by the outbox's rules of a drained run ([`Dispatcher::run_drained`]: then,
/// for up to `receipt_wait`, the delivery receipts of what was accepted; a suspended
/// provider or a broken `feed` ends it early). The first Ctrl-C stops it cleanly, a
/// second exits at once.
///
/// # Errors
/// Database errors from the final snapshot.
pub(crate) async fn deliver<S: Store>(
    d: &Dispatcher<S>,
    display: Display,
    receipt_wait: Duration,
    interrupt: &Interrupt,
    feed: Feed,
) -> anyhow::Result<(Progress, Ending)> {
    if interrupt.raised() {
        // Stopped before delivery began (while the input was read or enqueued): nothing
        // is claimed or sent; what was enqueued waits for the next run.
        eprintln!("abide: interrupted before delivery began; run again to deliver");
        let p = d.progress().await?;
        display.finish(&p);
        return Ok((p, Ending::Stopped));
    }
    let display = Arc::new(display);
    let ticker = display.period().map(|period| {
        let d = d.clone();
        let display = Arc::clone(&display);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                if let Ok(p) = d.progress().await {
                    display.update(&p);
                }
            }
        })
    });
    let stop = {
        let interrupt = interrupt.clone();
        async move {
            interrupt.nth(1).await;
            eprintln!(
                "abide: stopping: no new claims, finishing requests on the wire \
                 (Ctrl-C again to exit now; unfinished items resume on the next run)"
            );
            tokio::spawn(async move {
                interrupt.nth(2).await;
                eprintln!("abide: exiting now; in-flight items are reclaimed on the next run");
                std::process::exit(130);
            });
        }
    };
    let result = d.run_drained(feed, receipt_wait, stop).await;
    if let Some(t) = ticker {
        t.abort();
    }
    let (p, ending) = result?;
    display.finish(&p);
    Ok((p, ending))
}
