//! How an item becomes one `submit_sm` (SMPP 3.4 §4.4.1).
//!
//! An item for an SMPP provider is `POST /` with no headers and a JSON body
//!
//! ```json
//! {"to": "+15550100", "text": "Your code is 4711", "from": "ACME"}
//! ```
//!
//! - `to` → `destination_addr`: an optional `+` and 1-20 digits (the `+` is dropped: the
//!   provider's `dest_addr_ton`, international by default, says it).
//! - `from` → `source_addr`: 1-20 printable ASCII characters; optional when the provider
//!   sets `source_addr`.
//! - `text`: GSM 03.38 default alphabet, one septet per octet (`data_coding` 0x00, the
//!   SMSC default alphabet) when every character is in it (extension characters such as
//!   `€` take two septets), otherwise UCS-2 big-endian (`data_coding` 0x08). Text that
//!   fits one SMS (at most 160 septets, or 70 UCS-2 characters) goes in `short_message`;
//!   longer text, up to the provider's `max_text_octets` encoded, goes in the
//!   `message_payload` TLV (0x0424) with an empty `short_message` (SMPP 3.4 §5.3.2.32;
//!   the SMSC splits it into parts). Text beyond `max_text_octets` is refused, never
//!   truncated, as is text outside UCS-2 (characters above U+FFFF, e.g. emoji) and empty
//!   text.
//!
//! Every `submit_sm` asks for a delivery receipt (`registered_delivery` 0x01) and carries
//! the item's idempotency key as ASCII in vendor TLV [`IDEMPOTENCY_KEY_TLV`] (0x1400),
//! on every attempt, so the SMSC can tell a resend from a new message.
//!
//! Items are refused at enqueue ([`check`]) with the reason, so a message that cannot be
//! encoded never reaches the queue.

use std::str::FromStr;

use rusmpp::extra::encoding::gsm7bit::Gsm7BitUnpacked;
use rusmpp::extra::encoding::ucs2::Ucs2;
use rusmpp::pdus::SubmitSm;
use rusmpp::tlvs::{MessageSubmissionRequestTlvValue, TlvTag};
use rusmpp::types::{AnyOctetString, COctetString, OctetString};
use rusmpp::values::{DataCoding, MessagePayload, Npi, RegisteredDelivery, Ton};
use serde::Deserialize;

use super::config::{SmppConfig, MAX_ADDR_LEN, MAX_TEXT_OCTETS};
use crate::echo::clip;
use crate::model::{Body, Request};

/// Vendor TLV tag carrying the item's idempotency key (ASCII) on every `submit_sm`
/// (0x1400-0x3FFF are reserved for SMSC vendors, SMPP 3.4 §5.3.2).
pub const IDEMPOTENCY_KEY_TLV: u16 = 0x1400;

/// Most GSM 7-bit septets in one SMS (3GPP TS 23.040 §9.2.3.16: 140 octets).
pub const MAX_GSM7_SEPTETS: usize = 160;
/// Most UCS-2 characters in one SMS (140 octets).
pub const MAX_UCS2_CHARS: usize = 70;

/// The JSON body of an SMS item.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SmsBody {
    to: String,
    text: String,
    #[serde(default)]
    from: Option<String>,
}

/// One item, ready to be sent: the variable fields of its `submit_sm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sms {
    /// `source_addr`.
    pub source_addr: String,
    /// `destination_addr`, digits only.
    pub destination_addr: String,
    /// `data_coding`: 0x00 (GSM 7-bit default alphabet) or 0x08 (UCS-2).
    pub data_coding: u8,
    /// The text, encoded.
    pub text: Vec<u8>,
    /// Whether `text` goes in the `message_payload` TLV (it does not fit one SMS) rather
    /// than in `short_message`.
    pub payload: bool,
}

/// Check that `request` is an SMS this provider can send (see the [module docs](self)).
///
/// # Errors
/// Why not, for people: the field and the rule.
pub fn check(request: &Request, cfg: &SmppConfig) -> Result<(), String> {
    encode(request, cfg).map(|_| ())
}

/// The `submit_sm` fields of `request`.
///
/// # Errors
/// As [`check`].
pub fn encode(request: &Request, cfg: &SmppConfig) -> Result<Sms, String> {
    if request.method != http::Method::POST || request.path != "/" {
        return Err(format!(
            "an SMPP item is POST / (got {} {}); the message goes in the JSON body",
            clip(request.method.as_str()),
            clip(&request.path)
        ));
    }
    if !request.headers.is_empty() {
        return Err("an SMPP item has no headers".into());
    }
    let Some(Body::Json(v)) = &request.body else {
        return Err(
            "an SMPP item needs a JSON body {\"to\": \"+15550100\", \"text\": \"...\"}".into(),
        );
    };
    let body = SmsBody::deserialize(v).map_err(|e| format!("SMS body: {e}"))?;
    let destination_addr = body.to.strip_prefix('+').unwrap_or(&body.to);
    if destination_addr.is_empty()
        || destination_addr.len() > MAX_ADDR_LEN
        || !destination_addr.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!(
            "\"to\" {} must be an optional + and 1-{MAX_ADDR_LEN} digits",
            clip(&body.to)
        ));
    }
    let source_addr = match (&body.from, &cfg.source_addr) {
        (Some(from), _) => from.clone(),
        (None, Some(default)) => default.clone(),
        (None, None) => {
            return Err(
                "\"from\" is required: the provider sets no source_addr to send from".into(),
            )
        }
    };
    if source_addr.is_empty()
        || source_addr.len() > MAX_ADDR_LEN
        || !source_addr.bytes().all(|b| (0x20..=0x7e).contains(&b))
    {
        return Err(format!(
            "\"from\" {} must be 1-{MAX_ADDR_LEN} printable ASCII characters",
            clip(&source_addr)
        ));
    }
    let (data_coding, text, payload) = encode_text(&body.text, cfg.max_text_octets)?;
    Ok(Sms {
        source_addr,
        destination_addr: destination_addr.to_owned(),
        data_coding,
        text,
        payload,
    })
}

/// `text` in the GSM 7-bit default alphabet (one septet per octet) when it can be, else
/// UCS-2, and whether it needs `message_payload` (longer than one SMS); refused when
/// empty, over `max` octets encoded, or outside UCS-2.
fn encode_text(text: &str, max: usize) -> Result<(u8, Vec<u8>, bool), String> {
    if text.is_empty() {
        return Err("\"text\" is empty".into());
    }
    let too_long = |what: String| {
        format!(
            "\"text\" is {what}; the provider's max_text_octets is {max} (longer text is \
             refused, never cut: split it, or raise max_text_octets if the SMSC takes it)"
        )
    };
    if let Ok(septets) = Gsm7BitUnpacked::new().encode_to_vec(text) {
        if septets.len() > max {
            return Err(too_long(format!(
                "{} GSM 7-bit septets ({} octets)",
                septets.len(),
                septets.len()
            )));
        }
        let long = septets.len() > MAX_GSM7_SEPTETS;
        return Ok((0x00, septets, long));
    }
    let bytes = Ucs2::new().encode_to_vec(text).map_err(|_| {
        "\"text\" has a character outside UCS-2 (above U+FFFF, e.g. an emoji), which SMS \
         cannot carry"
            .to_owned()
    })?;
    if bytes.len() > max {
        return Err(too_long(format!(
            "{} UCS-2 characters ({} octets; a character outside the GSM 7-bit alphabet \
             makes the whole text UCS-2)",
            bytes.len() / 2,
            bytes.len()
        )));
    }
    let long = bytes.len() / 2 > MAX_UCS2_CHARS;
    Ok((0x08, bytes, long))
}

/// The `submit_sm` of `sms`, carrying `key` in TLV [`IDEMPOTENCY_KEY_TLV`].
///
/// # Errors
/// A field that does not fit its PDU field (cannot happen for an `sms` from [`encode`]
/// with the same `cfg`; a row edited by hand could).
pub fn submit_sm(sms: &Sms, key: &str, cfg: &SmppConfig) -> Result<SubmitSm, String> {
    let addr = |s: &str| COctetString::<1, 21>::from_str(s).map_err(|e| e.to_string());
    if sms.text.len() > cfg.max_text_octets.min(MAX_TEXT_OCTETS) {
        return Err(format!(
            "the text is {} octets; max_text_octets is {}",
            sms.text.len(),
            cfg.max_text_octets
        ));
    }
    let (short_message, payload) = if sms.payload {
        let p = MessagePayload::new(AnyOctetString::from_slice(&sms.text));
        (OctetString::<0, 255>::empty(), Some(p))
    } else {
        let s = OctetString::<0, 255>::from_slice(&sms.text).map_err(|e| e.to_string())?;
        (s, None)
    };
    let key_tlv = MessageSubmissionRequestTlvValue::Other {
        tag: TlvTag::Other(IDEMPOTENCY_KEY_TLV),
        value: AnyOctetString::from_slice(key.as_bytes()),
    };
    let mut pdu = SubmitSm::builder()
        .source_addr_ton(Ton::from(cfg.source_addr_ton))
        .source_addr_npi(Npi::from(cfg.source_addr_npi))
        .source_addr(addr(&sms.source_addr)?)
        .dest_addr_ton(Ton::from(cfg.dest_addr_ton))
        .dest_addr_npi(Npi::from(cfg.dest_addr_npi))
        .destination_addr(addr(&sms.destination_addr)?)
        // SMSC delivery receipt on success or failure (SMPP 3.4 §5.2.17).
        .registered_delivery(RegisteredDelivery::from(0x01))
        .data_coding(DataCoding::from(sms.data_coding))
        .short_message(short_message)
        .push_tlv(key_tlv)
        .build();
    if let Some(p) = payload {
        pdu.push_tlv(MessageSubmissionRequestTlvValue::MessagePayload(p));
    }
    Ok(pdu)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use serde_json::json;

    fn cfg(source: Option<&str>) -> SmppConfig {
        SmppConfig {
            address: "127.0.0.1:2775".into(),
            system_id: "abide".into(),
            password_env: None,
            system_type: String::new(),
            window: 10,
            source_addr: source.map(str::to_owned),
            source_addr_ton: 5,
            source_addr_npi: 0,
            dest_addr_ton: 1,
            dest_addr_npi: 1,
            enquire_link_interval: Duration::from_secs(30),
            pdu_timeout: Duration::from_secs(10),
            max_text_octets: 1530,
        }
    }

    fn req(body: serde_json::Value) -> Request {
        Request::post_json("/", body)
    }

    #[test]
    fn gsm_text_is_one_septet_per_octet_and_the_plus_is_dropped() {
        let sms = encode(
            &req(json!({"to": "+15550100", "text": "Hi @ 5€", "from": "ACME"})),
            &cfg(None),
        )
        .unwrap();
        assert_eq!(sms.destination_addr, "15550100");
        assert_eq!(sms.source_addr, "ACME");
        assert_eq!(sms.data_coding, 0x00);
        // '@' is 0x00 in GSM 03.38; '€' is the escape 0x1B then 0x65.
        assert_eq!(sms.text, b"Hi \x00 5\x1b\x65".to_vec());
    }

    #[test]
    fn other_text_is_ucs2_and_the_default_sender_applies() {
        let sms = encode(
            &req(json!({"to": "4915", "text": "Привет"})),
            &cfg(Some("ACME")),
        )
        .unwrap();
        assert_eq!(sms.data_coding, 0x08);
        assert_eq!(sms.source_addr, "ACME");
        assert_eq!(&sms.text[..4], &[0x04, 0x1f, 0x04, 0x40]);
        assert_eq!(sms.text.len(), 12);
    }

    #[test]
    fn bad_items_are_refused_with_the_field_and_the_rule() {
        let c = cfg(None);
        for (body, says) in [
            (json!({"to": "+1", "text": "x"}), "\"from\" is required"),
            (json!({"to": "+1a", "text": "x", "from": "A"}), "\"to\""),
            (json!({"to": "+", "text": "x", "from": "A"}), "\"to\""),
            (
                json!({"to": "1".repeat(21), "text": "x", "from": "A"}),
                "1-20 digits",
            ),
            (json!({"to": "1", "text": "", "from": "A"}), "empty"),
            (
                json!({"to": "1", "text": "x", "from": "A".repeat(21)}),
                "\"from\"",
            ),
            (
                json!({"to": "1", "text": "x".repeat(1531), "from": "A"}),
                "1531 GSM 7-bit septets",
            ),
            (
                json!({"to": "1", "text": "€".repeat(766), "from": "A"}),
                "1532 GSM 7-bit septets",
            ),
            (
                json!({"to": "1", "text": "ж".repeat(766), "from": "A"}),
                "766 UCS-2 characters",
            ),
            (
                json!({"to": "1", "text": "hi 😀", "from": "A"}),
                "outside UCS-2",
            ),
            (
                json!({"to": "1", "text": "x", "from": "A", "cc": "2"}),
                "unknown field",
            ),
            (json!({"text": "x", "from": "A"}), "missing field `to`"),
        ] {
            let err = encode(&req(body.clone()), &c).unwrap_err();
            assert!(err.contains(says), "{body}: {err}");
        }
        assert!(encode(
            &req(json!({"to": "1", "text": "x".repeat(160), "from": "A"})),
            &c
        )
        .is_ok());
        assert!(encode(
            &req(json!({"to": "1", "text": "ж".repeat(70), "from": "A"})),
            &c
        )
        .is_ok());
        let mut r = req(json!({"to": "1", "text": "x", "from": "A"}));
        r.path = "/v1/messages".into();
        assert!(encode(&r, &c).unwrap_err().contains("POST /"));
        let mut r = req(json!({"to": "1", "text": "x", "from": "A"}));
        r.headers.insert("X-Trace".into(), "1".into());
        assert!(encode(&r, &c).unwrap_err().contains("no headers"));
        let mut r = req(json!({}));
        r.body = Some(Body::Text("hi".into()));
        assert!(encode(&r, &c).unwrap_err().contains("JSON body"));
    }

    #[test]
    fn every_submit_sm_carries_the_key_and_asks_for_a_receipt() {
        let c = cfg(None);
        let sms = encode(
            &req(json!({"to": "+15550100", "text": "hi", "from": "ACME"})),
            &c,
        )
        .unwrap();
        let pdu = submit_sm(&sms, "order-42", &c).unwrap();
        assert_eq!(u8::from(pdu.registered_delivery), 0x01);
        assert_eq!(pdu.short_message().as_ref(), b"hi");
        let tlv = pdu
            .tlvs()
            .iter()
            .find(|t| t.tag() == TlvTag::Other(IDEMPOTENCY_KEY_TLV))
            .expect("key TLV");
        assert_eq!(tlv.value_length(), 8);
        assert_eq!(u8::from(pdu.source_addr_ton), 5);
        assert_eq!(u8::from(pdu.dest_addr_npi), 1);
    }

    #[test]
    fn text_longer_than_one_sms_goes_in_message_payload_up_to_the_maximum() {
        let c = cfg(None);
        let one =
            |text: String| encode(&req(json!({"to": "1", "text": text, "from": "A"})), &c).unwrap();
        // One SMS: 160 septets, 70 UCS-2 characters.
        assert!(!one("x".repeat(160)).payload);
        assert!(!one("ж".repeat(70)).payload);
        assert!(one("x".repeat(161)).payload);
        assert!(one("€".repeat(81)).payload, "162 septets");
        assert!(one("ж".repeat(71)).payload);
        let most = one("x".repeat(1530));
        assert_eq!(most.text.len(), 1530);
        let ucs2 = one("ж".repeat(765));
        assert_eq!(ucs2.text.len(), 1530);
        // The maximum is the provider's: lower it and the same text is refused.
        let mut small = cfg(None);
        small.max_text_octets = 200;
        let err = encode(
            &req(json!({"to": "1", "text": "x".repeat(201), "from": "A"})),
            &small,
        )
        .unwrap_err();
        assert!(err.contains("max_text_octets is 200"), "{err}");
    }

    #[test]
    fn a_long_text_is_sent_whole_in_message_payload_with_an_empty_short_message() {
        let c = cfg(None);
        let text = "x".repeat(700);
        let sms = encode(
            &req(json!({"to": "+15550100", "text": text, "from": "ACME"})),
            &c,
        )
        .unwrap();
        let pdu = submit_sm(&sms, "order-43", &c).unwrap();
        assert!(pdu.short_message().is_empty());
        assert_eq!(pdu.sm_length(), 0);
        let payload: Vec<_> = pdu
            .tlvs()
            .iter()
            .filter(|t| t.tag() == TlvTag::MessagePayload)
            .collect();
        assert_eq!(payload.len(), 1);
        assert_eq!(payload[0].value_length(), 700);
        // The key travels with it.
        assert!(pdu
            .tlvs()
            .iter()
            .any(|t| t.tag() == TlvTag::Other(IDEMPOTENCY_KEY_TLV)));
        // A row edited by hand past the maximum is never sent cut.
        let mut big = sms.clone();
        big.text = vec![b'x'; 1531];
        assert!(submit_sm(&big, "k", &c).is_err());
    }
}
