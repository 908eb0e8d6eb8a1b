//! The marker: before a request goes on the wire its sender has it marked as sent in the
//! store ([`Store::mark_sent`]); marks from all senders are written in batches, one
//! transaction each, like results.
//!
//! Why: an item's `attempts` counts the requests that went on the wire. The completer
//! records the attempts it saw answered; a lease that ends without a recorded answer (a
//! crash, a hang) is charged only what its holder marked. Without the mark a reclaim can
//! only guess: charging every reclaimed item gave 247 items 11 attempts and no request
//! after 12 restarts (issue 11); charging none would let a crash loop send past
//! `max_attempts`.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::Inner;
use crate::model::{Item, SendMark};
use crate::store::Store;

/// One sender's request to mark an item as sent, answered with whether it may send.
#[derive(Debug)]
pub(super) struct MarkRequest {
    mark: SendMark,
    reply: oneshot::Sender<bool>,
}

/// Where senders send their [`MarkRequest`]s.
pub(super) type Marks = mpsc::Sender<MarkRequest>;

/// Have `item` marked as sent under its lease; true when it may go on the wire now (the
/// mark is committed and the lease is still ours). False when the lease passed to another
/// worker, or the store refused writes until the run gave up: send nothing then.
pub(super) async fn mark_sent(marks: &Marks, item: &Item) -> bool {
    let (reply, answer) = oneshot::channel();
    let req = MarkRequest {
        mark: SendMark {
            id: item.id.clone(),
            lease_owner: item.lease_owner.clone().unwrap_or_default(),
        },
        reply,
    };
    if marks.send(req).await.is_err() {
        return false;
    }
    answer.await.unwrap_or(false)
}

/// Writes marks in batches until every sender has dropped its [`Marks`].
pub(super) async fn marker<S: Store>(inner: Arc<Inner<S>>, mut rx: mpsc::Receiver<MarkRequest>) {
    const MAX_BATCH: usize = 256;
    let mut batch: Vec<MarkRequest> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        let marks: Vec<SendMark> = batch.iter().map(|m| m.mark.clone()).collect();
        let results =
            super::health::persist(&inner, "marking requests as sent", marks.len(), || {
                inner.store.mark_sent(&marks)
            })
            .await;
        for (i, m) in batch.drain(..).enumerate() {
            let ok = results
                .as_ref()
                .is_some_and(|r| r.get(i).copied().unwrap_or(false));
            if !ok && results.is_some() {
                tracing::warn!(item = %m.mark.id, "lease lost before sending; not sent");
            }
            let _ = m.reply.send(ok);
        }
    }
}
