//! Delivery receipts in `deliver_sm` (SMPP 3.4 §4.6.1, Appendix B).
//!
//! A receipt is a `deliver_sm` whose `esm_class` message type is "SMSC Delivery Receipt"
//! (bits 5-2 = 0001, §5.2.12). It names the message two ways, both read:
//! - TLVs `receipted_message_id` (0x001E) and `message_state` (0x0427), when present
//!   (§5.3.2.12, §5.3.2.35); they win, being unambiguous;
//! - the receipt text in `short_message` (Appendix B, "the format is SMSC vendor
//!   specific, but ..."): `id:IIIIIIIIII sub:SSS dlvrd:DDD submit date:YYMMDDhhmm done
//!   date:YYMMDDhhmm stat:DDDDDDD err:E text:...`, keys read case-insensitively.
//!
//! A receipt that names no message id is not a receipt we can map: it is answered and
//! counted as unreadable.

use rusmpp::pdus::DeliverSm;
use rusmpp::tlvs::TlvValue;
use rusmpp::values::EsmClass;

use crate::receipt::ReceiptState;

/// Longest message id kept from a receipt (the `receipted_message_id` TLV's limit: 65
/// octets with the NUL).
pub const MAX_MESSAGE_ID_LEN: usize = 64;

/// What a `deliver_sm` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A delivery receipt for `message_id`.
    Receipt {
        /// The id the SMSC gave in `submit_sm_resp`.
        message_id: String,
        /// Its final state.
        state: ReceiptState,
    },
    /// A receipt that names no readable message id.
    Unreadable,
    /// A mobile-originated message (or anything else that is no receipt): not ours to
    /// handle; answered and counted.
    NotReceipt,
}

/// Read one `deliver_sm`.
pub fn read(pdu: &DeliverSm) -> Inbound {
    let mut id: Option<String> = None;
    let mut state: Option<ReceiptState> = None;
    for tlv in pdu.tlvs() {
        match tlv.value() {
            Some(TlvValue::ReceiptedMessageId(v)) => id = Some(v.as_str().to_owned()),
            Some(TlvValue::MessageState(s)) => {
                state = Some(ReceiptState::from_message_state(u8::from(*s)));
            }
            _ => {}
        }
    }
    let text = pdu.short_message().as_ref();
    let is_receipt = is_receipt_type(pdu.esm_class) || id.is_some() || state.is_some();
    if !is_receipt {
        return Inbound::NotReceipt;
    }
    let fields = ReceiptText::parse(text);
    let id = id.or(fields.id);
    let state = state.unwrap_or_else(|| {
        fields
            .stat
            .map_or(ReceiptState::Unknown, |s| ReceiptState::from_stat(&s))
    });
    match id {
        Some(message_id) if !message_id.is_empty() && message_id.len() <= MAX_MESSAGE_ID_LEN => {
            Inbound::Receipt { message_id, state }
        }
        _ => Inbound::Unreadable,
    }
}

/// `esm_class` bits 5-2 = 0001: "Short Message contains SMSC Delivery Receipt".
fn is_receipt_type(esm: EsmClass) -> bool {
    (u8::from(esm) & 0b0011_1100) == 0b0000_0100
}

/// The fields of a receipt text we read.
#[derive(Debug, Default, PartialEq, Eq)]
struct ReceiptText {
    id: Option<String>,
    stat: Option<String>,
}

impl ReceiptText {
    /// `key:value` pairs separated by spaces; everything from ` text:` on is the
    /// message's own text and never read for fields. A value ends at a space or a byte
    /// that is not visible ASCII.
    fn parse(text: &[u8]) -> Self {
        let text = String::from_utf8_lossy(text);
        let lower = text.to_ascii_lowercase();
        let cut = lower.find(" text:").unwrap_or(lower.len());
        let (text, lower) = (&text[..cut], &lower[..cut]);
        let find = |key: &str| -> Option<String> {
            let mut from = 0;
            while let Some(at) = lower[from..].find(key) {
                let start = from + at;
                // A key starts the text or follows a space ("xid:" holds no "id:").
                if start == 0 || lower.as_bytes()[start - 1] == b' ' {
                    let v = &text[start + key.len()..];
                    let end = v
                        .find(|c: char| c == ' ' || !c.is_ascii_graphic())
                        .unwrap_or(v.len());
                    return Some(v[..end].to_owned()).filter(|v| !v.is_empty());
                }
                from = start + key.len();
            }
            None
        };
        ReceiptText {
            id: find("id:"),
            stat: find("stat:"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use rusmpp::tlvs::MessageDeliveryRequestTlvValue;
    use rusmpp::types::{COctetString, OctetString};
    use rusmpp::values::MessageState;

    use super::*;

    fn deliver(esm: u8, text: &str, tlvs: Vec<MessageDeliveryRequestTlvValue>) -> DeliverSm {
        DeliverSm::builder()
            .esm_class(EsmClass::from(esm))
            .short_message(OctetString::from_slice(text.as_bytes()).unwrap())
            .tlvs(tlvs)
            .build()
    }

    #[test]
    fn the_standard_text_is_read() {
        let text = "id:0123456789 sub:001 dlvrd:001 submit date:2612011200 done date:2612011201 \
                    stat:DELIVRD err:000 text:hello stat:EXPIRED";
        assert_eq!(
            read(&deliver(0x04, text, vec![])),
            Inbound::Receipt {
                message_id: "0123456789".into(),
                state: ReceiptState::Delivered
            }
        );
        let text = "ID:abc-7 SUB:001 DLVRD:000 SUBMIT DATE:2612011200 DONE DATE:2612011201 \
                    STAT:UNDELIV ERR:001 TEXT:";
        assert_eq!(
            read(&deliver(0x04, text, vec![])),
            Inbound::Receipt {
                message_id: "abc-7".into(),
                state: ReceiptState::Undeliverable
            }
        );
    }

    #[test]
    fn tlvs_win_over_the_text() {
        let tlvs = vec![
            MessageDeliveryRequestTlvValue::ReceiptedMessageId(
                COctetString::from_str("tlv-id").unwrap(),
            ),
            MessageDeliveryRequestTlvValue::MessageState(MessageState::Expired),
        ];
        let text = "id:text-id stat:DELIVRD";
        assert_eq!(
            read(&deliver(0x04, text, tlvs)),
            Inbound::Receipt {
                message_id: "tlv-id".into(),
                state: ReceiptState::Expired
            }
        );
    }

    #[test]
    fn mobile_originated_and_unreadable_messages_are_told_apart() {
        assert_eq!(
            read(&deliver(0x00, "id:1 stat:DELIVRD", vec![])),
            Inbound::NotReceipt
        );
        assert_eq!(
            read(&deliver(0x04, "no fields here", vec![])),
            Inbound::Unreadable
        );
        assert_eq!(read(&deliver(0x04, "", vec![])), Inbound::Unreadable);
        let long = format!("id:{} stat:DELIVRD", "9".repeat(65));
        assert_eq!(read(&deliver(0x04, &long, vec![])), Inbound::Unreadable);
        // No stat: the id still maps; the state is unknown.
        assert_eq!(
            read(&deliver(0x04, "id:77", vec![])),
            Inbound::Receipt {
                message_id: "77".into(),
                state: ReceiptState::Unknown
            }
        );
        // A key inside another word is no key.
        assert_eq!(
            read(&deliver(0x04, "xid:5 stat:DELIVRD", vec![])),
            Inbound::Unreadable
        );
    }
}
