//! Load on the fake SMSC: one transceiver bind submitting N messages with W outstanding,
//! against an in-process SMSC with no limits. Prints submit_sm/s.
//!
//! `cargo run --release -p abide-fake --example smpp_load -- 20000 64`

#![allow(clippy::unwrap_used, missing_docs)]

use abide_core::{Clock, SystemClock};
use abide_fake::{spawn_listeners, Listeners, ProviderConfig, IDEMPOTENCY_TLV};
use futures::{SinkExt, StreamExt};
use rusmpp::pdus::{BindTransceiver, SubmitSm};
use rusmpp::tlvs::{MessageSubmissionRequestTlvValue, TlvTag};
use rusmpp::tokio_codec::CommandCodec;
use rusmpp::types::{AnyOctetString, COctetString, OctetString};
use rusmpp::{Command, CommandStatus, Pdu};
use std::str::FromStr;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(20_000, |a| a.parse().unwrap());
    let window: u32 = args.next().map_or(64, |a| a.parse().unwrap());
    let cfg = ProviderConfig::from_toml_str(
        "[limits]\nkey_rate = \"1000000/s\"\naccount_rate = \"1000000/s\"\n\
         key_concurrency = 100000\n[smpp]\nreceipts = \"never\"\n",
    )
    .unwrap();
    let p = spawn_listeners(
        cfg,
        Arc::new(SystemClock),
        Listeners {
            http: None,
            smpp: Some("127.0.0.1:0".parse().unwrap()),
        },
    )
    .await
    .unwrap();
    let s = TcpStream::connect(p.smpp_addr().unwrap()).await.unwrap();
    s.set_nodelay(true).unwrap();
    let mut io = Framed::new(s, CommandCodec::new());
    let bind = BindTransceiver::builder()
        .system_id(COctetString::from_str("demo").unwrap())
        .password(COctetString::from_str("demo-pw").unwrap())
        .build();
    io.send(Command::new(CommandStatus::EsmeRok, 1, bind))
        .await
        .unwrap();
    let r = io.next().await.unwrap().unwrap();
    assert_eq!(r.status(), CommandStatus::EsmeRok);
    let submit = |i: u32| {
        let mut sm = SubmitSm::builder()
            .source_addr(COctetString::from_str("ABIDE").unwrap())
            .destination_addr(COctetString::from_str("15550100").unwrap())
            .short_message(OctetString::from_str("load test").unwrap())
            .build();
        sm.push_tlv(MessageSubmissionRequestTlvValue::Other {
            tag: TlvTag::Other(IDEMPOTENCY_TLV),
            value: AnyOctetString::from_vec(format!("load-{i}").into_bytes()),
        });
        Command::new(CommandStatus::EsmeRok, i + 2, Pdu::SubmitSm(sm))
    };
    let t0 = SystemClock.monotonic();
    let (mut sent, mut answered) = (0u32, 0u32);
    while answered < n {
        while sent < n && sent - answered < window {
            io.feed(submit(sent)).await.unwrap();
            sent += 1;
        }
        SinkExt::<Command>::flush(&mut io).await.unwrap();
        let r = io.next().await.unwrap().unwrap();
        assert_eq!(r.status(), CommandStatus::EsmeRok);
        answered += 1;
    }
    let secs = (SystemClock.monotonic() - t0).as_secs_f64();
    let s = p.stats().smpp.unwrap();
    assert_eq!((s.accepted, s.repeats), (u64::from(n), 0));
    println!(
        "{n} submit_sm, window {window}: {secs:.3} s, {:.0}/s",
        f64::from(n) / secs
    );
}
