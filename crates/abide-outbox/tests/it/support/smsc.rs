//! A tiny SMSC on rusmpp over loopback TCP, for dispatcher tests: binds with one password,
//! accepts each idempotency key (TLV 0x1400) once (a repeat gets the first message id
//! back and is counted), throttles submits beyond `rate` per second (a token bucket of
//! 20; 0x58 and 0x14 in turn; submits 50 and 51 always), sends a receipt for each accepted
//! message, and drops the connection once at submit number `drop_after`, unanswered.
//! Receipts not acknowledged by `deliver_sm_resp` are sent again on the next bind, as an
//! SMSC does: closing a socket the client is still writing to resets it, and the receipts
//! in flight on it are lost.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use rusmpp::pdus::{BindTransceiverResp, DeliverSm, SubmitSmResp};
use rusmpp::tlvs::{TlvTag, TlvValue};
use rusmpp::tokio_codec::CommandCodec;
use rusmpp::types::{COctetString, OctetString};
use rusmpp::values::EsmClass;
use rusmpp::{Command, CommandId, CommandStatus, Pdu};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::codec::Framed;

/// The password the SMSC accepts.
pub const PASSWORD: &str = "s3cret";

#[derive(Debug, Default)]
pub struct Books {
    /// Accepted submits per key (a repeat after acceptance counts here too).
    pub per_key: HashMap<String, usize>,
    /// Message id per key.
    pub ids: HashMap<String, String>,
    pub throttled: usize,
    /// Throttles by code.
    pub throttle_codes: HashMap<u32, usize>,
    pub submits: usize,
    pub binds: usize,
    pub unbinds: usize,
    pub receipts_acked: usize,
    /// `deliver_sm_resp` with an error status.
    pub receipts_refused: usize,
    /// Message ids whose receipt was sent and not yet acknowledged.
    pub unacked: std::collections::BTreeSet<String>,
}

#[derive(Clone)]
pub struct Smsc {
    pub addr: String,
    pub books: Arc<Mutex<Books>>,
    bucket: Arc<Mutex<(f64, Instant)>>,
    rate: f64,
    drop_after: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

impl Smsc {
    pub async fn spawn(rate: f64, drop_after: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let me = Self {
            addr: listener.local_addr().unwrap().to_string(),
            books: Arc::default(),
            bucket: Arc::new(Mutex::new((BURST, Instant::now()))),
            rate,
            drop_after: Arc::new(AtomicUsize::new(drop_after)),
            dropped: Arc::default(),
        };
        let s = me.clone();
        tokio::spawn(async move {
            while let Ok((c, _)) = listener.accept().await {
                tokio::spawn(s.clone().session(c));
            }
        });
        me
    }

    pub fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap()
    }

    async fn session(self, stream: TcpStream) {
        let mut f = Framed::new(stream, CommandCodec::new());
        let mut seq = 1_000_000u32;
        // Receipts sent on this connection, by sequence number.
        let mut sent: HashMap<u32, String> = HashMap::new();
        while let Some(Ok(c)) = f.next().await {
            let s = c.sequence_number();
            let mut out = Vec::new();
            match (c.id(), c.pdu()) {
                (CommandId::BindTransceiver, Some(Pdu::BindTransceiver(b))) => {
                    let ok = b.password.as_str() == PASSWORD;
                    if ok {
                        self.books().binds += 1;
                    }
                    out.push(Command::new(
                        CommandStatus::from(if ok { 0 } else { 0x0E }),
                        s,
                        BindTransceiverResp::builder().build(),
                    ));
                    if ok {
                        let again: Vec<String> = self.books().unacked.iter().cloned().collect();
                        for id in again {
                            seq += 1;
                            sent.insert(seq, id.clone());
                            out.push(receipt(seq, &id));
                        }
                    }
                }
                (CommandId::SubmitSm, Some(Pdu::SubmitSm(sm))) => {
                    let key = key_of(sm.tlvs());
                    let n = {
                        let mut b = self.books();
                        b.submits += 1;
                        b.submits
                    };
                    if n >= self.drop_after.load(Ordering::SeqCst)
                        && !self.dropped.swap(true, Ordering::SeqCst)
                    {
                        return; // drop the connection with this submit unanswered
                    }
                    // Submits 50 and 51 are throttled whatever the rate: at least two
                    // throttles, so both codes occur.
                    if !self.take_token() || n == 50 || n == 51 {
                        let code = {
                            let mut b = self.books();
                            b.throttled += 1;
                            if b.throttled.is_multiple_of(2) {
                                0x58
                            } else {
                                0x14
                            }
                        };
                        *self.books().throttle_codes.entry(code).or_insert(0) += 1;
                        out.push(Command::new(
                            CommandStatus::from(code),
                            s,
                            SubmitSmResp::builder().build(),
                        ));
                    } else {
                        let (id, first) = {
                            let mut b = self.books();
                            *b.per_key.entry(key.clone()).or_insert(0) += 1;
                            let next = format!("id{}", b.ids.len() + 1);
                            let first = !b.ids.contains_key(&key);
                            (b.ids.entry(key).or_insert(next).clone(), first)
                        };
                        out.push(Command::new(
                            CommandStatus::EsmeRok,
                            s,
                            SubmitSmResp::builder()
                                .message_id(COctetString::from_str(&id).unwrap())
                                .build(),
                        ));
                        if first {
                            seq += 1;
                            self.books().unacked.insert(id.clone());
                            sent.insert(seq, id.clone());
                            out.push(receipt(seq, &id));
                        }
                    }
                }
                (CommandId::EnquireLink, _) => {
                    out.push(Command::new(
                        CommandStatus::EsmeRok,
                        s,
                        Pdu::EnquireLinkResp,
                    ));
                }
                (CommandId::DeliverSmResp, _) => {
                    if u32::from(c.status()) == 0 {
                        let mut b = self.books();
                        b.receipts_acked += 1;
                        if let Some(id) = sent.remove(&s) {
                            b.unacked.remove(&id);
                        }
                    } else {
                        self.books().receipts_refused += 1;
                    }
                }
                (CommandId::Unbind, _) => {
                    self.books().unbinds += 1;
                    let _ = f
                        .send(Command::new(CommandStatus::EsmeRok, s, Pdu::UnbindResp))
                        .await;
                    return;
                }
                _ => {}
            }
            for c in out {
                if f.feed(c).await.is_err() {
                    return;
                }
            }
            if SinkExt::<Command>::flush(&mut f).await.is_err() {
                return;
            }
        }
    }
}

/// Burst of the SMSC's token bucket.
const BURST: f64 = 20.0;

impl Smsc {
    /// One token from the bucket, refilled at `rate` per second up to [`BURST`].
    fn take_token(&self) -> bool {
        let mut b = self.bucket.lock().unwrap();
        let now = Instant::now();
        b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * self.rate).min(BURST);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

fn key_of(tlvs: &[rusmpp::tlvs::Tlv]) -> String {
    tlvs.iter()
        .find(|t| t.tag() == TlvTag::Other(0x1400))
        .and_then(|t| match t.value() {
            Some(TlvValue::Other { value, .. }) => {
                Some(String::from_utf8_lossy(value.as_ref()).into_owned())
            }
            _ => None,
        })
        .unwrap_or_default()
}

fn receipt(seq: u32, id: &str) -> Command {
    let text = format!(
        "id:{id} sub:001 dlvrd:001 submit date:2612011200 done date:2612011201 stat:DELIVRD \
         err:000 text:"
    );
    Command::new(
        CommandStatus::EsmeRok,
        seq,
        DeliverSm::builder()
            .esm_class(EsmClass::from(0x04))
            .short_message(OctetString::from_slice(text.as_bytes()).unwrap())
            .build(),
    )
}
