//! The writer: the one task that writes what the senders produce, the marks of requests
//! about to go ([`super::mark`]) and the results of requests answered, in batches, ONE
//! transaction per batch ([`Store::mark_and_complete`]), and counts what the store
//! accepted.
//!
//! Why one task for both: each commit costs about the same whatever it holds (on SQLite it
//! writes every page it dirtied to the write-ahead log, mostly the same index pages), and a
//! sender waits for its mark's commit before it sends. With the marks and the results in
//! separate transactions on the one writing connection, each waited for the other's
//! commit and each commit carried half as much. A sender's result never waits for a
//! commit: it is handed over and the sender goes on to its next item's mark.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::inner::{Done, Inner};
use super::mark::MarkRequest;
use crate::error::Result;
use crate::model::{Completion, SendMark};
use crate::progress::Stats;
use crate::state::State;
use crate::store::Store;

/// Most marks, and most results, in one transaction.
const MAX_BATCH: usize = 512;

/// Times the writer yields to the runtime between its first message and the rest of the
/// batch. Measured (scripted transport, 32 senders): none, 16 marks per transaction (the
/// senders answered by one commit queue their next marks just after the next one began);
/// one, 26; two, 32 (every sender); eight, no more than two (BENCHMARKS.md).
const YIELDS: usize = 2;

/// Writes marks and results in batches until every sender has dropped both channels.
pub(super) async fn writer<S: Store>(
    inner: Arc<Inner<S>>,
    mut marks_rx: mpsc::Receiver<MarkRequest>,
    mut done_rx: mpsc::Receiver<Done>,
) {
    let mut replies = Vec::with_capacity(MAX_BATCH);
    let mut marks: Vec<SendMark> = Vec::with_capacity(MAX_BATCH);
    let mut providers: Vec<usize> = Vec::with_capacity(MAX_BATCH);
    let mut completions: Vec<Completion> = Vec::with_capacity(MAX_BATCH);
    let (mut marks_open, mut done_open) = (true, true);
    while marks_open || done_open {
        // Wait for the first of either, then take whatever else is already there.
        tokio::select! {
            m = marks_rx.recv(), if marks_open => match m {
                Some(m) => push_mark(m, &mut marks, &mut replies),
                None => marks_open = false,
            },
            d = done_rx.recv(), if done_open => match d {
                Some((idx, c)) => {
                    providers.push(idx);
                    completions.push(c);
                }
                None => done_open = false,
            },
        }
        // Let the senders just answered run first: they queue their results and their
        // next marks within microseconds, and join this transaction instead of the next.
        for _ in 0..YIELDS {
            tokio::task::yield_now().await;
        }
        while marks.len() < MAX_BATCH {
            match marks_rx.try_recv() {
                Ok(m) => push_mark(m, &mut marks, &mut replies),
                Err(_) => break,
            }
        }
        while completions.len() < MAX_BATCH {
            match done_rx.try_recv() {
                Ok((idx, c)) => {
                    providers.push(idx);
                    completions.push(c);
                }
                Err(_) => break,
            }
        }
        if marks.is_empty() && completions.is_empty() {
            continue;
        }
        let what = match (marks.is_empty(), completions.is_empty()) {
            (false, true) => "marking requests as sent",
            (true, false) => "writing results",
            _ => "writing results and marking requests as sent",
        };
        let written = persist(&inner, what, marks.len() + completions.len(), || {
            inner
                .store
                .mark_and_complete(&marks, &completions, inner.clock.now())
        })
        .await;
        answer_marks(&marks, replies.drain(..), written.as_ref().map(|w| &w.0));
        count_results(
            &inner,
            &providers,
            &completions,
            written.as_ref().map(|w| &w.1),
        );
        marks.clear();
        providers.clear();
        completions.clear();
    }
}

fn push_mark(
    m: MarkRequest,
    marks: &mut Vec<SendMark>,
    replies: &mut Vec<tokio::sync::oneshot::Sender<bool>>,
) {
    let (mark, reply) = m.into_parts();
    marks.push(mark);
    replies.push(reply);
}

/// Tell each sender whether it may send: its mark committed and its lease still held.
fn answer_marks(
    marks: &[SendMark],
    replies: impl Iterator<Item = tokio::sync::oneshot::Sender<bool>>,
    marked: Option<&Vec<bool>>,
) {
    for (i, reply) in replies.enumerate() {
        let ok = marked.is_some_and(|r| r.get(i).copied().unwrap_or(false));
        if !ok && marked.is_some() {
            tracing::warn!(item = %marks[i].id, "lease lost before sending; not sent");
        }
        let _ = reply.send(ok);
    }
}

/// Count what the store accepted, per provider; every result leaves `in_flight`.
fn count_results<S: Store>(
    inner: &Inner<S>,
    providers: &[usize],
    completions: &[Completion],
    results: Option<&Vec<crate::error::Result<State>>>,
) {
    for (i, (idx, c)) in providers.iter().zip(completions).enumerate() {
        let rt = &inner.providers[*idx];
        rt.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        let Some(results) = results else { continue };
        match &results[i] {
            Ok(State::Submitted) => Stats::bump(&rt.stats.delivered),
            Ok(State::Failed) => Stats::bump(&rt.stats.terminal_failures),
            Ok(State::Deferred) => Stats::bump(&rt.stats.deferred),
            Ok(State::Pending) if !c.attempts.is_empty() => {
                Stats::bump(&rt.stats.retries_scheduled)
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(item = %c.id, error = %e, "result refused by the store"),
        }
    }
}

/// Run the write `op` (one transaction on `items` items), retrying with backoff (200 ms
/// doubling to 5 s) while the store fails; nothing new is claimed or sent meanwhile. After
/// `store_fault_limit` of failures it stops the run and returns `None`.
async fn persist<S: Store, T, F, Fut>(
    inner: &Inner<S>,
    what: &str,
    items: usize,
    mut op: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut wait = Duration::from_millis(200);
    loop {
        match op().await {
            Ok(r) => {
                if let Some(lasted) = inner.health.recovered(inner.clock.monotonic()) {
                    tracing::warn!(
                        after_ms = lasted.as_millis() as u64,
                        "the database accepts writes again; claiming and sending resume"
                    );
                }
                return Some(r);
            }
            Err(e) => {
                let (lasted, began) = inner.health.failed(inner.clock.monotonic(), &e.to_string());
                if began {
                    tracing::error!(error = %e, items, "{what} failed; no item is claimed or \
                        sent until the database accepts writes again");
                }
                if inner.health.gave_up().is_some() || lasted >= inner.opts.store_fault_limit {
                    // Leases end and their items are resent with the same keys.
                    tracing::error!(error = %e, items, seconds = lasted.as_secs(),
                        "{what}: giving up, stopping the run");
                    inner.health.give_up(lasted);
                    return None;
                }
                if inner.health.stopping() {
                    // Asked to stop: waiting for the database would hold the stop for up
                    // to the limit. Leases end and their items are resent with the same keys.
                    tracing::error!(error = %e, items, seconds = lasted.as_secs(),
                        "{what}: stopping as asked while the database refuses writes");
                    inner.health.give_up_on_stop(lasted);
                    return None;
                }
                let at = inner.clock.monotonic() + wait;
                wait = (wait * 2).min(Duration::from_secs(5));
                tokio::select! {
                    () = inner.sleeper.sleep_until(at) => {}
                    () = inner.health.stopped() => {}
                }
            }
        }
    }
}
