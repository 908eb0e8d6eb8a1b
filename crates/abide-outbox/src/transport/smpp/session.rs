//! The connection task: connect, `bind_transceiver`, serve the bound session (write the
//! senders' PDUs, match responses to requests by sequence number, answer the SMSC's
//! requests, keep the link alive with `enquire_link`), and when the session ends, connect
//! again with backoff; `unbind` on shutdown.
//!
//! One task owns the socket, so reads and writes never race; senders reach it through a
//! channel and wait for their answer on a oneshot ([`super::link::Bound`]).

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Backoff, Jitter};
use futures::stream::FuturesUnordered;
use futures::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rusmpp::pdus::{BindTransceiver, DeliverSmResp};
use rusmpp::tokio_codec::CommandCodec;
use rusmpp::types::COctetString;
use rusmpp::values::{InterfaceVersion, Npi, Ton};
use rusmpp::{Command, CommandId, CommandStatus, Pdu};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{sleep, sleep_until, timeout, Instant};
use tokio_util::codec::Framed;

use super::config::SmppConfig;
use super::link::{Bound, Counters, Link, Reply, Sequence};
use super::receipt::{self, Inbound};
use crate::credentials::CredentialSource;
use crate::receipt::InboundReceipt;

/// Largest PDU read (a `deliver_sm` with a `message_payload` TLV may approach 64 KiB).
const MAX_PDU_LEN: usize = 70 * 1024;
/// PDUs written per flush at most.
const MAX_BATCH: usize = 64;
/// `ESME_RX_T_APPN`: the answer to a receipt we could not store (the SMSC retries it).
const TEMPORARY_APP_ERROR: u32 = 0x64;
/// `ESME_RINVCMDID`: the answer to a request we do not serve.
const INVALID_COMMAND_ID: u32 = 0x03;
/// First reconnect delay ceiling, and the longest delay between attempts.
const RECONNECT: Backoff = Backoff {
    base: Duration::from_millis(500),
    cap: Duration::from_secs(30),
    jitter: Jitter::Full,
};
/// Shortest delay between two connection attempts.
const MIN_RECONNECT_DELAY: Duration = Duration::from_millis(100);
/// `ESME_RINVSYSTYP` (SMPP 3.4 §5.1.3): the bind's `system_type` is not accepted.
const ESME_RINVSYSTYP: u32 = 0x53;
/// Consecutive `ESME_RBINDFAIL` answers before the bind is given up for this run: the
/// code says only "bind failed" (an SMSC may send it for a wrong login, or for a moment
/// of trouble), so it is retried, slowly, a few times.
const MAX_BIND_FAILS: u32 = 3;
/// The delay before binding again after the n-th `ESME_RBINDFAIL`: 10 s, 20 s, ...
/// (at most 60 s), never the quick reconnect of a dropped connection.
const BIND_FAIL_DELAY: Duration = Duration::from_secs(10);

/// A byte stream to an SMSC.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A future returned by [`Connector::connect`].
pub(crate) type ConnectFuture<'a> =
    Pin<Box<dyn Future<Output = io::Result<Box<dyn Io>>> + Send + 'a>>;

/// Opens byte streams to the SMSC: TCP in production, in-memory pipes in tests.
pub(crate) trait Connector: fmt::Debug + Send + Sync {
    fn connect(&self) -> ConnectFuture<'_>;
}

/// TCP to `host:port`, with Nagle off (PDUs are small and latency-bound).
#[derive(Debug)]
pub(crate) struct Tcp(pub(crate) String);

impl Connector for Tcp {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move {
            let s = tokio::net::TcpStream::connect(self.0.as_str()).await?;
            s.set_nodelay(true)?;
            Ok(Box::new(s) as Box<dyn Io>)
        })
    }
}

/// Everything the connection task and the senders share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) cfg: SmppConfig,
    pub(crate) link: watch::Sender<Link>,
    pub(crate) seq: Sequence,
    pub(crate) counters: Counters,
    pub(crate) receipts: mpsc::Sender<InboundReceipt>,
    pub(crate) closing: watch::Sender<bool>,
    pub(crate) credentials: Arc<dyn CredentialSource>,
    pub(crate) connector: Box<dyn Connector>,
    /// Set when a bind was refused for good ([`refusal`]): no bind is tried again this
    /// run; the reason names the field to fix.
    pub(crate) suspended: std::sync::OnceLock<String>,
}

/// The field a `bind_transceiver_resp` status blames, when it means no later bind with
/// the same settings can succeed (SMPP 3.4 §5.1.3): `ESME_RINVPASWD` the password,
/// `ESME_RINVSYSID` the `system_id`, `ESME_RINVSYSTYP` the `system_type`.
pub(crate) fn permanent_refusal(status: u32) -> Option<&'static str> {
    use abide_core::classify::smpp::{ESME_RINVPASWD, ESME_RINVSYSID};
    match status {
        ESME_RINVPASWD => Some("password_env"),
        ESME_RINVSYSID => Some("system_id"),
        ESME_RINVSYSTYP => Some("system_type"),
        _ => None,
    }
}

/// Why binding stops for this run after `e` (the `bind_fails`-th consecutive
/// `ESME_RBINDFAIL` counted), naming the field; `None` while it is worth trying again.
fn refusal(cfg: &SmppConfig, e: &BindError, bind_fails: u32) -> Option<String> {
    let code = match e {
        BindError::Refused(code) => code,
        // Never sent: the SMSC would refuse it every time.
        BindError::Password => {
            return Some(format!(
                "{e}: fix the credential named by password_env; not binding this run"
            ))
        }
        _ => return None,
    };
    let field = match permanent_refusal(*code) {
        Some(f) => f,
        None if *code == abide_core::classify::smpp::ESME_RBINDFAIL
            && bind_fails >= MAX_BIND_FAILS =>
        {
            return Some(format!(
                "{e} {bind_fails} times in a row: check system_id {:?}, the password \
                 (password_env) and system_type with the SMSC; not binding again this run",
                cfg.system_id
            ))
        }
        None => return None,
    };
    let what = match field {
        "password_env" => format!(
            "the password (from the variable {}) is wrong",
            cfg.password_env
                .as_deref()
                .unwrap_or("<none: password_env is unset>")
        ),
        "system_id" => format!("system_id {:?} is not known to the SMSC", cfg.system_id),
        _ => format!("system_type {:?} is not accepted", cfg.system_type),
    };
    Some(format!(
        "{e}: {what}; fix {field} in the providers file or the credential; not binding again \
         this run"
    ))
}

type Conn = Framed<Box<dyn Io>, CommandCodec>;

/// Why a bind failed.
#[derive(Debug)]
enum BindError {
    Io(io::Error),
    Timeout(&'static str),
    Refused(u32),
    Closed,
    Password,
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::Io(e) => write!(f, "{e}"),
            BindError::Timeout(what) => write!(f, "no {what} within pdu_timeout"),
            BindError::Refused(code) => {
                let name = abide_core::classify::smpp::name(*code)
                    .or((*code == ESME_RINVSYSTYP).then_some("ESME_RINVSYSTYP"))
                    .unwrap_or("unrecognised");
                write!(f, "bind_transceiver_resp 0x{code:02x} ({name})")
            }
            BindError::Closed => f.write_str("the SMSC closed the connection"),
            BindError::Password => write!(
                f,
                "the password is longer than {} characters (SMPP 3.4 §4.1.1)",
                super::config::MAX_PASSWORD_LEN
            ),
        }
    }
}

/// How a bound session ended.
enum End {
    /// We unbound (shutdown).
    Unbound,
    /// It was lost: dropped, unbound by the SMSC, unanswered keep-alive, a broken PDU.
    Lost(String),
}

/// Connect, bind, serve, and again, until closed.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut closing = shared.closing.subscribe();
    let mut rng = StdRng::from_os_rng();
    let mut failures: u32 = 0;
    // Consecutive ESME_RBINDFAIL answers.
    let mut bind_fails: u32 = 0;
    loop {
        if *closing.borrow() {
            break;
        }
        shared.link.send_replace(Link::Connecting);
        let bound = tokio::select! {
            r = bind(&shared) => r,
            _ = closing.changed() => break,
        };
        match bound {
            Ok(conn) => {
                failures = 0;
                bind_fails = 0;
                Counters::bump(&shared.counters.binds);
                tracing::info!(provider = %shared.name, address = %shared.cfg.address,
                    "SMPP bound (bind_transceiver)");
                let (tx, rx) = mpsc::channel(shared.cfg.window * 2 + 16);
                let b = Arc::new(Bound::new(tx));
                shared.link.send_replace(Link::Bound(Arc::clone(&b)));
                let end = serve(&shared, conn, &b, rx, &mut closing).await;
                // Whoever still waits learns the outcome is unknown (resent with its key).
                shared.link.send_replace(Link::Down);
                b.abandon_all();
                match end {
                    End::Unbound => break,
                    End::Lost(why) => {
                        Counters::bump(&shared.counters.connections_lost);
                        tracing::warn!(provider = %shared.name, reason = %why,
                            "SMPP session lost; binding again");
                    }
                }
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let bind_fail = matches!(e,
                    BindError::Refused(c) if c == abide_core::classify::smpp::ESME_RBINDFAIL);
                bind_fails = if bind_fail { bind_fails + 1 } else { 0 };
                Counters::bump(&shared.counters.bind_failures);
                // Never the password: only the code, the variable's name at most.
                if let Some(why) = refusal(&shared.cfg, &e, bind_fails) {
                    tracing::error!(provider = %shared.name, address = %shared.cfg.address,
                        reason = %why, "SMPP bind refused for good; provider suspended");
                    let _ = shared.suspended.set(why);
                    shared.link.send_replace(Link::Down);
                    break;
                }
                shared.link.send_replace(Link::Down);
                tracing::warn!(provider = %shared.name, address = %shared.cfg.address,
                    error = %e, attempt = failures, "SMPP bind failed");
            }
        }
        let delay = if bind_fails > 0 {
            // The SMSC answered and refused: a slow retry, not a reconnect storm.
            BIND_FAIL_DELAY
                .saturating_mul(1 << (bind_fails - 1).min(3))
                .min(Duration::from_secs(60))
        } else {
            RECONNECT
                .delay(failures.max(1), None, &mut rng)
                .max(MIN_RECONNECT_DELAY)
        };
        tokio::select! {
            () = sleep(delay) => {}
            _ = closing.changed() => break,
        }
    }
    shared.link.send_replace(Link::Closed);
}

/// Connect and `bind_transceiver` (interface version 3.4), each within `pdu_timeout`.
async fn bind(shared: &Shared) -> Result<Conn, BindError> {
    let t = shared.cfg.pdu_timeout;
    let io = timeout(t, shared.connector.connect())
        .await
        .map_err(|_| BindError::Timeout("connection"))?
        .map_err(BindError::Io)?;
    let mut conn = Framed::new(io, CommandCodec::new().with_max_length(MAX_PDU_LEN));
    let password = shared
        .cfg
        .password_env
        .as_deref()
        .and_then(|n| shared.credentials.get(n));
    let password = match &password {
        Some(p) => COctetString::<1, 9>::from_str(p.expose()).map_err(|_| BindError::Password)?,
        None => COctetString::empty(),
    };
    // Both checked against these limits when the providers file was read.
    let system_id = COctetString::<1, 16>::from_str(&shared.cfg.system_id)
        .unwrap_or_else(|_| COctetString::empty());
    let system_type = COctetString::<1, 13>::from_str(&shared.cfg.system_type)
        .unwrap_or_else(|_| COctetString::empty());
    let pdu = BindTransceiver::builder()
        .system_id(system_id)
        .password(password)
        .system_type(system_type)
        .interface_version(InterfaceVersion::Smpp3_4)
        .addr_ton(Ton::Unknown)
        .addr_npi(Npi::Unknown)
        .address_range(COctetString::empty())
        .build();
    let seq = shared.seq.next();
    conn.send(Command::new(CommandStatus::EsmeRok, seq, pdu))
        .await
        .map_err(|e| BindError::Io(io::Error::other(e.to_string())))?;
    let resp = timeout(t, async {
        loop {
            match conn.next().await {
                Some(Ok(c)) if c.sequence_number() == seq => return Ok(c),
                // Nothing else is served before the bind: drop it.
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(BindError::Io(io::Error::other(e.to_string()))),
                None => return Err(BindError::Closed),
            }
        }
    })
    .await
    .map_err(|_| BindError::Timeout("bind_transceiver_resp"))??;
    let status = u32::from(resp.status());
    if status != 0 || !matches!(resp.id(), CommandId::BindTransceiverResp) {
        return Err(BindError::Refused(if status == 0 { 0xFF } else { status }));
    }
    Ok(conn)
}

/// What one step of the session loop saw.
enum Event {
    In(Option<Result<Command, String>>),
    Out(Option<Command>),
    KeepAlive,
    KeepAliveLate,
    Ack(u32, bool),
    Close,
    UnbindLate,
}

/// Serve one bound session until it ends.
async fn serve(
    shared: &Shared,
    mut conn: Conn,
    bound: &Bound,
    mut out: mpsc::Receiver<Command>,
    closing: &mut watch::Receiver<bool>,
) -> End {
    let cfg = &shared.cfg;
    let mut keep_alive = tokio::time::interval_at(
        Instant::now() + cfg.enquire_link_interval,
        cfg.enquire_link_interval,
    );
    keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The outstanding enquire_link (sequence number, answer deadline).
    let mut enquiring: Option<(u32, Instant)> = None;
    // Our unbind (sequence number, answer deadline).
    let mut unbinding: Option<(u32, Instant)> = None;
    let mut acks = FuturesUnordered::new();
    loop {
        let far = Instant::now() + Duration::from_secs(86_400);
        let keep_alive_due = enquiring.map_or(far, |(_, d)| d);
        let unbind_due = unbinding.map_or(far, |(_, d)| d);
        let ev = tokio::select! {
            biased;
            r = conn.next() => Event::In(r.map(|r| r.map_err(|e| e.to_string()))),
            Some((seq, ok)) = acks.next(), if !acks.is_empty() => Event::Ack(seq, ok),
            c = out.recv(), if unbinding.is_none() => Event::Out(c),
            _ = closing.changed(), if unbinding.is_none() => Event::Close,
            _ = keep_alive.tick(), if enquiring.is_none() => Event::KeepAlive,
            () = sleep_until(keep_alive_due), if enquiring.is_some() => Event::KeepAliveLate,
            () = sleep_until(unbind_due), if unbinding.is_some() => Event::UnbindLate,
        };
        let mut write: Vec<Command> = Vec::new();
        match ev {
            Event::In(None) => return End::Lost("the SMSC closed the connection".into()),
            Event::In(Some(Err(e))) => return End::Lost(format!("unreadable PDU: {e}")),
            Event::In(Some(Ok(c))) => {
                let seq = c.sequence_number();
                let status = u32::from(c.status());
                match c.id() {
                    CommandId::SubmitSmResp => {
                        let message_id = match c.pdu() {
                            Some(Pdu::SubmitSmResp(r)) => {
                                Some(r.message_id().as_str().to_owned()).filter(|m| !m.is_empty())
                            }
                            _ => None,
                        };
                        let reply = Reply::Resp {
                            command_status: status,
                            message_id,
                        };
                        if !bound.answer(seq, reply) {
                            Counters::bump(&shared.counters.late_responses);
                        }
                    }
                    CommandId::GenericNack => {
                        Counters::bump(&shared.counters.generic_nacks);
                        // A nack saying "no error" would read as an acceptance: it is none.
                        let command_status = if status == 0 { 0xFF } else { status };
                        if enquiring.is_some_and(|(s, _)| s == seq) {
                            enquiring = None;
                        } else if !bound.answer(seq, Reply::Nack { command_status }) {
                            Counters::bump(&shared.counters.late_responses);
                            tracing::warn!(provider = %shared.name, seq, status = format_args!("0x{status:02x}"),
                                "generic_nack for no outstanding request");
                        }
                    }
                    CommandId::EnquireLinkResp => {
                        if enquiring.is_some_and(|(s, _)| s == seq) {
                            enquiring = None;
                        }
                    }
                    CommandId::UnbindResp if unbinding.is_some() => return End::Unbound,
                    CommandId::EnquireLink => {
                        write.push(Command::new(
                            CommandStatus::EsmeRok,
                            seq,
                            Pdu::EnquireLinkResp,
                        ));
                    }
                    CommandId::Unbind => {
                        let _ = conn
                            .send(Command::new(CommandStatus::EsmeRok, seq, Pdu::UnbindResp))
                            .await;
                        return End::Lost("the SMSC unbound".into());
                    }
                    CommandId::DeliverSm => {
                        if let Some(Pdu::DeliverSm(d)) = c.pdu() {
                            if let Some(rx) =
                                take_deliver(shared, receipt::read(d), seq, &mut write)
                            {
                                acks.push(async move { (seq, rx.await.is_ok()) });
                            }
                        } else {
                            write.push(deliver_resp(seq, 0));
                        }
                    }
                    id if id.is_response() => Counters::bump(&shared.counters.late_responses),
                    _ => write.push(Command::new(
                        CommandStatus::from(INVALID_COMMAND_ID),
                        seq,
                        Pdu::GenericNack,
                    )),
                }
            }
            Event::Ack(seq, stored) => {
                if !stored {
                    Counters::bump(&shared.counters.receipts_refused);
                }
                write.push(deliver_resp(
                    seq,
                    if stored { 0 } else { TEMPORARY_APP_ERROR },
                ));
            }
            Event::Out(None) => return End::Lost("closed".into()),
            Event::Out(Some(c)) => {
                write.push(c);
                while write.len() < MAX_BATCH {
                    match out.try_recv() {
                        Ok(c) => write.push(c),
                        Err(_) => break,
                    }
                }
            }
            Event::KeepAlive => {
                let seq = shared.seq.next();
                enquiring = Some((seq, Instant::now() + cfg.pdu_timeout));
                write.push(Command::new(CommandStatus::EsmeRok, seq, Pdu::EnquireLink));
            }
            Event::KeepAliveLate => {
                return End::Lost("enquire_link unanswered within pdu_timeout".into())
            }
            Event::Close => {
                if !*closing.borrow() {
                    continue;
                }
                let seq = shared.seq.next();
                unbinding = Some((seq, Instant::now() + cfg.pdu_timeout));
                write.push(Command::new(CommandStatus::EsmeRok, seq, Pdu::Unbind));
            }
            Event::UnbindLate => return End::Unbound,
        }
        if write.is_empty() {
            continue;
        }
        for c in write {
            if let Err(e) = conn.feed(c).await {
                return End::Lost(format!("write failed: {e}"));
            }
        }
        if let Err(e) = SinkExt::<Command>::flush(&mut conn).await {
            return End::Lost(format!("write failed: {e}"));
        }
    }
}

/// Hand a `deliver_sm` on: a receipt goes to be stored (its answer waits for that; the
/// returned receiver resolves when it is), anything else is answered at once.
fn take_deliver(
    shared: &Shared,
    inbound: Inbound,
    seq: u32,
    write: &mut Vec<Command>,
) -> Option<oneshot::Receiver<()>> {
    match inbound {
        Inbound::Receipt { message_id, state } => {
            let (r, rx) = InboundReceipt::new(message_id, state);
            match shared.receipts.try_send(r) {
                Ok(()) => {
                    Counters::bump(&shared.counters.receipts);
                    Some(rx)
                }
                Err(_) => {
                    // Nobody takes receipts now (or too many wait): the SMSC keeps it and
                    // delivers it again; never block the session for it.
                    Counters::bump(&shared.counters.receipts_refused);
                    write.push(deliver_resp(seq, TEMPORARY_APP_ERROR));
                    None
                }
            }
        }
        Inbound::Unreadable => {
            Counters::bump(&shared.counters.receipts_unreadable);
            tracing::warn!(provider = %shared.name, "delivery receipt without a readable message id");
            write.push(deliver_resp(seq, 0));
            None
        }
        Inbound::NotReceipt => {
            Counters::bump(&shared.counters.not_receipts);
            write.push(deliver_resp(seq, 0));
            None
        }
    }
}

fn deliver_resp(seq: u32, status: u32) -> Command {
    Command::new(
        CommandStatus::from(status),
        seq,
        DeliverSmResp::builder().build(),
    )
}
