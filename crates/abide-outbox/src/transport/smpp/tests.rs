//! The SMPP transport against a tiny SMSC built on rusmpp, over in-memory pipes and
//! tokio's paused clock: every timeout and keep-alive runs in virtual time.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abide_core::TransportFailure;
use futures::{SinkExt, StreamExt};
use rusmpp::pdus::{BindTransceiverResp, DeliverSm, SubmitSmResp};
use rusmpp::tlvs::TlvTag;
use rusmpp::tokio_codec::CommandCodec;
use rusmpp::types::{COctetString, OctetString};
use rusmpp::values::EsmClass;
use rusmpp::{Command, CommandId, CommandStatus, Pdu};
use serde_json::json;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;

use super::session::{ConnectFuture, Connector, Io};
use super::*;
use crate::credentials::StaticCredentials;
use crate::model::Request;
use crate::receipt::ReceiptState;
use crate::state::State;

mod bind;

/// Hands each connection's far end to the test; refuses while `refuse` is set.
#[derive(Debug)]
struct Pipes {
    tx: mpsc::UnboundedSender<DuplexStream>,
    refuse: Arc<AtomicBool>,
}

impl Connector for Pipes {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move {
            if self.refuse.load(Ordering::SeqCst) {
                return Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
            }
            let (ours, theirs) = tokio::io::duplex(1 << 16);
            self.tx
                .send(theirs)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::ConnectionRefused))?;
            Ok(Box::new(ours) as Box<dyn Io>)
        })
    }
}

/// What the SMSC does with a `submit_sm`: answer with this status (and a message id when
/// 0), answer with a `generic_nack`, or stay silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Status(u32),
    Nack(u32),
    Silent,
    /// Close the connection instead of answering.
    Drop,
}

type AnswerFn = dyn FnMut(usize) -> Answer + Send;

/// What the SMSC saw.
#[derive(Debug, Default)]
struct Seen {
    binds: Vec<(String, String, u8)>,
    /// Idempotency key (TLV 0x1400) of every submit_sm, in order.
    keys: Vec<String>,
    enquire_links: usize,
    unbinds: usize,
    /// Status of every deliver_sm_resp, in order.
    deliver_resps: Vec<u32>,
    most_outstanding: usize,
}

#[derive(Clone)]
struct Smsc {
    seen: Arc<Mutex<Seen>>,
    answer: Arc<Mutex<Box<AnswerFn>>>,
    answer_enquire_link: Arc<AtomicBool>,
    /// Answer each submit_sm this many milliseconds after it arrives (to observe the
    /// window: how many wait at once).
    delay_ms: Arc<AtomicUsize>,
    outstanding: Arc<AtomicUsize>,
    /// PDUs to push to the client (deliver_sm receipts), on the current connection.
    push: Arc<Mutex<Option<mpsc::UnboundedSender<Command>>>>,
    /// Answer every bind with this status when not 0 (else: 0x0E unless the password is
    /// "s3cret").
    bind_status: Arc<AtomicUsize>,
}

impl Smsc {
    fn new(answer: impl FnMut(usize) -> Answer + Send + 'static) -> Self {
        Self {
            seen: Arc::default(),
            answer: Arc::new(Mutex::new(Box::new(answer))),
            answer_enquire_link: Arc::new(AtomicBool::new(true)),
            delay_ms: Arc::new(AtomicUsize::new(0)),
            outstanding: Arc::new(AtomicUsize::new(0)),
            push: Arc::default(),
            bind_status: Arc::default(),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }

    /// Accept every connection the transport opens.
    fn serve(&self, mut conns: mpsc::UnboundedReceiver<DuplexStream>) {
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(c) = conns.recv().await {
                tokio::spawn(me.clone().session(c));
            }
        });
    }

    async fn session(self, stream: DuplexStream) {
        let mut f = Framed::new(stream, CommandCodec::new());
        let (push_tx, mut push_rx) = mpsc::unbounded_channel();
        *self.push.lock().unwrap() = Some(push_tx);
        let mut submits = 0usize;
        loop {
            let c = tokio::select! {
                c = f.next() => match c { Some(Ok(c)) => c, _ => return },
                Some(p) = push_rx.recv() => { let _ = f.send(p).await; continue; }
            };
            let seq = c.sequence_number();
            let reply = match (c.id(), c.pdu()) {
                (CommandId::BindTransceiver, Some(Pdu::BindTransceiver(b))) => {
                    self.seen().binds.push((
                        b.system_id.as_str().to_owned(),
                        b.password.as_str().to_owned(),
                        u8::from(b.interface_version),
                    ));
                    let ok = b.password.as_str() == "s3cret";
                    let status = match self.bind_status.load(Ordering::SeqCst) {
                        0 if ok => 0,
                        0 => 0x0E,
                        forced => forced as u32,
                    };
                    vec![Command::new(
                        CommandStatus::from(status),
                        seq,
                        BindTransceiverResp::builder().build(),
                    )]
                }
                (CommandId::SubmitSm, Some(Pdu::SubmitSm(s))) => {
                    let key = s
                        .tlvs()
                        .iter()
                        .find(|t| t.tag() == TlvTag::Other(message::IDEMPOTENCY_KEY_TLV))
                        .and_then(|t| match t.value() {
                            Some(rusmpp::tlvs::TlvValue::Other { value, .. }) => {
                                Some(String::from_utf8_lossy(value.as_ref()).into_owned())
                            }
                            _ => None,
                        })
                        .unwrap_or_default();
                    self.seen().keys.push(key);
                    let a = (self.answer.lock().unwrap())(submits);
                    submits += 1;
                    let now_out = self.outstanding.fetch_add(1, Ordering::SeqCst) + 1;
                    {
                        let mut seen = self.seen();
                        seen.most_outstanding = seen.most_outstanding.max(now_out);
                    }
                    let reply = match a {
                        Answer::Status(0) => Command::new(
                            CommandStatus::EsmeRok,
                            seq,
                            SubmitSmResp::builder()
                                .message_id(COctetString::from_str(&format!("m{seq}")).unwrap())
                                .build(),
                        ),
                        Answer::Status(st) => Command::new(
                            CommandStatus::from(st),
                            seq,
                            SubmitSmResp::builder().build(),
                        ),
                        Answer::Nack(st) => {
                            Command::new(CommandStatus::from(st), seq, Pdu::GenericNack)
                        }
                        Answer::Silent => continue,
                        Answer::Drop => return,
                    };
                    let delay = self.delay_ms.load(Ordering::SeqCst) as u64;
                    if delay == 0 {
                        self.outstanding.fetch_sub(1, Ordering::SeqCst);
                        vec![reply]
                    } else {
                        let push = self.push.lock().unwrap().clone().expect("connected");
                        let out = Arc::clone(&self.outstanding);
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(delay)).await;
                            out.fetch_sub(1, Ordering::SeqCst);
                            let _ = push.send(reply);
                        });
                        vec![]
                    }
                }
                (CommandId::EnquireLink, _) => {
                    self.seen().enquire_links += 1;
                    if self.answer_enquire_link.load(Ordering::SeqCst) {
                        vec![Command::new(
                            CommandStatus::EsmeRok,
                            seq,
                            Pdu::EnquireLinkResp,
                        )]
                    } else {
                        vec![]
                    }
                }
                (CommandId::Unbind, _) => {
                    self.seen().unbinds += 1;
                    let _ = f
                        .send(Command::new(CommandStatus::EsmeRok, seq, Pdu::UnbindResp))
                        .await;
                    return;
                }
                (CommandId::DeliverSmResp, _) => {
                    self.seen().deliver_resps.push(u32::from(c.status()));
                    vec![]
                }
                _ => vec![],
            };
            for r in reply {
                if f.send(r).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Push a standard-text delivery receipt for `message_id`.
    fn receipt(&self, seq: u32, message_id: &str, stat: &str) {
        let text = format!(
            "id:{message_id} sub:001 dlvrd:001 submit date:2612011200 done date:2612011201 \
             stat:{stat} err:000 text:hi"
        );
        let pdu = DeliverSm::builder()
            .esm_class(EsmClass::from(0x04))
            .short_message(OctetString::from_slice(text.as_bytes()).unwrap())
            .build();
        let push = self.push.lock().unwrap().clone().expect("connected");
        push.send(Command::new(CommandStatus::EsmeRok, seq, pdu))
            .unwrap();
    }
}

fn cfg(window: usize) -> SmppConfig {
    SmppConfig {
        address: "smsc.test:2775".into(),
        system_id: "abide".into(),
        password_env: Some("SMSC_PASSWORD".into()),
        system_type: String::new(),
        window,
        source_addr: Some("ACME".into()),
        source_addr_ton: 5,
        source_addr_npi: 0,
        dest_addr_ton: 1,
        dest_addr_npi: 1,
        enquire_link_interval: Duration::from_secs(30),
        pdu_timeout: Duration::from_secs(5),
        max_text_octets: 1530,
    }
}

fn transport(smsc: &Smsc, cfg: &SmppConfig) -> (Arc<SmppTransport>, Arc<AtomicBool>) {
    let (tx, rx) = mpsc::unbounded_channel();
    smsc.serve(rx);
    let refuse = Arc::new(AtomicBool::new(false));
    let creds = Arc::new(StaticCredentials::new().with("SMSC_PASSWORD", "s3cret"));
    let t = SmppTransport::with_connector(
        "smsc",
        cfg,
        creds,
        Box::new(Pipes {
            tx,
            refuse: Arc::clone(&refuse),
        }),
    );
    (Arc::new(t), refuse)
}

fn item(n: usize) -> Item {
    Item {
        id: format!("i{n}"),
        provider: "smsc".into(),
        current_provider: "smsc".into(),
        request: Request::post_json("/", json!({"to": "+15550100", "text": format!("hi {n}")})),
        idempotency_key: format!("key-{n}"),
        created_at: std::time::UNIX_EPOCH,
        state: State::InFlight,
        attempts: 0,
        window_attempts: 0,
        window_start: std::time::UNIX_EPOCH,
        next_attempt_at: std::time::UNIX_EPOCH,
        last_provider_code: None,
        reason: None,
        moved_by: None,
        lease_owner: Some("o".into()),
        lease_expires_at: None,
        message_id: None,
    }
}

fn smpp(r: &Response) -> Option<(u32, Option<&str>)> {
    match r {
        Response::Smpp {
            command_status,
            message_id,
        } => Some((*command_status, message_id.as_deref())),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn binds_once_and_answers_carry_status_and_message_id() {
    let smsc = Smsc::new(|n| match n {
        1 => Answer::Status(0x58),
        2 => Answer::Status(0x14),
        3 => Answer::Status(0x0B),
        _ => Answer::Status(0),
    });
    let (t, _) = transport(&smsc, &cfg(10));
    let mut got = Vec::new();
    for n in 0..5 {
        got.push(t.send(&item(n)).await);
    }
    assert_eq!(smpp(&got[0]).unwrap().0, 0);
    assert!(smpp(&got[0]).unwrap().1.is_some_and(|m| m.starts_with('m')));
    assert_eq!(smpp(&got[1]), Some((0x58, None)));
    assert_eq!(smpp(&got[2]), Some((0x14, None)));
    assert_eq!(smpp(&got[3]), Some((0x0B, None)));
    assert_eq!(smpp(&got[4]).unwrap().0, 0);
    let seen = smsc.seen();
    assert_eq!(seen.binds, vec![("abide".into(), "s3cret".into(), 0x34)]);
    assert_eq!(
        seen.keys,
        (0..5).map(|n| format!("key-{n}")).collect::<Vec<_>>()
    );
    drop(seen);
    assert_eq!(t.stats().binds, 1);
    // The password is never shown.
    assert!(!format!("{t:?}").contains("s3cret"));
}

#[tokio::test(start_paused = true)]
async fn a_slow_answer_times_out_as_an_unknown_outcome_and_arrives_late() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    smsc.delay_ms.store(6_000, Ordering::SeqCst);
    let (t, _) = transport(&smsc, &cfg(10));
    let started = tokio::time::Instant::now();
    let r = t.send(&item(0)).await;
    assert!(
        matches!(
            r,
            Response::Transport(TransportFailure::AfterSend { replay_safe: true })
        ),
        "{r:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(t.stats().pdu_timeouts, 1);
    // The same key goes out again and is accepted; the first answer, a second late,
    // matches nobody.
    smsc.delay_ms.store(0, Ordering::SeqCst);
    let r = t.send(&item(0)).await;
    assert_eq!(smpp(&r).map(|s| s.0), Some(0));
    assert_eq!(smsc.seen().keys, vec!["key-0", "key-0"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(t.stats().late_responses, 1);
}

#[tokio::test(start_paused = true)]
async fn a_silent_smsc_is_no_answer_either() {
    let smsc = Smsc::new(|n| {
        if n == 0 {
            Answer::Silent
        } else {
            Answer::Status(0)
        }
    });
    let (t, _) = transport(&smsc, &cfg(10));
    let r = t.send(&item(0)).await;
    assert!(matches!(
        r,
        Response::Transport(TransportFailure::AfterSend { replay_safe: true })
    ));
    assert_eq!(smpp(&t.send(&item(1)).await).map(|s| s.0), Some(0));
}

#[tokio::test(start_paused = true)]
async fn generic_nack_is_the_answer_and_a_nack_without_error_is_no_acceptance() {
    let smsc = Smsc::new(|n| {
        if n == 0 {
            Answer::Nack(0x58)
        } else {
            Answer::Nack(0)
        }
    });
    let (t, _) = transport(&smsc, &cfg(10));
    assert_eq!(smpp(&t.send(&item(0)).await), Some((0x58, None)));
    assert_eq!(smpp(&t.send(&item(1)).await), Some((0xFF, None)));
    assert_eq!(t.stats().generic_nacks, 2);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_bind_fails_outstanding_requests_as_unknown_and_binds_again() {
    let smsc = Smsc::new(|n| {
        if n == 1 {
            Answer::Drop
        } else {
            Answer::Status(0)
        }
    });
    let (t, _) = transport(&smsc, &cfg(10));
    assert_eq!(smpp(&t.send(&item(0)).await).map(|s| s.0), Some(0));
    let r = t.send(&item(1)).await;
    assert!(matches!(
        r,
        Response::Transport(TransportFailure::AfterSend { replay_safe: true })
    ));
    // While re-binding: either Connect at once (down) or a wait for the new bind.
    let mut answered = None;
    for _ in 0..20 {
        let r = t.send(&item(1)).await;
        if let Some((0, _)) = smpp(&r) {
            answered = Some(r);
            break;
        }
        assert!(
            matches!(r, Response::Transport(TransportFailure::Connect)),
            "{r:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(answered.is_some(), "bound again");
    let s = t.stats();
    assert_eq!((s.binds, s.connections_lost), (2, 1));
    assert_eq!(smsc.seen().binds.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn while_the_smsc_refuses_connections_sends_fail_at_once_as_connect() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    let (t, refuse) = transport(&smsc, &cfg(10));
    refuse.store(true, Ordering::SeqCst);
    let r = t.send(&item(0)).await;
    assert!(
        matches!(r, Response::Transport(TransportFailure::Connect)),
        "{r:?}"
    );
    assert!(t.stats().bind_failures >= 1);
    refuse.store(false, Ordering::SeqCst);
    // Reconnect backoff is at most 30 s; within a minute it binds and sends.
    let mut ok = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some((0, _)) = smpp(&t.send(&item(0)).await) {
            ok = true;
            break;
        }
    }
    assert!(ok);
}

/// A transport whose bind password is `password`.
#[tokio::test(start_paused = true)]
async fn at_most_window_submits_are_outstanding() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    smsc.delay_ms.store(100, Ordering::SeqCst);
    let (t, _) = transport(&smsc, &cfg(3));
    let sends: Vec<_> = (0..12)
        .map(|n| {
            let t = Arc::clone(&t);
            tokio::spawn(async move { t.send(&item(n)).await })
        })
        .collect();
    for s in sends {
        assert_eq!(smpp(&s.await.unwrap()).map(|x| x.0), Some(0));
    }
    assert_eq!(smsc.seen().most_outstanding, 3);
    assert_eq!(smsc.seen().keys.len(), 12);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_enquire_link_drops_the_session_and_binds_again() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    smsc.answer_enquire_link.store(false, Ordering::SeqCst);
    let (t, _) = transport(&smsc, &cfg(10));
    assert_eq!(smpp(&t.send(&item(0)).await).map(|s| s.0), Some(0));
    // 30 s to the first enquire_link, 5 s to give up on it, < 1 s to bind again.
    tokio::time::sleep(Duration::from_secs(36)).await;
    assert!(smsc.seen().enquire_links >= 1);
    let s = t.stats();
    assert_eq!((s.connections_lost, s.binds), (1, 2), "{s:?}");
    smsc.answer_enquire_link.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(t.stats().binds, 2, "answered keep-alives keep the bind");
}

#[tokio::test(start_paused = true)]
async fn receipts_are_acknowledged_only_once_stored() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    let (t, _) = transport(&smsc, &cfg(10));
    let inbox = t.receipts().expect("SMPP has receipts");
    let r = t.send(&item(0)).await;
    let mid = smpp(&r).unwrap().1.unwrap().to_owned();
    smsc.receipt(900, &mid, "DELIVRD");
    let got = inbox.lock().await.recv().await.unwrap();
    assert_eq!(
        (got.message_id.as_str(), got.state),
        (mid.as_str(), ReceiptState::Delivered)
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        smsc.seen().deliver_resps.is_empty(),
        "not answered before stored"
    );
    got.stored();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(smsc.seen().deliver_resps, vec![0]);
    // One dropped unstored is answered with a temporary error (the SMSC retries it).
    smsc.receipt(901, "m-unknown", "UNDELIV");
    let got = inbox.lock().await.recv().await.unwrap();
    drop(got);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(smsc.seen().deliver_resps, vec![0, 0x64]);
    assert_eq!(t.stats().receipts, 2);
    assert_eq!(t.stats().receipts_refused, 1);
}

#[tokio::test(start_paused = true)]
async fn close_unbinds_and_later_sends_fail_as_connect() {
    let smsc = Smsc::new(|_| Answer::Status(0));
    let (t, _) = transport(&smsc, &cfg(10));
    assert_eq!(smpp(&t.send(&item(0)).await).map(|s| s.0), Some(0));
    t.close().await;
    assert_eq!(smsc.seen().unbinds, 1);
    let r = t.send(&item(1)).await;
    assert!(matches!(r, Response::Transport(TransportFailure::Connect)));
    assert_eq!(t.stats().connections_lost, 0);
}
