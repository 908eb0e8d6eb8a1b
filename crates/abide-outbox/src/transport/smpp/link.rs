//! What the senders and the connection task share: the state of the bind, the
//! outstanding requests by sequence number, and the counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rusmpp::Command;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

/// The answer to one request PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Its response PDU: `command_status`, and the `message_id` of a `submit_sm_resp`.
    Resp {
        command_status: u32,
        message_id: Option<String>,
    },
    /// A `generic_nack` naming its sequence number.
    Nack { command_status: u32 },
}

/// The bind, as the senders see it.
#[derive(Debug, Clone)]
pub(crate) enum Link {
    /// Connecting and binding; senders wait (up to a `pdu_timeout`).
    Connecting,
    /// Bound: requests go to the connection task through `Bound`.
    Bound(Arc<Bound>),
    /// Not bound, waiting to try again: a send fails at once, as a refused connection
    /// does over HTTP (a host-level signal the session turns into a pause).
    Down,
    /// Closed for good (unbound on shutdown).
    Closed,
}

/// One bound session: where requests go and who waits for which answer.
#[derive(Debug)]
pub(crate) struct Bound {
    /// To the connection task, which writes the PDUs.
    pub(crate) out: mpsc::Sender<Command>,
    pending: Mutex<HashMap<u32, oneshot::Sender<Reply>>>,
}

impl Bound {
    pub(crate) fn new(out: mpsc::Sender<Command>) -> Self {
        Self {
            out,
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wait for the answer to `seq`.
    pub(crate) fn expect(&self, seq: u32) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(seq, tx);
        rx
    }

    /// Stop waiting for `seq` (timed out, or the sender went away).
    pub(crate) fn forget(&self, seq: u32) {
        self.lock().remove(&seq);
    }

    /// Hand `reply` to whoever waits for `seq`; false when nobody does (a late answer
    /// after a timeout, or a stray).
    pub(crate) fn answer(&self, seq: u32, reply: Reply) -> bool {
        match self.lock().remove(&seq) {
            Some(tx) => tx.send(reply).is_ok(),
            None => false,
        }
    }

    /// Requests still waiting.
    #[cfg(test)]
    pub(crate) fn outstanding(&self) -> usize {
        self.lock().len()
    }

    /// The connection is gone: every waiter learns it (its receiver closes), and counts
    /// its request's outcome as unknown.
    pub(crate) fn abandon_all(&self) {
        self.lock().clear();
    }
}

/// Counters of one SMPP transport, for reports and metrics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) binds: AtomicU64,
    pub(crate) bind_failures: AtomicU64,
    pub(crate) connections_lost: AtomicU64,
    pub(crate) pdu_timeouts: AtomicU64,
    pub(crate) generic_nacks: AtomicU64,
    pub(crate) late_responses: AtomicU64,
    pub(crate) receipts: AtomicU64,
    pub(crate) receipts_unreadable: AtomicU64,
    pub(crate) receipts_refused: AtomicU64,
    pub(crate) not_receipts: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> SmppStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SmppStats {
            binds: g(&self.binds),
            bind_failures: g(&self.bind_failures),
            connections_lost: g(&self.connections_lost),
            pdu_timeouts: g(&self.pdu_timeouts),
            generic_nacks: g(&self.generic_nacks),
            late_responses: g(&self.late_responses),
            receipts: g(&self.receipts),
            receipts_unreadable: g(&self.receipts_unreadable),
            receipts_refused: g(&self.receipts_refused),
            not_receipts: g(&self.not_receipts),
        }
    }
}

/// What one SMPP transport has seen since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SmppStats {
    /// Successful `bind_transceiver`s (the first, and every re-bind after a drop).
    pub binds: u64,
    /// Connections or binds that failed (refused, timed out, `bind_transceiver_resp`
    /// with an error).
    pub bind_failures: u64,
    /// Bound sessions that ended without our `unbind` (dropped, unbound by the SMSC,
    /// keep-alive unanswered).
    pub connections_lost: u64,
    /// Requests whose response did not come within `pdu_timeout`.
    pub pdu_timeouts: u64,
    /// `generic_nack`s received.
    pub generic_nacks: u64,
    /// Responses that matched no waiting request (after a timeout, or strays).
    pub late_responses: u64,
    /// Delivery receipts read and handed on to be stored.
    pub receipts: u64,
    /// `deliver_sm` receipts naming no readable message id (answered, not stored).
    pub receipts_unreadable: u64,
    /// Receipts answered with a temporary error (0x64) because they could not be
    /// stored (nobody taking them, or the store failing): the SMSC delivers them again.
    pub receipts_refused: u64,
    /// `deliver_sm` that were no receipt (mobile-originated messages): answered, dropped.
    pub not_receipts: u64,
}

/// Sequence numbers: 1..=0x7FFF_FFFF, wrapping (SMPP 3.4 §5.1.4).
#[derive(Debug, Default)]
pub(crate) struct Sequence(AtomicU32);

impl Sequence {
    pub(crate) fn next(&self) -> u32 {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        (n % 0x7FFF_FFFF) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_stay_in_range_and_wrap() {
        let s = Sequence(AtomicU32::new(0x7FFF_FFFE));
        assert_eq!(s.next(), 0x7FFF_FFFF);
        assert_eq!(s.next(), 1);
        let s = Sequence::default();
        assert_eq!((s.next(), s.next()), (1, 2));
    }

    #[test]
    fn answers_reach_their_waiter_once() {
        let (tx, _rx) = mpsc::channel(1);
        let b = Bound::new(tx);
        let mut rx = b.expect(7);
        assert!(!b.answer(8, Reply::Nack { command_status: 3 }));
        assert!(b.answer(
            7,
            Reply::Resp {
                command_status: 0,
                message_id: Some("m".into())
            }
        ));
        assert!(matches!(rx.try_recv(), Ok(Reply::Resp { .. })));
        assert!(!b.answer(7, Reply::Nack { command_status: 3 }));
        let rx = b.expect(9);
        b.abandon_all();
        assert_eq!(b.outstanding(), 0);
        drop(rx);
    }
}
