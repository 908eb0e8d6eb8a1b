//! Send marks: before a request goes on the wire its sender has it marked as sent in the
//! store ([`crate::Store::mark_sent`]); marks from all senders are written in batches by
//! the writer ([`super::writer`]), in the same transactions as results.
//!
//! Why: an item's `attempts` counts the requests that went on the wire. The writer
//! records the attempts it saw answered; a lease that ends without a recorded answer (a
//! crash, a hang) is charged only what its holder marked. Without the mark a reclaim can
//! only guess: charging every reclaimed item gave 247 items 11 attempts and no request
//! after 12 restarts (issue 11); charging none would let a crash loop send past
//! `max_attempts`.

use tokio::sync::{mpsc, oneshot};

use crate::model::{Item, SendMark};

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

impl MarkRequest {
    /// The mark to write and where to answer.
    pub(super) fn into_parts(self) -> (SendMark, oneshot::Sender<bool>) {
        (self.mark, self.reply)
    }
}
