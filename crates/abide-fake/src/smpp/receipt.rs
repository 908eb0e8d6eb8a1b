//! Delivery receipts: the standard receipt text (SMPP 3.4 Appendix B) in a `deliver_sm` with
//! the receipt bit of `esm_class` and the `receipted_message_id` / `message_state` TLVs, and
//! the queue that holds them per system_id until a receiver or transceiver bind takes them.
//! A receipt sent and not acknowledged when its connection ends goes back to the queue.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use rusmpp::pdus::DeliverSm;
use rusmpp::tlvs::MessageDeliveryRequestTlvValue;
use rusmpp::types::{COctetString, OctetString};
use rusmpp::values::{EsmClass, MessageState, Npi, Ton};
use tokio::time::Instant;

use crate::config::ReceiptState;
use crate::dates::yymmddhhmm;

/// Receipts waiting or in flight, at most; more are counted as dropped (a bound on what a
/// client that never binds a receiver can make the SMSC hold).
pub(crate) const MAX_PENDING_RECEIPTS: usize = 1_000_000;

/// Characters of the original message quoted after `text:`.
const TEXT_CHARS: usize = 20;

/// A receipt to send.
#[derive(Debug, Clone)]
pub(crate) struct Receipt {
    pub(crate) message_id: String,
    /// The handset: the original destination, now the source.
    pub(crate) from: COctetString<1, 21>,
    pub(crate) from_ton: Ton,
    pub(crate) from_npi: Npi,
    /// The ESME's address: the original source, now the destination.
    pub(crate) to: COctetString<1, 21>,
    pub(crate) to_ton: Ton,
    pub(crate) to_npi: Npi,
    pub(crate) submitted: SystemTime,
    pub(crate) text: Vec<u8>,
    pub(crate) state: ReceiptState,
}

impl ReceiptState {
    /// `stat:`, `err:` and `message_state` of this outcome.
    fn fields(self) -> (&'static str, &'static str, MessageState) {
        match self {
            ReceiptState::Delivered => ("DELIVRD", "000", MessageState::Delivered),
            ReceiptState::Undeliverable => ("UNDELIV", "001", MessageState::Undeliverable),
            ReceiptState::Expired => ("EXPIRED", "001", MessageState::Expired),
            ReceiptState::Rejected => ("REJECTD", "001", MessageState::Rejected),
        }
    }
}

impl Receipt {
    /// A delivered receipt for a message to 15550100 from `ABIDE`.
    #[cfg(test)]
    pub(crate) fn example(id: &str) -> Self {
        Self {
            message_id: id.to_owned(),
            from: COctetString::from_string("15550100".into()).unwrap(),
            from_ton: Ton::International,
            from_npi: Npi::Isdn,
            to: COctetString::from_string("ABIDE".into()).unwrap(),
            to_ton: Ton::Alphanumeric,
            to_npi: Npi::Unknown,
            submitted: std::time::UNIX_EPOCH + std::time::Duration::from_secs(784_111_777),
            text: b"Hello from abide, a long text".to_vec(),
            state: ReceiptState::Delivered,
        }
    }

    /// `id:… sub:001 dlvr:001 submit date:YYMMDDhhmm done date:YYMMDDhhmm stat:DELIVRD
    /// err:000 text:…` (the first 20 octets of the message; `dlvr:000` unless delivered).
    pub(crate) fn text(&self, done: SystemTime) -> Vec<u8> {
        let (stat, err, _) = self.state.fields();
        let dlvr = if self.state == ReceiptState::Delivered {
            "001"
        } else {
            "000"
        };
        let mut t = format!(
            "id:{} sub:001 dlvr:{dlvr} submit date:{} done date:{} stat:{stat} err:{err} text:",
            self.message_id,
            yymmddhhmm(self.submitted),
            yymmddhhmm(done)
        )
        .into_bytes();
        t.extend(self.text.iter().take(TEXT_CHARS));
        t
    }

    /// The `deliver_sm` carrying this receipt, done at `done`.
    pub(crate) fn to_pdu(&self, done: SystemTime) -> DeliverSm {
        let mut text = self.text(done);
        text.truncate(255);
        let mut tlvs = vec![MessageDeliveryRequestTlvValue::MessageState(
            self.state.fields().2,
        )];
        if let Ok(id) = COctetString::from_string(self.message_id.clone()) {
            tlvs.insert(0, MessageDeliveryRequestTlvValue::ReceiptedMessageId(id));
        }
        DeliverSm::builder()
            .source_addr_ton(self.from_ton)
            .source_addr_npi(self.from_npi)
            .source_addr(self.from.clone())
            .dest_addr_ton(self.to_ton)
            .dest_addr_npi(self.to_npi)
            .destination_addr(self.to.clone())
            // 0x04: "short message contains MC delivery receipt" (SMPP 3.4 §5.2.12).
            .esm_class(EsmClass::from(0x04))
            .short_message(OctetString::from_vec(text).unwrap_or_default())
            .tlvs(tlvs)
            .build()
    }
}

/// Receipts per system_id, ordered by when they are due.
#[derive(Debug, Default)]
pub(crate) struct Receipts {
    by_system: HashMap<String, BTreeMap<(Instant, u64), Receipt>>,
    next: u64,
    /// Waiting plus in flight (sent, not yet acknowledged).
    held: usize,
}

impl Receipts {
    /// Hold `r` for `system_id` until `due`; `false` when full (the receipt is dropped).
    pub(crate) fn push(&mut self, system_id: &str, due: Instant, r: Receipt) -> bool {
        if self.held >= MAX_PENDING_RECEIPTS {
            return false;
        }
        self.held += 1;
        self.insert(system_id, due, r);
        true
    }

    fn insert(&mut self, system_id: &str, due: Instant, r: Receipt) {
        self.next += 1;
        self.by_system
            .entry(system_id.to_owned())
            .or_default()
            .insert((due, self.next), r);
    }

    /// Put back a receipt taken by [`Receipts::take_due`] and not acknowledged.
    pub(crate) fn requeue(&mut self, system_id: &str, due: Instant, r: Receipt) {
        self.insert(system_id, due, r);
    }

    /// A taken receipt was acknowledged (or given up): it is no longer held.
    pub(crate) fn done(&mut self) {
        self.held = self.held.saturating_sub(1);
    }

    /// When the next receipt for `system_id` is due.
    pub(crate) fn next_due(&self, system_id: &str) -> Option<Instant> {
        self.by_system
            .get(system_id)
            .and_then(|q| q.keys().next())
            .map(|(due, _)| *due)
    }

    /// Up to `max` receipts for `system_id` due at `now`, oldest first.
    pub(crate) fn take_due(&mut self, system_id: &str, now: Instant, max: usize) -> Vec<Receipt> {
        let Some(q) = self.by_system.get_mut(system_id) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while out.len() < max {
            match q.first_key_value() {
                Some(((due, _), _)) if *due <= now => {
                    if let Some((_, r)) = q.pop_first() {
                        out.push(r);
                    }
                }
                _ => break,
            }
        }
        if q.is_empty() {
            self.by_system.remove(system_id);
        }
        out
    }

    /// Receipts waiting or in flight.
    pub(crate) fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_standard_receipt_text() {
        let r = Receipt::example("0000000042");
        let done = r.submitted + Duration::from_secs(120);
        assert_eq!(
            String::from_utf8(r.text(done)).unwrap(),
            "id:0000000042 sub:001 dlvr:001 submit date:9411060849 done date:9411060851 \
             stat:DELIVRD err:000 text:Hello from abide, a "
        );
        let pdu = r.to_pdu(done);
        assert_eq!(u8::from(pdu.esm_class), 0x04);
        assert_eq!(pdu.source_addr.as_str(), "15550100");
        assert_eq!(pdu.tlvs().len(), 2);
        let r = Receipt {
            state: ReceiptState::Expired,
            ..r
        };
        let t = String::from_utf8(r.text(done)).unwrap();
        assert!(
            t.contains(" dlvr:000 ") && t.contains(" stat:EXPIRED err:001 "),
            "{t}"
        );
    }

    #[test]
    fn due_order_and_requeue() {
        let mut q = Receipts::default();
        let t0 = Instant::now();
        assert!(q.push("a", t0 + Duration::from_secs(2), Receipt::example("2")));
        assert!(q.push("a", t0 + Duration::from_secs(1), Receipt::example("1")));
        assert_eq!(q.next_due("a"), Some(t0 + Duration::from_secs(1)));
        assert!(q.take_due("a", t0, 10).is_empty());
        let got = q.take_due("a", t0 + Duration::from_secs(5), 10);
        assert_eq!(
            got.iter()
                .map(|r| r.message_id.as_str())
                .collect::<Vec<_>>(),
            ["1", "2"]
        );
        assert_eq!(q.held(), 2);
        q.requeue("a", t0, got[0].clone());
        q.done();
        assert_eq!((q.held(), q.next_due("a")), (1, Some(t0)));
        assert_eq!(q.next_due("b"), None);
    }
}
