//! Delivery receipts: what the remote later says became of an accepted message.
//!
//! An SMSC answers `submit_sm` with a `message_id` (stored on the item,
//! [`crate::Item::message_id`]) and later sends a `deliver_sm` receipt naming that id and
//! a final state. Receipts are stored as they come ([`crate::Store::record_receipts`]),
//! keyed by provider and `message_id`, and matched to items when read: a receipt that
//! arrives before its item's `submit_sm_resp` is written is matched once it is, and one
//! that names an id no item carries is counted as *unmatched*, never dropped. A receipt
//! never changes an item's outbox state: `SUBMITTED` means the remote accepted it; the
//! receipt says whether it then reached the handset.

use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use tokio::sync::{mpsc, oneshot, Mutex};

/// A receipt a transport received (an SMPP `deliver_sm`), waiting to be stored: the
/// remote is acknowledged once it is ([`InboundReceipt::stored`]); one dropped unstored is
/// answered with a temporary error and delivered again.
#[derive(Debug)]
pub struct InboundReceipt {
    /// The `message_id` it names.
    pub message_id: String,
    /// Its state.
    pub state: ReceiptState,
    ack: oneshot::Sender<()>,
}

impl InboundReceipt {
    /// A receipt, and what resolves once it is stored (an error if it is dropped).
    pub fn new(message_id: String, state: ReceiptState) -> (Self, oneshot::Receiver<()>) {
        let (ack, stored) = oneshot::channel();
        let r = Self {
            message_id,
            state,
            ack,
        };
        (r, stored)
    }

    /// The receipt is stored: the remote may be told so.
    pub fn stored(self) {
        let _ = self.ack.send(());
    }
}

/// Where a dispatcher takes a transport's receipts from (shared by its runs).
pub type ReceiptInbox = Arc<Mutex<mpsc::Receiver<InboundReceipt>>>;

abide_core::named_enum! {
    /// The final state a receipt reports, reduced to what a sender acts on.
    ///
    /// From the SMPP 3.4 receipt text (`stat:`, Appendix B) or the `message_state` TLV
    /// (§5.3.2.35): `DELIVRD`/2 → delivered; `UNDELIV`/5 and `DELETED`/4 → undeliverable;
    /// `EXPIRED`/3 → expired; `REJECTD`/8 → rejected; everything else (`ACCEPTD`, `UNKNOWN`,
    /// `ENROUTE`, unreadable) → unknown.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ReceiptState("receipt state") {
        /// Reached the handset.
        Delivered = "delivered",
        /// Will not be delivered (the network gave up, or the message was deleted).
        Undeliverable = "undeliverable",
        /// Its validity period ran out before it could be delivered.
        Expired = "expired",
        /// The SMSC or network refused it after accepting it.
        Rejected = "rejected",
        /// The receipt said nothing final or nothing readable.
        Unknown = "unknown",
    }
}

impl ReceiptState {
    /// From a receipt text's `stat:` value (SMPP 3.4 Appendix B), case-insensitive.
    pub fn from_stat(stat: &str) -> Self {
        match stat.to_ascii_uppercase().as_str() {
            "DELIVRD" => ReceiptState::Delivered,
            "UNDELIV" | "DELETED" => ReceiptState::Undeliverable,
            "EXPIRED" => ReceiptState::Expired,
            "REJECTD" => ReceiptState::Rejected,
            _ => ReceiptState::Unknown,
        }
    }

    /// From the `message_state` TLV's value (SMPP 3.4 §5.2.28).
    pub fn from_message_state(v: u8) -> Self {
        match v {
            2 => ReceiptState::Delivered,
            4 | 5 => ReceiptState::Undeliverable,
            3 => ReceiptState::Expired,
            8 => ReceiptState::Rejected,
            _ => ReceiptState::Unknown,
        }
    }
}

/// One receipt as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The provider whose connection it came on.
    pub provider: String,
    /// The `message_id` it names (as the SMSC's `submit_sm_resp` gave it).
    pub message_id: String,
    /// What it says.
    pub state: ReceiptState,
    /// When it was received (the dispatcher's clock).
    pub at: SystemTime,
}

/// Receipts per state, for items of one provider or all; see [`crate::Store::receipt_counts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReceiptCounts {
    /// Items with a `delivered` receipt.
    pub delivered: u64,
    /// Items with an `undeliverable` receipt.
    pub undeliverable: u64,
    /// Items with an `expired` receipt.
    pub expired: u64,
    /// Items with a `rejected` receipt.
    pub rejected: u64,
    /// Items with an `unknown` receipt.
    pub unknown: u64,
    /// Receipts naming a `message_id` no item carries (yet): a receipt for a message
    /// whose `submit_sm_resp` was never seen (a timeout), or a stray.
    pub unmatched: u64,
}

impl ReceiptCounts {
    /// The count of items with a receipt in `state`.
    pub fn get(&self, state: ReceiptState) -> u64 {
        match state {
            ReceiptState::Delivered => self.delivered,
            ReceiptState::Undeliverable => self.undeliverable,
            ReceiptState::Expired => self.expired,
            ReceiptState::Rejected => self.rejected,
            ReceiptState::Unknown => self.unknown,
        }
    }

    /// Mutable count of `state`.
    pub fn get_mut(&mut self, state: ReceiptState) -> &mut u64 {
        match state {
            ReceiptState::Delivered => &mut self.delivered,
            ReceiptState::Undeliverable => &mut self.undeliverable,
            ReceiptState::Expired => &mut self.expired,
            ReceiptState::Rejected => &mut self.rejected,
            ReceiptState::Unknown => &mut self.unknown,
        }
    }

    /// Items with a receipt of any state (unmatched receipts excluded).
    pub fn matched(&self) -> u64 {
        ReceiptState::ALL.iter().map(|&s| self.get(s)).sum()
    }

    /// Every receipt stored, matched or not.
    pub fn total(&self) -> u64 {
        self.matched() + self.unmatched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_from_text_and_tlv_alike() {
        for (stat, tlv, want) in [
            ("DELIVRD", 2, ReceiptState::Delivered),
            ("undeliv", 5, ReceiptState::Undeliverable),
            ("DELETED", 4, ReceiptState::Undeliverable),
            ("EXPIRED", 3, ReceiptState::Expired),
            ("REJECTD", 8, ReceiptState::Rejected),
            ("ACCEPTD", 6, ReceiptState::Unknown),
            ("UNKNOWN", 7, ReceiptState::Unknown),
            ("ENROUTE", 1, ReceiptState::Unknown),
            ("", 200, ReceiptState::Unknown),
        ] {
            assert_eq!(ReceiptState::from_stat(stat), want, "{stat}");
            assert_eq!(ReceiptState::from_message_state(tlv), want, "{tlv}");
        }
        for s in ReceiptState::ALL {
            assert_eq!(s.as_str().parse::<ReceiptState>(), Ok(s));
        }
        assert!("DELIVRD".parse::<ReceiptState>().is_err());
    }

    #[test]
    fn counts_add_up() {
        let mut c = ReceiptCounts::default();
        *c.get_mut(ReceiptState::Delivered) += 3;
        *c.get_mut(ReceiptState::Expired) += 1;
        c.unmatched = 2;
        assert_eq!((c.matched(), c.total()), (4, 6));
    }
}
