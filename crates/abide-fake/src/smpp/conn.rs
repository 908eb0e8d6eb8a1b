//! One SMPP connection: read PDUs (at most `window_cap` unanswered), answer them, push due
//! receipts to a receiver or transceiver bind, and close on unbind, a quirk or a timeout.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{Sink, SinkExt, StreamExt};
use rusmpp::pdus::{
    BindReceiverResp, BindTransceiverResp, BindTransmitterResp, DeliverSm, SubmitSmResp,
};
use rusmpp::types::COctetString;
use rusmpp::values::InterfaceVersion;
use rusmpp::{Command, CommandId, CommandStatus, Pdu};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use super::codec::{Inbound, PduCodec};
use super::receipt::Receipt;
use super::stats::command_name;
use super::{Login, Smsc, Submitted, SMSC_SYSTEM_ID};

/// Receipts sent on one connection and not yet acknowledged, at most.
const RECEIPT_WINDOW: usize = 64;

/// Request sequence numbers remembered per connection to spot reuse.
const SEQ_MEMORY: usize = 4096;

/// Undecodable PDUs tolerated on one connection before it is closed.
const MAX_INVALID: u32 = 16;

/// A receipt refused by the ESME (`deliver_sm_resp` with an error) is offered again after
/// this long.
const RECEIPT_RETRY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Transmitter,
    Receiver,
    Transceiver,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Transmitter => "transmitter",
            Kind::Receiver => "receiver",
            Kind::Transceiver => "transceiver",
        }
    }
}

#[derive(Default)]
struct Conn {
    bound: Option<(Kind, Login)>,
    /// PDUs received.
    pdus: u64,
    /// Delayed answers not yet sent.
    outstanding: usize,
    invalid: u32,
    next_seq: u32,
    /// Receipts sent, by our sequence number.
    receipts_out: HashMap<u32, Receipt>,
    /// Sequence numbers of the last [`SEQ_MEMORY`] requests from the ESME.
    recent: VecDeque<u32>,
    recent_set: HashSet<u32>,
}

impl Conn {
    /// Note a request's sequence number; `true` when one of the last [`SEQ_MEMORY`]
    /// requests on this connection had it already (SMPP 3.4 §3.2: unique per session).
    fn reused(&mut self, seq: u32) -> bool {
        if self.recent_set.contains(&seq) {
            return true;
        }
        self.recent.push_back(seq);
        self.recent_set.insert(seq);
        if self.recent.len() > SEQ_MEMORY {
            if let Some(old) = self.recent.pop_front() {
                self.recent_set.remove(&old);
            }
        }
        false
    }

    fn seq(&mut self) -> u32 {
        self.next_seq = if self.next_seq >= 0x7FFF_FFFF {
            1
        } else {
            self.next_seq + 1
        };
        self.next_seq
    }

    /// The system_id whose receipts this connection takes.
    fn receiver(&self) -> Option<&str> {
        match &self.bound {
            Some((Kind::Receiver | Kind::Transceiver, l)) => Some(&l.system_id),
            _ => None,
        }
    }
}

/// What to do after a PDU.
enum Next {
    Continue,
    /// Close, for this reason (`None`: an orderly unbind).
    Close(Option<&'static str>),
}

type Io = Framed<TcpStream, PduCodec>;

async fn send<S>(smsc: &Smsc, io: &mut S, cmd: Command) -> std::io::Result<()>
where
    S: Sink<Command, Error = std::io::Error> + Unpin,
{
    let response = cmd.id().is_response() || cmd.id() == CommandId::GenericNack;
    smsc.with_stats(|s| s.sent(cmd.id(), cmd.status(), response));
    io.send(cmd).await
}

pub(super) async fn serve(smsc: Arc<Smsc>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let cfg = &smsc.cfg.smpp;
    let cap = cfg.window_cap as usize;
    let mut io = Framed::new(stream, PduCodec::default());
    let (tx, mut rx) = mpsc::channel::<Command>(cap);
    let mut drops = smsc.drops.subscribe();
    drops.mark_unchanged();
    let mut c = Conn::default();
    let opened = Instant::now();
    let mut last_heard = opened;
    let why: Option<&'static str> = loop {
        let queued = smsc.receipts_queued.notified();
        tokio::pin!(queued);
        queued.as_mut().enable();
        let due = match c.receiver() {
            Some(sys) if c.receipts_out.len() < RECEIPT_WINDOW => {
                smsc.lock().receipts.next_due(sys)
            }
            _ => None,
        };
        let deadline = if c.bound.is_some() {
            last_heard + Duration::from_secs(cfg.idle_timeout_secs)
        } else {
            opened + Duration::from_secs(cfg.bind_timeout_secs)
        };
        tokio::select! {
            biased;
            () = smsc.shutdown.cancelled() => break Some("shutdown"),
            _ = drops.changed() => break Some("drop_all"),
            Some(resp) = rx.recv() => {
                c.outstanding = c.outstanding.saturating_sub(1);
                if send(&smsc, &mut io, resp).await.is_err() {
                    break None;
                }
            }
            item = io.next(), if c.outstanding < cap => {
                let Some(Ok(item)) = item else { break None };
                last_heard = Instant::now();
                match on_inbound(&smsc, &mut io, &mut c, &tx, item).await {
                    Next::Continue => {}
                    Next::Close(why) => break why,
                }
            }
            () = tokio::time::sleep_until(due.unwrap_or(opened)), if due.is_some() => {
                if send_receipts(&smsc, &mut io, &mut c).await.is_err() {
                    break None;
                }
            }
            () = &mut queued => {}
            () = tokio::time::sleep_until(deadline) => {
                break Some(if c.bound.is_some() { "idle_timeout" } else { "bind_timeout" });
            }
        }
    };
    if let Some(why) = why {
        smsc.with_stats(|s| s.dropped(why));
        tracing::info!(%peer, reason = why, "smpp connection closed by the SMSC");
    }
    requeue_unacknowledged(&smsc, &mut c);
}

/// Receipts sent (or taken to be sent) and not acknowledged go back to the queue for the
/// next bind.
fn requeue_unacknowledged(smsc: &Smsc, c: &mut Conn) {
    let Some((_, login)) = &c.bound else {
        return;
    };
    let mut st = smsc.lock();
    let now = Instant::now();
    for (_, r) in c.receipts_out.drain() {
        st.receipts.requeue(&login.system_id, now, r);
    }
    drop(st);
    smsc.receipts_queued.notify_waiters();
}

/// Send the receipts due now, as many as the receipt window has room for. Each is in
/// `receipts_out` before the first is written: a write that fails part-way (the peer is
/// gone) leaves the rest of the batch there to be requeued, not dropped.
async fn send_receipts<S>(smsc: &Smsc, io: &mut S, c: &mut Conn) -> std::io::Result<()>
where
    S: Sink<Command, Error = std::io::Error> + Unpin,
{
    let Some(sys) = c.receiver().map(str::to_owned) else {
        return Ok(());
    };
    let room = RECEIPT_WINDOW.saturating_sub(c.receipts_out.len());
    let due = smsc.lock().receipts.take_due(&sys, Instant::now(), room);
    let now = smsc.clock.now();
    let batch: Vec<(u32, DeliverSm)> = due
        .into_iter()
        .map(|r| {
            let seq = c.seq();
            let pdu = r.to_pdu(now);
            c.receipts_out.insert(seq, r);
            (seq, pdu)
        })
        .collect();
    for (seq, pdu) in batch {
        send(smsc, io, Command::new(CommandStatus::EsmeRok, seq, pdu)).await?;
        smsc.with_stats(|s| s.receipts_sent += 1);
    }
    Ok(())
}

fn resp(status: CommandStatus, seq: u32, pdu: impl Into<Pdu>) -> Command {
    Command::new(status, seq, pdu)
}

fn empty_submit_resp() -> SubmitSmResp {
    SubmitSmResp::builder()
        .message_id(COctetString::empty())
        .build()
}

async fn on_inbound(
    smsc: &Arc<Smsc>,
    io: &mut Io,
    c: &mut Conn,
    tx: &mpsc::Sender<Command>,
    item: Inbound,
) -> Next {
    let cmd = match item {
        Inbound::Pdu(cmd) => cmd,
        Inbound::Invalid {
            command_id,
            sequence_number,
        } => {
            tracing::debug!(command_id, "smpp PDU does not decode; generic_nack");
            // An id rusmpp does not know: not served. A known one: its body does not fit.
            let (status, what) = match CommandId::from(command_id) {
                id @ CommandId::Other(_) => (CommandStatus::EsmeRinvcmdid, command_name(id)),
                _ => (CommandStatus::EsmeRinvcmdlen, "invalid".to_owned()),
            };
            smsc.with_stats(|s| s.received(&what));
            c.invalid += 1;
            let nack = resp(status, sequence_number, Pdu::GenericNack);
            if send(smsc, io, nack).await.is_err() {
                return Next::Close(None);
            }
            if c.invalid > MAX_INVALID {
                return Next::Close(Some("invalid_pdus"));
            }
            return Next::Continue;
        }
        Inbound::BadLength {
            command_length,
            sequence_number,
        } => {
            tracing::info!(command_length, "smpp command_length out of bounds; closing");
            smsc.with_stats(|s| s.received("invalid"));
            let nack = resp(
                CommandStatus::EsmeRinvcmdlen,
                sequence_number,
                Pdu::GenericNack,
            );
            let _ = send(smsc, io, nack).await;
            return Next::Close(Some("bad_command_length"));
        }
    };
    let reused = cmd.id().is_operation() && c.reused(cmd.sequence_number());
    smsc.with_stats(|s| {
        s.received(&command_name(cmd.id()));
        s.sequence_reuses += u64::from(reused);
    });
    c.pdus += 1;
    let b = smsc.behaviour();
    let drop_now = b.drop_after_pdus > 0 && c.pdus >= b.drop_after_pdus;
    let seq = cmd.sequence_number();
    let answer: Option<Command> = match cmd.pdu() {
        Some(Pdu::BindTransmitter(p)) => bind(
            smsc,
            c,
            &b,
            Kind::Transmitter,
            p.system_id.as_str(),
            p.password.as_str(),
            seq,
        ),
        Some(Pdu::BindReceiver(p)) => bind(
            smsc,
            c,
            &b,
            Kind::Receiver,
            p.system_id.as_str(),
            p.password.as_str(),
            seq,
        ),
        Some(Pdu::BindTransceiver(p)) => bind(
            smsc,
            c,
            &b,
            Kind::Transceiver,
            p.system_id.as_str(),
            p.password.as_str(),
            seq,
        ),
        Some(Pdu::SubmitSm(sm)) => match &c.bound {
            Some((Kind::Transmitter | Kind::Transceiver, login)) => {
                let login = login.clone();
                let slow = Duration::from_millis(b.slow_ms);
                let (answer, guard, delay) = match smsc.submit(&login, sm).await {
                    Submitted::Repeat { message_id } => (submit_resp(seq, &message_id), None, slow),
                    Submitted::Refused(status) => {
                        (resp(status, seq, empty_submit_resp()), None, slow)
                    }
                    Submitted::Accepted {
                        message_id,
                        guard,
                        delay,
                    } => (submit_resp(seq, &message_id), guard, delay),
                };
                if delay.is_zero() || drop_now {
                    if let Some(g) = guard {
                        g.release().await;
                    }
                    Some(answer)
                } else {
                    // Answered later; the concurrency slot stays held until then.
                    c.outstanding += 1;
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        if let Some(g) = guard {
                            g.release().await;
                        }
                        let _ = tx.send(answer).await;
                    });
                    None
                }
            }
            _ => Some(resp(
                CommandStatus::EsmeRinvbndsts,
                seq,
                empty_submit_resp(),
            )),
        },
        Some(Pdu::EnquireLink) => Some(resp(CommandStatus::EsmeRok, seq, Pdu::EnquireLinkResp)),
        Some(Pdu::Unbind) => {
            let _ = send(smsc, io, resp(CommandStatus::EsmeRok, seq, Pdu::UnbindResp)).await;
            return Next::Close(None);
        }
        Some(Pdu::DeliverSmResp(_)) | Some(Pdu::GenericNack) => {
            on_receipt_answer(smsc, c, seq, cmd.status());
            None
        }
        Some(Pdu::EnquireLinkResp) | Some(Pdu::UnbindResp) => None,
        _ => Some(resp(CommandStatus::EsmeRinvcmdid, seq, Pdu::GenericNack)),
    };
    if drop_now {
        return Next::Close(Some("drop_after"));
    }
    if let Some(a) = answer {
        if send(smsc, io, a).await.is_err() {
            return Next::Close(None);
        }
    }
    Next::Continue
}

fn submit_resp(seq: u32, message_id: &str) -> Command {
    let id = COctetString::from_string(message_id.to_owned()).unwrap_or_default();
    resp(
        CommandStatus::EsmeRok,
        seq,
        SubmitSmResp::builder().message_id(id).build(),
    )
}

fn on_receipt_answer(smsc: &Smsc, c: &mut Conn, seq: u32, status: CommandStatus) {
    let Some(r) = c.receipts_out.remove(&seq) else {
        return;
    };
    let mut st = smsc.lock();
    if status == CommandStatus::EsmeRok {
        st.receipts.done();
        st.stats.receipts_acknowledged += 1;
    } else if let Some((_, login)) = &c.bound {
        st.receipts
            .requeue(&login.system_id, Instant::now() + RECEIPT_RETRY, r);
    }
}

#[allow(clippy::too_many_arguments)]
fn bind(
    smsc: &Smsc,
    c: &mut Conn,
    b: &crate::config::Behaviour,
    kind: Kind,
    system_id: &str,
    password: &str,
    seq: u32,
) -> Option<Command> {
    let status = if c.bound.is_some() {
        CommandStatus::EsmeRalybnd
    } else {
        match smsc.bind(b, system_id, password) {
            Ok(login) => {
                smsc.with_stats(|s| s.bound(kind.name()));
                tracing::info!(system_id = %login.system_id, kind = kind.name(), "smpp bind");
                c.bound = Some((kind, login));
                CommandStatus::EsmeRok
            }
            Err(status) => {
                tracing::info!(system_id, ?status, "smpp bind refused");
                status
            }
        }
    };
    let id = COctetString::from_string(SMSC_SYSTEM_ID.to_owned()).unwrap_or_default();
    let v = Some(InterfaceVersion::Smpp3_4);
    Some(match kind {
        Kind::Transmitter => resp(status, seq, BindTransmitterResp::new(id, v)),
        Kind::Receiver => resp(status, seq, BindReceiverResp::new(id, v)),
        Kind::Transceiver => resp(status, seq, BindTransceiverResp::new(id, v)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::App;
    use crate::ProviderConfig;
    use abide_core::SystemClock;

    /// The peer is gone after the first receipt of a batch of five: the write of the
    /// second fails, and all five are back in the queue when the connection ends (before,
    /// the three not yet written were dropped, and their items never got a receipt).
    #[tokio::test]
    async fn a_write_that_fails_mid_batch_requeues_the_whole_batch() {
        let app = App::new(ProviderConfig::default(), Arc::new(SystemClock)).unwrap();
        let smsc = Smsc::new(&app);
        let now = Instant::now();
        for i in 0..5 {
            let r = Receipt::example(&format!("{i:010}"));
            assert!(smsc.lock().receipts.push("abide", now, r));
        }
        let mut c = Conn {
            bound: Some((
                Kind::Receiver,
                Login {
                    system_id: "abide".into(),
                    account: None,
                },
            )),
            ..Conn::default()
        };
        let sink = futures::sink::unfold(0u32, |written, _: Command| async move {
            if written == 1 {
                Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            } else {
                Ok(written + 1)
            }
        });
        futures::pin_mut!(sink);
        assert!(send_receipts(&smsc, &mut sink, &mut c).await.is_err());
        assert_eq!(smsc.stats().receipts_sent, 1);
        requeue_unacknowledged(&smsc, &mut c);
        let mut back: Vec<String> = smsc
            .lock()
            .receipts
            .take_due("abide", now + Duration::from_secs(1), 100)
            .into_iter()
            .map(|r| r.message_id)
            .collect();
        back.sort();
        let want: Vec<String> = (0..5).map(|i| format!("{i:010}")).collect();
        assert_eq!(back, want);
        assert_eq!(smsc.stats().receipts_pending, 5);
    }
}
