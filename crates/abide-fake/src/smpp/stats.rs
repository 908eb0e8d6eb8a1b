//! What the SMPP listener saw: the `smpp` object of `GET /_stats`.

use std::collections::BTreeMap;

use rusmpp::{CommandId, CommandStatus};
use serde::Serialize;

/// Keys listed in [`SmppStats::repeats_by_key`], at most (the first ones seen).
pub const MAX_LISTED_KEYS: usize = 1_000;

/// Counters of the SMPP listener.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SmppStats {
    /// TCP connections accepted (including those closed at once for `max_connections`).
    pub connections: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// Connections closed because `max_connections` were open.
    pub connections_refused: u64,
    /// Connections the SMSC closed on purpose: `drop-after` / `drop=all` quirks, a bad
    /// `command_length`, bind or idle timeouts, too many invalid PDUs.
    pub connections_dropped: BTreeMap<String, u64>,
    /// Successful binds by kind (`transmitter`, `receiver`, `transceiver`).
    pub binds: BTreeMap<String, u64>,
    /// PDUs received by command (`submit_sm`, `enquire_link`, `deliver_sm_resp`, …;
    /// undecodable ones as `invalid`, unknown ids as `0x…`).
    pub pdus_received: BTreeMap<String, u64>,
    /// PDUs sent by command.
    pub pdus_sent: BTreeMap<String, u64>,
    /// Responses sent by `command_status` (`0x00000000`, `0x00000058`, …).
    pub responses_by_status: BTreeMap<String, u64>,
    /// Requests whose `sequence_number` one of the last 4,096 requests on the same
    /// connection already had (a client matching answers to the wrong request). Answered
    /// as usual.
    pub sequence_reuses: u64,
    /// `submit_sm` accepted as new messages (each gets a `message_id`).
    pub accepted: u64,
    /// Of `accepted`, messages whose text came in the `message_payload` TLV (longer than
    /// one SMS; SMPP 3.4 §5.3.2.32), with an empty `short_message`.
    pub long_messages: u64,
    /// `submit_sm` whose idempotency key (vendor TLV 0x1400) was already accepted: answered
    /// with the same `message_id`, not delivered again, no second receipt.
    pub repeats: u64,
    /// `submit_sm` without the TLV whose (source_addr, destination_addr, short_message) was
    /// already accepted. They are accepted again (the SMSC cannot tell a retry from a
    /// second message), so this counts possible duplicates.
    pub content_repeats: u64,
    /// Keys that repeated and how many repeats each had (TLV keys as sent, content keys as
    /// `source>destination#hash`), at most [`MAX_LISTED_KEYS`] keys.
    pub repeats_by_key: BTreeMap<String, u64>,
    /// `submit_sm` refused by a rate or concurrency gate or by `congestion`.
    pub throttled: u64,
    /// Receipts (`deliver_sm`) sent, resends included.
    pub receipts_sent: u64,
    /// Receipts acknowledged with `deliver_sm_resp` status 0.
    pub receipts_acknowledged: u64,
    /// Receipts waiting for a receiver bind or for their `deliver_sm_resp`.
    pub receipts_pending: u64,
    /// Receipts dropped because too many were held.
    pub receipts_dropped: u64,
}

impl SmppStats {
    pub(crate) fn received(&mut self, command: &str) {
        bump(&mut self.pdus_received, command);
    }

    pub(crate) fn sent(&mut self, id: CommandId, status: CommandStatus, response: bool) {
        bump(&mut self.pdus_sent, &command_name(id));
        if response {
            bump(&mut self.responses_by_status, &status_name(status));
        }
    }

    pub(crate) fn dropped(&mut self, why: &str) {
        bump(&mut self.connections_dropped, why);
    }

    pub(crate) fn bound(&mut self, kind: &str) {
        bump(&mut self.binds, kind);
    }

    pub(crate) fn repeat_of(&mut self, key: &str) {
        if let Some(n) = self.repeats_by_key.get_mut(key) {
            *n += 1;
        } else if self.repeats_by_key.len() < MAX_LISTED_KEYS {
            self.repeats_by_key.insert(key.to_owned(), 1);
        }
    }
}

fn bump(m: &mut BTreeMap<String, u64>, k: &str) {
    if let Some(n) = m.get_mut(k) {
        *n += 1;
    } else {
        m.insert(k.to_owned(), 1);
    }
}

/// `submit_sm_resp` for `SubmitSmResp`; `0x…` for ids without a name.
pub(crate) fn command_name(id: CommandId) -> String {
    if let CommandId::Other(n) = id {
        return format!("{n:#010x}");
    }
    let camel = format!("{id:?}");
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `0x00000058`.
pub(crate) fn status_name(s: CommandStatus) -> String {
    format!("{:#010x}", u32::from(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_spec() {
        assert_eq!(command_name(CommandId::SubmitSmResp), "submit_sm_resp");
        assert_eq!(command_name(CommandId::EnquireLink), "enquire_link");
        assert_eq!(command_name(CommandId::Other(0x1234)), "0x00001234");
        assert_eq!(status_name(CommandStatus::EsmeRthrottled), "0x00000058");
        let mut s = SmppStats::default();
        for i in 0..(MAX_LISTED_KEYS + 5) {
            s.repeat_of(&i.to_string());
        }
        s.repeat_of("0");
        assert_eq!(s.repeats_by_key.len(), MAX_LISTED_KEYS);
        assert_eq!(s.repeats_by_key["0"], 2);
    }
}
