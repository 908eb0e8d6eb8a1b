//! What `send`, `serve` and `demo` share: opening the outbox for sending, log set-up,
//! and the delivery loop that runs the dispatcher until every item of a configured
//! provider is finished (or a signal asks to stop), with live progress.
//!
//! Stopping is graceful: the first Ctrl-C (or SIGTERM) stops claiming, hands unsent
//! claimed items back as `PENDING`, waits for requests already on the wire and records
//! their results. A second Ctrl-C exits at once (exit 130); the items it leaves
//! `IN_FLIGHT` are reclaimed by the next `send` on the same database.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use abide_outbox::{AnyStore, Counts, Dispatcher, Progress, Store};

use super::db;
use super::progress::Display;

/// How often the drain check looks at this run's own counters: the run ends this soon
/// after its last answer is recorded (it was 250 ms, an eighth of a second of every run on
/// average).
const DRAIN_POLL: Duration = Duration::from_millis(20);
/// How often it asks the store while this run holds nothing in flight but the outbox is
/// not drained (retries waiting for their time, another sender's items).
const DRAIN_CHECK: Duration = Duration::from_millis(250);

/// Where the run's input stands. `send` delivers while it is still enqueueing (the first
/// chunk goes out while the rest is written), so the run is drained only once the input
/// is all in, and stops if enqueueing fails.
#[derive(Debug, Clone)]
pub(crate) struct Feed(tokio::sync::watch::Receiver<FeedState>);

/// See [`Feed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FeedState {
    /// Items are still being enqueued.
    Open,
    /// Every item is in (or there was no input).
    Complete,
    /// Enqueueing failed; the caller says why.
    Broken,
}

impl Feed {
    /// Nothing more will be enqueued by this run.
    pub(crate) fn complete() -> Self {
        Self(tokio::sync::watch::channel(FeedState::Complete).1)
    }

    /// A feed still open, and the sender that closes it.
    pub(crate) fn open() -> (tokio::sync::watch::Sender<FeedState>, Self) {
        let (tx, rx) = tokio::sync::watch::channel(FeedState::Open);
        (tx, Self(rx))
    }

    fn state(&self) -> FeedState {
        *self.0.borrow()
    }
}

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Nothing of a configured provider is `QUEUED`, `IN_FLIGHT` or `PENDING`.
    Drained,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// A provider will not send again this run (an SMPP bind refused for good); its
    /// items wait for the next run.
    Suspended,
    /// Enqueueing the input failed ([`FeedState::Broken`]): delivery stopped as after a
    /// Ctrl-C, and the caller reports the error.
    InputFailed,
}

impl Ending {
    /// `drained` or `interrupted`, as the report says it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Ending::Drained => "drained",
            Ending::Interrupted => "interrupted",
            Ending::Suspended => "provider_suspended",
            Ending::InputFailed => "input_failed",
        }
    }

    /// The documented exit code: 130 interrupted; 4 a provider suspended; 2 the input
    /// failed; 1 drained with items `FAILED` or `DEFERRED` in `counts`; 0 otherwise.
    pub(crate) fn exit_code(self, counts: &Counts) -> ExitCode {
        match self {
            Ending::Interrupted => ExitCode::from(130),
            Ending::Suspended => ExitCode::from(4),
            Ending::InputFailed => ExitCode::from(2),
            Ending::Drained if counts.failed + counts.deferred > 0 => ExitCode::from(1),
            Ending::Drained => ExitCode::SUCCESS,
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

/// Logs on stderr, filtered by `RUST_LOG` or else `default` (e.g. `"warn"`); colour only
/// on a terminal, so a log file or a pipe gets no ANSI escape codes.
pub(crate) fn init_logs(default: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
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

/// Nothing of a configured provider is active. An index probe per provider, not a count
/// of the whole queue: this runs up to four times a second. A database error reads as
/// "not yet".
async fn drained<S: Store>(d: &Dispatcher<S>) -> bool {
    for p in &d.config().providers {
        if !matches!(d.store().has_active(&p.name).await, Ok(false)) {
            return false;
        }
    }
    true
}

/// Every SMPP provider has as many items with a receipt as `SUBMITTED` items (true
/// without SMPP providers). A database error reads as "not yet".
async fn receipts_in<S: Store>(d: &Dispatcher<S>) -> bool {
    for p in d
        .config()
        .providers
        .iter()
        .filter(|p| matches!(p.transport, abide_outbox::TransportConfig::Smpp(_)))
    {
        let (Ok(c), Ok(r)) = (
            d.store().counts_by_state(Some(&p.name)).await,
            d.store().receipt_counts(Some(&p.name)).await,
        ) else {
            return false;
        };
        if r.matched() < c.submitted {
            return false;
        }
    }
    true
}

/// Run `d` until drained (with `feed` complete) or interrupted, showing progress on
/// `display`; then, for up to `receipt_wait`, until every SMPP provider's `SUBMITTED`
/// items have their delivery receipts (the bind stays up and receipts are stored
/// meanwhile). A broken `feed` stops the run as a Ctrl-C does.
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
        return Ok((p, Ending::Interrupted));
    }
    let interrupted = Arc::new(AtomicBool::new(false));
    let suspended = Arc::new(AtomicBool::new(false));
    let broken = Arc::new(AtomicBool::new(false));
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
        let d = d.clone();
        let interrupted = Arc::clone(&interrupted);
        let suspended = Arc::clone(&suspended);
        let broken = Arc::clone(&broken);
        let interrupt = interrupt.clone();
        async move {
            let drain = async {
                let mut wait = DRAIN_POLL;
                loop {
                    tokio::time::sleep(wait).await;
                    // A provider that cannot send this run would keep its items (and
                    // the run) waiting for ever: stop, they wait for the next run.
                    if !d.suspended().is_empty() {
                        suspended.store(true, Ordering::SeqCst);
                        return;
                    }
                    match feed.state() {
                        FeedState::Open => continue,
                        FeedState::Broken => {
                            broken.store(true, Ordering::SeqCst);
                            return;
                        }
                        FeedState::Complete => {}
                    }
                    // While this run holds items it is not drained: only its own counters
                    // are read then, and the store is asked once it holds none.
                    if d.totals().in_flight > 0 {
                        wait = DRAIN_POLL;
                        continue;
                    }
                    if drained(&d).await {
                        break;
                    }
                    wait = DRAIN_CHECK;
                }
                let waited = tokio::time::timeout(receipt_wait, async {
                    while !receipts_in(&d).await {
                        tokio::time::sleep(DRAIN_CHECK).await;
                    }
                });
                let _ = waited.await;
            };
            tokio::select! {
                () = drain => {}
                () = interrupt.nth(1) => {
                    interrupted.store(true, Ordering::SeqCst);
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
            }
        }
    };
    let result = d.run_until(stop).await;
    if let Some(t) = ticker {
        t.abort();
    }
    let p = result?;
    display.finish(&p);
    let ending = if broken.load(Ordering::SeqCst) {
        Ending::InputFailed
    } else if interrupted.load(Ordering::SeqCst) {
        Ending::Interrupted
    } else if suspended.load(Ordering::SeqCst) {
        Ending::Suspended
    } else {
        Ending::Drained
    };
    Ok((p, ending))
}
