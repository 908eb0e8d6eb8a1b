//! The fake SMSC over loopback, driven by a raw `rusmpp` client in tokio's paused time.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use abide_core::Clock;
use abide_fake::{
    spawn_listeners, Listeners, ProviderConfig, RunningProvider, SmppStats, IDEMPOTENCY_TLV,
};
use futures::{SinkExt, StreamExt};
use rusmpp::pdus::{BindReceiver, BindTransceiver, BindTransmitter, DeliverSmResp, SubmitSm};
use rusmpp::tlvs::{MessageSubmissionRequestTlvValue, TlvTag, TlvValue};
use rusmpp::tokio_codec::CommandCodec;
use rusmpp::types::{AnyOctetString, COctetString, OctetString};
use rusmpp::values::{InterfaceVersion, MessageState, RegisteredDelivery};
use rusmpp::{Command, CommandId, CommandStatus, Pdu};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

/// Wall and monotonic time from tokio's (paused) clock.
#[derive(Debug)]
struct TokioClock {
    epoch: SystemTime,
    base: tokio::time::Instant,
}

impl Clock for TokioClock {
    fn now(&self) -> SystemTime {
        self.epoch + (tokio::time::Instant::now() - self.base)
    }
    fn monotonic(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

async fn start(toml: &str) -> RunningProvider {
    start_with(toml, false).await
}

async fn start_with(toml: &str, http: bool) -> RunningProvider {
    let cfg = ProviderConfig::from_toml_str(toml).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(TokioClock {
        epoch: UNIX_EPOCH + Duration::from_secs(1_750_000_000),
        base: tokio::time::Instant::now(),
    });
    let any = Some("127.0.0.1:0".parse().unwrap());
    let listen = Listeners {
        http: if http { any } else { None },
        smpp: any,
    };
    spawn_listeners(cfg, clock, listen).await.unwrap()
}

/// Run `f` with tokio's paused clock held still (a `spawn_blocking` task inhibits
/// auto-advance, tokio#5115): the SMSC answers "instantly" in virtual time, instead of the
/// clock jumping to the next timer while its socket is being read. The hold ends after 10 s
/// of real time, so a missing answer ends in the caller's timeout, not a hang.
async fn still<F: Future>(f: F) -> F::Output {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let hold = tokio::task::spawn_blocking(move || {
        let _ = rx.recv_timeout(Duration::from_secs(10));
    });
    let out = f.await;
    drop(tx);
    let _ = hold.await;
    out
}

/// With the clock held, let the SMSC read until it has `n` submit_sm (bounded).
async fn read_submits(p: &RunningProvider, n: u64) -> Option<u64> {
    let read = || stats(p).pdus_received.get("submit_sm").copied();
    still(async {
        for _ in 0..1_000 {
            if read() == Some(n) {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    read()
}

fn stats(p: &RunningProvider) -> SmppStats {
    p.stats().smpp.unwrap()
}

struct Esme {
    io: Framed<TcpStream, CommandCodec>,
    seq: u32,
    /// Buffer sends until an explicit flush.
    pipelined: bool,
}

#[derive(Clone, Copy)]
enum Bind {
    Tx,
    Rx,
    Trx,
}

impl Esme {
    async fn connect(p: &RunningProvider) -> Self {
        let s = TcpStream::connect(p.smpp_addr().unwrap()).await.unwrap();
        Self {
            io: Framed::new(s, CommandCodec::new()),
            seq: 0,
            pipelined: false,
        }
    }

    /// Connect and bind; panics unless the bind succeeds.
    async fn bound(p: &RunningProvider, kind: Bind) -> Self {
        let mut e = Self::connect(p).await;
        assert_eq!(
            e.bind(kind, "demo", "demo-pw").await,
            CommandStatus::EsmeRok
        );
        e
    }

    async fn send(&mut self, pdu: impl Into<Pdu>) -> u32 {
        self.seq += 1;
        let seq = self.seq;
        let c = Command::new(CommandStatus::EsmeRok, seq, pdu);
        if self.pipelined {
            self.io.feed(c).await.unwrap();
        } else {
            self.io.send(c).await.unwrap();
        }
        seq
    }

    /// The next PDU already due, or `None` when the SMSC closed the connection (or sent
    /// nothing within 10 s of real time). Virtual time stands still meanwhile: to wait for
    /// a receipt or a slow answer, sleep first.
    async fn recv(&mut self) -> Option<Command> {
        let next = tokio::time::timeout(Duration::from_secs(60), self.io.next());
        match still(next).await {
            Ok(Some(Ok(c))) => Some(c),
            _ => None,
        }
    }

    async fn bind(&mut self, kind: Bind, system_id: &str, password: &str) -> CommandStatus {
        let sys = COctetString::from_str(system_id).unwrap();
        let pw = COctetString::from_str(password).unwrap();
        let v = InterfaceVersion::Smpp3_4;
        let seq = match kind {
            Bind::Tx => {
                let b = BindTransmitter::builder().system_id(sys).password(pw);
                self.send(b.interface_version(v).build()).await
            }
            Bind::Rx => {
                let b = BindReceiver::builder().system_id(sys).password(pw);
                self.send(b.interface_version(v).build()).await
            }
            Bind::Trx => {
                let b = BindTransceiver::builder().system_id(sys).password(pw);
                self.send(b.interface_version(v).build()).await
            }
        };
        let r = self.recv().await.unwrap();
        assert_eq!(r.sequence_number(), seq);
        assert!(r.id().is_response(), "{r:?}");
        r.status()
    }

    /// Send a submit_sm asking for a receipt; its sequence number.
    async fn submit(&mut self, key: Option<&str>, text: &str) -> u32 {
        let mut sm = SubmitSm::builder()
            .source_addr(COctetString::from_str("ABIDE").unwrap())
            .destination_addr(COctetString::from_str("15550100").unwrap())
            .registered_delivery(RegisteredDelivery::from(0x01))
            .short_message(OctetString::from_str(text).unwrap())
            .build();
        if let Some(k) = key {
            sm.push_tlv(MessageSubmissionRequestTlvValue::Other {
                tag: TlvTag::Other(IDEMPOTENCY_TLV),
                value: AnyOctetString::from_slice(k.as_bytes()),
            });
        }
        self.send(sm).await
    }

    /// Submit and wait for the answer: (status, message_id).
    async fn submit_wait(&mut self, key: Option<&str>, text: &str) -> (CommandStatus, String) {
        let seq = self.submit(key, text).await;
        let r = self.recv().await.unwrap();
        assert_eq!(r.sequence_number(), seq);
        submit_answer(&r)
    }
}

fn submit_answer(r: &Command) -> (CommandStatus, String) {
    match r.pdu() {
        Some(Pdu::SubmitSmResp(s)) => (r.status(), s.message_id().as_str().to_owned()),
        other => panic!("not a submit_sm_resp: {other:?}"),
    }
}

fn receipted_id(c: &Command) -> Option<String> {
    let Some(Pdu::DeliverSm(d)) = c.pdu() else {
        return None;
    };
    d.tlvs().iter().find_map(|t| match t.value() {
        Some(TlvValue::ReceiptedMessageId(id)) => Some(id.as_str().to_owned()),
        _ => None,
    })
}

const OPEN: &str = r#"
[limits]
key_rate = "1000/s"
account_rate = "1000/s"
key_concurrency = 64
"#;

#[tokio::test(start_paused = true)]
async fn bind_submit_repeat_and_one_receipt() {
    let p = start(OPEN).await;
    let mut e = Esme::bound(&p, Bind::Trx).await;
    let (status, id) = e
        .submit_wait(Some("item-1"), "Hello from abide, a long text")
        .await;
    assert_eq!(
        (status, id.as_str()),
        (CommandStatus::EsmeRok, "0000000001")
    );
    // The same key again is a repeat: same message_id.
    assert_eq!(
        e.submit_wait(Some("item-1"), "Hello from abide, a long text")
            .await,
        (CommandStatus::EsmeRok, id.clone())
    );
    // The receipt arrives after the delay (500 ms), once.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = e.recv().await.unwrap();
    assert_eq!(r.id(), CommandId::DeliverSm);
    assert_eq!(receipted_id(&r).as_deref(), Some(id.as_str()));
    let Some(Pdu::DeliverSm(d)) = r.pdu() else {
        unreachable!()
    };
    assert_eq!(u8::from(d.esm_class) & 0x3C, 0x04, "receipt bit");
    let text = String::from_utf8(d.short_message().to_vec()).unwrap();
    assert!(
        text.starts_with("id:0000000001 sub:001 dlvr:001 submit date:2506")
            && text.contains(" stat:DELIVRD err:000 text:Hello from abide, a "),
        "{text}"
    );
    assert_eq!(d.source_addr.as_str(), "15550100");
    e.io.send(Command::new(
        CommandStatus::EsmeRok,
        r.sequence_number(),
        DeliverSmResp::default(),
    ))
    .await
    .unwrap();
    // enquire_link still answered; no second receipt meanwhile.
    let seq = e.send(Pdu::EnquireLink).await;
    let r = e.recv().await.unwrap();
    assert_eq!(
        (r.id(), r.sequence_number()),
        (CommandId::EnquireLinkResp, seq)
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let s = stats(&p);
    assert_eq!((s.accepted, s.repeats), (1, 1));
    assert_eq!(s.repeats_by_key["item-1"], 1);
    assert_eq!(
        (s.receipts_sent, s.receipts_acknowledged, s.receipts_pending),
        (1, 1, 0)
    );
    assert_eq!((s.binds["transceiver"], s.sequence_reuses), (1, 0));
    assert_eq!(s.pdus_received["submit_sm"], 2);
    assert_eq!(s.responses_by_status["0x00000000"], 4);
    // unbind: answered, then closed.
    let seq = e.send(Pdu::Unbind).await;
    let r = e.recv().await.unwrap();
    assert_eq!((r.id(), r.sequence_number()), (CommandId::UnbindResp, seq));
    assert!(e.recv().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn wrong_credentials_and_unbound_submits_are_refused() {
    let p = start(OPEN).await;
    let mut e = Esme::connect(&p).await;
    assert_eq!(
        e.bind(Bind::Trx, "demo", "nope").await,
        CommandStatus::EsmeRinvpaswd
    );
    assert_eq!(
        e.bind(Bind::Tx, "nobody", "demo-pw").await,
        CommandStatus::EsmeRinvsysid
    );
    assert_eq!(
        e.submit_wait(None, "hi").await.0,
        CommandStatus::EsmeRinvbndsts
    );
    let mut rx = Esme::bound(&p, Bind::Rx).await;
    assert_eq!(
        rx.submit_wait(None, "hi").await.0,
        CommandStatus::EsmeRinvbndsts
    );
    assert_eq!(
        rx.bind(Bind::Rx, "demo", "demo-pw").await,
        CommandStatus::EsmeRalybnd
    );
    assert_eq!(stats(&p).accepted, 0);
}

#[tokio::test(start_paused = true)]
async fn over_the_rate_is_0x58_then_0x14_after_the_phase_changes() {
    let p = start(
        r#"
        [limits]
        key_rate = "2/s"
        account_rate = "1000/s"
        [[schedule]]
        at_request = 4
        smpp_status = 20
        "#,
    )
    .await;
    let mut e = Esme::bound(&p, Bind::Tx).await;
    assert_eq!(
        e.submit_wait(Some("a"), "1").await.0,
        CommandStatus::EsmeRok
    );
    assert_eq!(
        e.submit_wait(Some("b"), "2").await.0,
        CommandStatus::EsmeRok
    );
    assert_eq!(
        e.submit_wait(Some("c"), "3").await.0,
        CommandStatus::EsmeRthrottled
    );
    assert_eq!(
        e.submit_wait(Some("c"), "3").await.0,
        CommandStatus::EsmeRmsgqful
    );
    tokio::time::advance(Duration::from_millis(500)).await;
    let (status, id) = e.submit_wait(Some("c"), "3").await;
    assert_eq!(
        (status, id.as_str()),
        (CommandStatus::EsmeRok, "0000000003")
    );
    let s = stats(&p);
    assert_eq!((s.accepted, s.throttled, s.repeats), (3, 2, 0));
    assert_eq!(s.responses_by_status["0x00000058"], 1);
    assert_eq!(s.responses_by_status["0x00000014"], 1);
}

#[tokio::test(start_paused = true)]
async fn throttle_fraction_at_random_answers_0x58_whatever_the_rate() {
    // No limit in reach: a share of submits is answered ESME_RTHROTTLED all the same, at
    // random from the seed, and the same seed picks the same submits.
    async fn refused(seed: u64) -> Vec<u32> {
        let p = start(&format!(
            "{OPEN}\n[[schedule]]\nthrottle_fraction = 0.1\nthrottle_spread = \"random\"\n\
             throttle_seed = {seed}\n"
        ))
        .await;
        let mut e = Esme::bound(&p, Bind::Tx).await;
        let mut refused = Vec::new();
        for i in 1..=300 {
            let (status, _) = e.submit_wait(Some(&format!("k{i}")), "x").await;
            match status {
                CommandStatus::EsmeRthrottled => refused.push(i),
                s => assert_eq!(s, CommandStatus::EsmeRok, "submit {i}"),
            }
        }
        let s = stats(&p);
        assert_eq!(s.throttled, u64::try_from(refused.len()).unwrap());
        assert_eq!(s.accepted + s.throttled, 300);
        refused
    }
    let a = refused(5).await;
    // 30 expected, standard deviation 5.2.
    assert!((15..=45).contains(&a.len()), "{} of 300", a.len());
    assert_eq!(refused(5).await, a);
    assert_ne!(refused(6).await, a);
}

#[tokio::test(start_paused = true)]
async fn a_window_over_the_concurrency_limit_gets_queue_full() {
    let p = start(
        r#"
        [limits]
        key_rate = "1000/s"
        account_rate = "1000/s"
        key_concurrency = 2
        [behaviour]
        slow_ms = 1000
        "#,
    )
    .await;
    let mut e = Esme::bound(&p, Bind::Tx).await;
    // Three PDUs in one write: the SMSC reads them together, a window of 3.
    e.pipelined = true;
    let seqs = [
        e.submit(Some("a"), "1").await,
        e.submit(Some("b"), "2").await,
        e.submit(Some("c"), "3").await,
    ];
    SinkExt::<Command>::flush(&mut e.io).await.unwrap();
    assert_eq!(read_submits(&p, 3).await, Some(3));
    // Every answer is slow, the refusal too: nothing before a second.
    assert!(
        tokio::time::timeout(Duration::from_millis(900), e.io.next())
            .await
            .is_err(),
        "nothing before the slow delay"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = e.recv().await.unwrap();
        got.push((r.sequence_number(), r.status()));
    }
    got.sort_unstable_by_key(|g| g.0);
    assert_eq!(
        got,
        [
            (seqs[0], CommandStatus::EsmeRok),
            (seqs[1], CommandStatus::EsmeRok),
            (seqs[2], CommandStatus::EsmeRmsgqful)
        ]
    );
    // The slots are free again (the answer itself is slow).
    e.pipelined = false;
    let seq = e.submit(Some("c"), "3").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = e.recv().await.unwrap();
    assert_eq!(
        (r.sequence_number(), r.status()),
        (seq, CommandStatus::EsmeRok)
    );
}

#[tokio::test(start_paused = true)]
async fn garbage_gets_generic_nack_and_a_huge_length_closes() {
    let p = start(OPEN).await;
    let mut e = Esme::bound(&p, Bind::Tx).await;
    // A submit_sm whose body is 5 bytes of 0xFF (no NUL-terminated strings): nack, go on.
    let mut raw = Vec::new();
    raw.extend_from_slice(&21u32.to_be_bytes());
    raw.extend_from_slice(&4u32.to_be_bytes());
    raw.extend_from_slice(&0u32.to_be_bytes());
    raw.extend_from_slice(&77u32.to_be_bytes());
    raw.extend_from_slice(&[0xFF; 5]);
    e.io.get_mut().write_all(&raw).await.unwrap();
    let r = e.recv().await.unwrap();
    assert_eq!((r.id(), r.sequence_number()), (CommandId::GenericNack, 77));
    // An unknown command: generic_nack ESME_RINVCMDID.
    let mut raw = Vec::new();
    raw.extend_from_slice(&16u32.to_be_bytes());
    raw.extend_from_slice(&0x0000_1234u32.to_be_bytes());
    raw.extend_from_slice(&0u32.to_be_bytes());
    raw.extend_from_slice(&78u32.to_be_bytes());
    e.io.get_mut().write_all(&raw).await.unwrap();
    let r = e.recv().await.unwrap();
    assert_eq!(
        (r.id(), r.status(), r.sequence_number()),
        (CommandId::GenericNack, CommandStatus::EsmeRinvcmdid, 78)
    );
    // Still usable.
    assert_eq!(
        e.submit_wait(Some("a"), "1").await.0,
        CommandStatus::EsmeRok
    );
    // command_length of 1 MiB: refused before reading, connection closed.
    let mut raw = Vec::new();
    raw.extend_from_slice(&(1u32 << 20).to_be_bytes());
    raw.extend_from_slice(&4u32.to_be_bytes());
    raw.extend_from_slice(&0u32.to_be_bytes());
    raw.extend_from_slice(&79u32.to_be_bytes());
    e.io.get_mut().write_all(&raw).await.unwrap();
    let r = e.recv().await.unwrap();
    assert_eq!(
        (r.id(), r.status(), r.sequence_number()),
        (CommandId::GenericNack, CommandStatus::EsmeRinvcmdlen, 79)
    );
    assert!(e.recv().await.is_none(), "closed");
    let s = stats(&p);
    assert_eq!(
        (s.pdus_received["invalid"], s.pdus_received["0x00001234"]),
        (2, 1)
    );
    assert_eq!(s.connections_dropped["bad_command_length"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_connection_loses_the_answer_and_the_resend_is_a_repeat() {
    let p = start(&format!("{OPEN}\n[behaviour]\ndrop_after_pdus = 3\n")).await;
    let mut e = Esme::bound(&p, Bind::Trx).await;
    let (_, first) = e.submit_wait(Some("k1"), "one").await;
    e.submit(Some("k2"), "two").await;
    assert!(
        e.recv().await.is_none(),
        "third PDU: acted on, unanswered, closed"
    );
    // Re-bind and resend what was unanswered: the SMSC counts a repeat, same id.
    let mut e = Esme::bound(&p, Bind::Trx).await;
    let (status, second) = e.submit_wait(Some("k2"), "two").await;
    assert_eq!(status, CommandStatus::EsmeRok);
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("0000000001", "0000000002")
    );
    // Both receipts reach the new bind, each once.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut got = Vec::new();
    while got.len() < 2 {
        let r = e.recv().await.unwrap();
        got.push(receipted_id(&r).unwrap());
    }
    got.sort();
    assert_eq!(got, ["0000000001", "0000000002"]);
    let s = stats(&p);
    assert_eq!((s.accepted, s.repeats), (2, 1));
    assert_eq!(s.connections_dropped["drop_after"], 1);
}

#[tokio::test(start_paused = true)]
async fn unacknowledged_receipts_go_to_the_next_receiver() {
    let p = start(OPEN).await;
    let mut tx = Esme::bound(&p, Bind::Tx).await;
    let (_, id) = tx.submit_wait(None, "hi").await;
    let mut rx = Esme::bound(&p, Bind::Rx).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = rx.recv().await.unwrap();
    assert_eq!(receipted_id(&r).as_deref(), Some(id.as_str()));
    drop(rx); // never acknowledged
    let mut rx = Esme::bound(&p, Bind::Rx).await;
    let r = rx.recv().await.unwrap();
    assert_eq!(receipted_id(&r).as_deref(), Some(id.as_str()));
    let s = stats(&p);
    assert_eq!((s.receipts_sent, s.receipts_pending), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn bind_refusal_and_drop_all_on_a_schedule() {
    let p = start(&format!(
        "{OPEN}\n[[schedule]]\nat_secs = 10\ndrop_connections = true\n\
         [[schedule]]\nat_secs = 10\nbind_refusal = true\n\
         [[schedule]]\nat_secs = 20\nbind_refusal = false\n"
    ))
    .await;
    let mut e = Esme::bound(&p, Bind::Trx).await;
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(e.recv().await.is_none(), "dropped at 10 s");
    let mut e = Esme::connect(&p).await;
    assert_eq!(
        e.bind(Bind::Trx, "demo", "demo-pw").await,
        CommandStatus::EsmeRbindfail
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        e.bind(Bind::Trx, "demo", "demo-pw").await,
        CommandStatus::EsmeRok
    );
    assert_eq!(stats(&p).connections_dropped["drop_all"], 1);
}

#[tokio::test]
async fn http_stats_show_the_smpp_counts() {
    let p = start_with(OPEN, true).await;
    let mut e = Esme::bound(&p, Bind::Tx).await;
    e.submit_wait(Some("a"), "1").await;
    let body: serde_json::Value = reqwest::get(format!("{}/_stats", p.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["smpp"]["accepted"], 1);
    assert_eq!(body["smpp"]["pdus_received"]["bind_transmitter"], 1);
    assert_eq!(body["requests"], 0, "HTTP counters stay HTTP");
}

#[tokio::test(start_paused = true)]
async fn the_window_cap_stops_reading_and_connections_are_bounded() {
    let p = start(&format!(
        "{OPEN}\n[behaviour]\nslow_ms = 1000\n\
         [smpp]\nwindow_cap = 2\nmax_connections = 2\nbind_timeout_secs = 30\n"
    ))
    .await;
    let mut e = Esme::bound(&p, Bind::Tx).await;
    e.pipelined = true;
    for k in ["a", "b", "c"] {
        e.submit(Some(k), k).await;
    }
    SinkExt::<Command>::flush(&mut e.io).await.unwrap();
    e.pipelined = false;
    // Clock held: let the SMSC read what it will.
    assert_eq!(read_submits(&p, 2).await, Some(2));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        read_submits(&p, 3).await,
        Some(2),
        "the third waits in the socket"
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    for _ in 0..2 {
        assert_eq!(e.recv().await.unwrap().status(), CommandStatus::EsmeRok);
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(e.recv().await.unwrap().status(), CommandStatus::EsmeRok);
    assert_eq!(stats(&p).accepted, 3);

    // A second connection may stay unbound until the bind timeout; a third is refused.
    let mut idle = Esme::connect(&p).await;
    let seq = idle.send(Pdu::EnquireLink).await;
    let r = idle.recv().await.unwrap();
    assert_eq!(
        (r.id(), r.sequence_number()),
        (CommandId::EnquireLinkResp, seq)
    );
    let mut third = Esme::connect(&p).await;
    assert!(third.recv().await.is_none(), "over max_connections");
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert!(idle.recv().await.is_none(), "bind timeout");
    let s = stats(&p);
    assert_eq!((s.connections, s.connections_refused), (3, 1));
    assert_eq!(s.connections_dropped["bind_timeout"], 1);
}

#[tokio::test(start_paused = true)]
async fn without_the_tlv_repeats_are_counted_by_content_and_accepted() {
    let p = start(OPEN).await;
    let mut e = Esme::bound(&p, Bind::Tx).await;
    let (_, a) = e.submit_wait(None, "same text").await;
    let (_, b) = e.submit_wait(None, "same text").await;
    e.seq = 1; // the next request reuses sequence number 2
    let (_, c) = e.submit_wait(None, "other text").await;
    assert_eq!(
        [a.as_str(), b.as_str(), c.as_str()],
        ["0000000001", "0000000002", "0000000003"]
    );
    let s = stats(&p);
    assert_eq!((s.accepted, s.repeats, s.content_repeats), (3, 0, 1));
    assert_eq!(s.sequence_reuses, 1);
    let (key, n) = s.repeats_by_key.iter().next().unwrap();
    assert!(key.starts_with("ABIDE>15550100#"), "{key}");
    assert_eq!(*n, 1);
    // An empty key TLV is refused, not ignored (the retry would be accepted twice).
    assert_eq!(
        e.submit_wait(Some(""), "x").await.0,
        CommandStatus::EsmeRinvtlvval
    );
}

/// The gates in Redis (real time there, so a rate no test outlasts): skipped, printing
/// `SKIPPED:`, without a Redis on 127.0.0.1:6379 unless `ABIDE_REQUIRE_SERVICES=1`.
#[tokio::test]
async fn redis_gates_limit_smpp_binds_too() {
    use std::hash::BuildHasher;
    let prefix = format!(
        "abide:test:smpp:{:016x}",
        std::hash::RandomState::new().hash_one(std::process::id())
    );
    let toml = format!(
        "redis_url = \"redis://127.0.0.1:6379\"\nredis_prefix = \"{prefix}\"\n\
         [limits]\nkey_rate = \"2/1h\"\naccount_rate = \"1000/s\"\n"
    );
    let cfg = ProviderConfig::from_toml_str(&toml).unwrap();
    let listen = Listeners {
        http: None,
        smpp: Some("127.0.0.1:0".parse().unwrap()),
    };
    let p = match spawn_listeners(cfg, Arc::new(abide_core::SystemClock), listen).await {
        Ok(p) => p,
        Err(e) if std::env::var("ABIDE_REQUIRE_SERVICES").as_deref() != Ok("1") => {
            println!("SKIPPED: redis_gates_limit_smpp_binds_too: no Redis ({e})");
            return;
        }
        Err(e) => panic!("ABIDE_REQUIRE_SERVICES=1 but Redis is unreachable: {e}"),
    };
    let mut e = Esme::bound(&p, Bind::Tx).await;
    assert_eq!(
        e.submit_wait(Some("a"), "1").await.0,
        CommandStatus::EsmeRok
    );
    assert_eq!(
        e.submit_wait(Some("b"), "2").await.0,
        CommandStatus::EsmeRok
    );
    assert_eq!(
        e.submit_wait(Some("c"), "3").await.0,
        CommandStatus::EsmeRthrottled
    );
    assert_eq!(
        e.submit_wait(Some("a"), "1").await,
        (CommandStatus::EsmeRok, "0000000001".into())
    );
    assert_eq!(stats(&p).repeats, 1);
}

#[tokio::test(start_paused = true)]
async fn receipts_report_the_scheduled_outcome() {
    let p = start(&format!(
        "{OPEN}\n[[schedule]]\nat_request = 2\nreceipt_state = \"undeliverable\"\n"
    ))
    .await;
    let mut e = Esme::bound(&p, Bind::Trx).await;
    let (_, ok) = e.submit_wait(Some("a"), "first").await;
    let (_, bad) = e.submit_wait(Some("b"), "second").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let r = e.recv().await.unwrap();
        let Some(Pdu::DeliverSm(d)) = r.pdu() else {
            panic!("{r:?}")
        };
        let text = String::from_utf8(d.short_message().to_vec()).unwrap();
        let state = d.tlvs().iter().find_map(|t| match t.value() {
            Some(TlvValue::MessageState(s)) => Some(*s),
            _ => None,
        });
        seen.push((receipted_id(&r).unwrap(), state, text));
    }
    seen.sort();
    assert_eq!(
        (seen[0].0.as_str(), seen[1].0.as_str()),
        (ok.as_str(), bad.as_str())
    );
    assert_eq!(seen[0].1, Some(MessageState::Delivered));
    assert!(
        seen[0].2.contains(" stat:DELIVRD err:000 text:first"),
        "{}",
        seen[0].2
    );
    assert_eq!(seen[1].1, Some(MessageState::Undeliverable));
    assert!(seen[1].2.contains(" dlvr:000 "), "{}", seen[1].2);
    assert!(
        seen[1].2.contains(" stat:UNDELIV err:001 text:second"),
        "{}",
        seen[1].2
    );
}

/// A long message in the `message_payload` TLV with an empty `short_message` is accepted,
/// counted, and receipted quoting its start; with a `short_message` too it is refused
/// (SMPP 3.4 §5.3.2.32).
#[tokio::test(start_paused = true)]
async fn a_long_message_in_message_payload_is_accepted_counted_and_receipted() {
    use rusmpp::values::MessagePayload;
    let p = start(OPEN).await;
    let mut e = Esme::bound(&p, Bind::Trx).await;
    let text = format!("Long one: {}", "x".repeat(690));
    let long = |short: &str| {
        let mut sm = SubmitSm::builder()
            .source_addr(COctetString::from_str("ABIDE").unwrap())
            .destination_addr(COctetString::from_str("15550100").unwrap())
            .registered_delivery(RegisteredDelivery::from(0x01))
            .short_message(OctetString::from_str(short).unwrap())
            .build();
        sm.push_tlv(MessageSubmissionRequestTlvValue::MessagePayload(
            MessagePayload::new(AnyOctetString::from_slice(text.as_bytes())),
        ));
        sm
    };
    let seq = e.send(long("")).await;
    let r = e.recv().await.unwrap();
    assert_eq!(r.sequence_number(), seq);
    let (status, id) = submit_answer(&r);
    assert_eq!(status, CommandStatus::EsmeRok);
    let seq = e.send(long("also here")).await;
    let r = e.recv().await.unwrap();
    assert_eq!(r.sequence_number(), seq);
    assert_eq!(submit_answer(&r).0, CommandStatus::EsmeRinvmsglen);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = e.recv().await.unwrap();
    assert_eq!(receipted_id(&r).as_deref(), Some(id.as_str()));
    let Some(Pdu::DeliverSm(d)) = r.pdu() else {
        unreachable!()
    };
    let receipt = String::from_utf8(d.short_message().to_vec()).unwrap();
    assert!(receipt.ends_with("text:Long one: xxxxxxxxxx"), "{receipt}");
    let s = stats(&p);
    assert_eq!((s.accepted, s.long_messages), (1, 1), "{s:?}");
}
