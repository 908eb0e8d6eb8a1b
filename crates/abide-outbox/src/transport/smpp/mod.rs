//! SMPP 3.4 to an SMSC, on the `rusmpp` crate's PDUs and tokio codec: one
//! `bind_transceiver` per provider, a window of outstanding `submit_sm`, delivery receipts.
//!
//! Each attempt is one `submit_sm` and its answer, handed to the provider's
//! [`abide_core::Session`] exactly as an HTTP response is: the session classifies the
//! `command_status` with the SMPP table (0x58 `ESME_RTHROTTLED` and 0x14 `ESME_RMSGQFUL`
//! pause the bind, and the item stays `PENDING`; terminal codes fail it with the code as
//! reason). What the transport adds:
//!
//! - **Bind.** Connected and bound lazily (on first use, or when the dispatcher starts
//!   taking receipts), with the password read from the credential the providers file names
//!   (`password_env`) at every bind, never logged. A send while the bind is being made
//!   waits up to `pdu_timeout`; a send while it is down fails at once as
//!   [`TransportFailure::Connect`] (nothing was sent), which the session treats like a
//!   refused HTTP connection: a host-level pause. The bind is made again in the background
//!   with capped, jittered backoff (first within 0.5 s, at most every 30 s).
//! - **A bind that cannot succeed** (`ESME_RINVPASWD`, `ESME_RINVSYSID`,
//!   `ESME_RINVSYSTYP`; `ESME_RBINDFAIL` three times in a row, 10 s then 20 s apart) is
//!   not tried again this run: [`SmppTransport::suspended`] names the field, and the
//!   dispatcher stops claiming for the provider (its items wait `QUEUED`/`PENDING`).
//! - **Window.** At most `window` `submit_sm` are outstanding; responses are matched to
//!   requests by sequence number.
//! - **Timeouts.** A request whose response does not come within `pdu_timeout`, or whose
//!   connection drops before it does, ends as [`TransportFailure::AfterSend`] (replay
//!   safe): an unknown outcome, resent later with the same idempotency key (TLV 0x1400).
//! - **`generic_nack`** to a `submit_sm` is its answer (its `command_status` is
//!   classified); one with status 0 is read as `ESME_RUNKNOWNERR`, never as an acceptance.
//! - **Keep-alive.** `enquire_link` every `enquire_link_interval`; one unanswered within
//!   `pdu_timeout` drops the session. The SMSC's `enquire_link` and `unbind` are answered.
//! - **Receipts.** `deliver_sm` receipts are read ([`receipt`]) and handed to the
//!   dispatcher ([`SmppTransport::receipts`]); `deliver_sm_resp` is sent once the receipt
//!   is stored, a temporary error (0x64) if it cannot be, so a receipt is never
//!   acknowledged and lost.
//! - **Shutdown.** [`SmppTransport::close`] unbinds (waiting up to `pdu_timeout` for
//!   `unbind_resp`); dropping the transport does the same in the background.
//!
//! Files: [`message`] (item → `submit_sm`), [`receipt`] (`deliver_sm` → receipt), `link`
//! (what senders and the connection task share), `session` (the connection task).

mod config;
pub mod message;
pub mod receipt;

mod link;
mod session;

pub(crate) use config::KIND;
pub use config::{
    SmppConfig, DEFAULT_MAX_TEXT_OCTETS, MAX_ADDR_LEN, MAX_PASSWORD_LEN, MAX_SYSTEM_ID_LEN,
    MAX_SYSTEM_TYPE_LEN, MAX_TEXT_OCTETS, MAX_WINDOW,
};

#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use abide_core::TransportFailure;
use rusmpp::{Command, CommandStatus};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::{timeout, Instant};

pub use link::SmppStats;

use self::link::{Counters, Link, Reply, Sequence};
use self::session::{Connector, Shared, Tcp};
use super::{
    BuildEnv, Preflight, Response, SendFuture, Transport, TransportSettings, TransportStats,
};
use crate::credentials::CredentialSource;
use crate::error::{Error, Result};
use crate::model::{Item, NewItem};
use crate::receipt::ReceiptInbox;

/// Receipts waiting to be stored, at most (more are answered with a temporary error and
/// delivered again by the SMSC).
const RECEIPT_QUEUE: usize = 4096;

/// Sends items to one SMSC over SMPP 3.4 (see the [module docs](self)).
#[derive(Debug)]
pub struct SmppTransport {
    shared: Arc<Shared>,
    window: Semaphore,
    inbox: ReceiptInbox,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl SmppTransport {
    /// A transport for provider `name` reaching `cfg.address` over TCP, reading the
    /// password named by `cfg.password_env` from `credentials` at every bind.
    pub fn new(name: &str, cfg: &SmppConfig, credentials: Arc<dyn CredentialSource>) -> Self {
        Self::with_connector(name, cfg, credentials, Box::new(Tcp(cfg.address.clone())))
    }

    pub(crate) fn with_connector(
        name: &str,
        cfg: &SmppConfig,
        credentials: Arc<dyn CredentialSource>,
        connector: Box<dyn Connector>,
    ) -> Self {
        let (receipts, rx) = mpsc::channel(RECEIPT_QUEUE);
        Self {
            shared: Arc::new(Shared {
                name: name.to_owned(),
                cfg: cfg.clone(),
                link: watch::channel(Link::Down).0,
                seq: Sequence::default(),
                counters: Counters::default(),
                receipts,
                closing: watch::channel(false).0,
                credentials,
                connector,
                suspended: std::sync::OnceLock::new(),
            }),
            window: Semaphore::new(cfg.window),
            inbox: Arc::new(tokio::sync::Mutex::new(rx)),
            task: Mutex::new(None),
        }
    }

    /// What the transport has seen: binds, drops, timeouts, nacks, receipts.
    pub fn stats(&self) -> SmppStats {
        self.shared.counters.snapshot()
    }

    /// Why binding was given up for this run, naming the field to fix: the SMSC refused
    /// the bind with `ESME_RINVPASWD`, `ESME_RINVSYSID` or `ESME_RINVSYSTYP` (no later bind
    /// with the same settings can succeed), or with `ESME_RBINDFAIL` several times in a
    /// row. Sends then fail at once as [`TransportFailure::Connect`] (nothing sent).
    pub fn suspended(&self) -> Option<String> {
        self.shared.suspended.get().cloned()
    }

    /// Start connecting and binding (once; later calls do nothing). Needs a tokio runtime.
    fn start(&self) {
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if task.is_none() && !*self.shared.closing.borrow() {
            self.shared.link.send_replace(Link::Connecting);
            *task = Some(tokio::spawn(session::run(Arc::clone(&self.shared))));
        }
    }

    /// Unbind and stop: waits for `unbind_resp` up to `pdu_timeout` (and for a bind in
    /// progress to give up), then the connection is closed. Sends afterwards fail as
    /// [`TransportFailure::Connect`].
    pub async fn close(&self) {
        self.shared.closing.send_replace(true);
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let bound = self.shared.cfg.pdu_timeout.saturating_mul(2);
            if timeout(bound, task).await.is_err() {
                tracing::warn!(provider = %self.shared.name, "SMPP unbind did not finish in time");
            }
        }
        self.shared.link.send_replace(Link::Closed);
    }

    /// The bound session, waiting for a bind in progress until `deadline`; `None` when
    /// the link is down or closed, or the bind did not come in time.
    async fn bound(&self, deadline: Instant) -> Option<Arc<link::Bound>> {
        let mut rx = self.shared.link.subscribe();
        loop {
            let state = rx.borrow_and_update().clone();
            match state {
                Link::Bound(b) => return Some(b),
                Link::Down | Link::Closed => return None,
                Link::Connecting => {
                    if tokio::time::timeout_at(deadline, rx.changed())
                        .await
                        .is_err()
                    {
                        return None;
                    }
                }
            }
        }
    }

    async fn send_one(&self, item: &Item) -> Response {
        let cfg = &self.shared.cfg;
        // Refused before the send (`unsendable`); kept for direct callers. Never sent.
        let pdu = match message::encode(&item.request, cfg)
            .and_then(|sms| message::submit_sm(&sms, &item.idempotency_key, cfg))
        {
            Ok(pdu) => pdu,
            Err(e) => {
                tracing::warn!(provider = %self.shared.name, item = %item.id, error = %e,
                    "item cannot be sent as an SMS; not sent");
                return Response::Transport(TransportFailure::Connect);
            }
        };
        self.start();
        let Some(bound) = self.bound(Instant::now() + cfg.pdu_timeout).await else {
            return Response::Transport(TransportFailure::Connect);
        };
        let Ok(_permit) = self.window.acquire().await else {
            return Response::Transport(TransportFailure::Connect);
        };
        let seq = self.shared.seq.next();
        let answer = bound.expect(seq);
        // Stop waiting if this future is dropped (shutdown) or times out.
        let _forget = Forget(&bound, seq);
        if bound
            .out
            .send(Command::new(CommandStatus::EsmeRok, seq, pdu))
            .await
            .is_err()
        {
            // The connection task is gone before the PDU reached it: never written.
            return Response::Transport(TransportFailure::Connect);
        }
        match timeout(cfg.pdu_timeout, answer).await {
            Ok(Ok(Reply::Resp {
                command_status,
                message_id,
            })) => Response::Smpp {
                command_status,
                message_id,
            },
            Ok(Ok(Reply::Nack { command_status })) => Response::Smpp {
                command_status,
                message_id: None,
            },
            // The session ended with the request outstanding: it may have been acted on.
            Ok(Err(_)) => Response::Transport(TransportFailure::AfterSend { replay_safe: true }),
            Err(_) => {
                Counters::bump(&self.shared.counters.pdu_timeouts);
                Response::Transport(TransportFailure::AfterSend { replay_safe: true })
            }
        }
    }
}

impl TransportSettings for SmppConfig {
    /// The `window`: one sender per outstanding `submit_sm`.
    fn concurrency(&self) -> usize {
        self.window
    }

    fn attempt_timeout(&self) -> Duration {
        SmppConfig::attempt_timeout(self)
    }

    fn endpoint(&self) -> String {
        format!("smpp://{}", self.address)
    }

    /// An SMS this provider can send ([`message`]).
    fn check_item(&self, provider: &str, item: &NewItem) -> Result<()> {
        item.validate()?;
        message::check(&item.request, self).map_err(|e| {
            Error::InvalidRequest(format!("{e} (provider {provider:?} sends SMS over SMPP)"))
        })
    }

    /// The `password_env` credential, when one is named, is set and fits a bind (SMPP 3.4
    /// §4.1.1: 1 to [`MAX_PASSWORD_LEN`] printable ASCII characters).
    fn preflight(
        &self,
        provider: &str,
        credentials: &dyn CredentialSource,
    ) -> std::result::Result<(), Preflight> {
        let Some(var) = &self.password_env else {
            return Ok(());
        };
        let Some(pw) = credentials
            .get(var)
            .filter(|s| !s.expose().trim().is_empty())
        else {
            return Err(Preflight::CredentialMissing {
                provider: provider.to_owned(),
                setting: "password_env",
                variable: var.clone(),
            });
        };
        let pw = pw.expose();
        if pw.len() > MAX_PASSWORD_LEN || !pw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(Preflight::PasswordUnfit {
                provider: provider.to_owned(),
                variable: var.clone(),
                max: MAX_PASSWORD_LEN,
            });
        }
        Ok(())
    }

    /// `deliver_sm` receipts, asked for on every `submit_sm`.
    fn delivers_receipts(&self) -> bool {
        true
    }

    /// The `system_id`: the SMSC's limit is per account.
    fn account(&self, _credentials: &dyn CredentialSource) -> Option<String> {
        Some(self.system_id.clone())
    }

    fn build(&self, provider: &str, env: &BuildEnv) -> Arc<dyn Transport> {
        Arc::new(SmppTransport::new(
            provider,
            self,
            Arc::clone(&env.credentials),
        ))
    }
}

/// Removes a request from the waiting list when its sender stops waiting.
struct Forget<'a>(&'a link::Bound, u32);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(self.1);
    }
}

impl Drop for SmppTransport {
    fn drop(&mut self) {
        // The connection task unbinds on its own if the runtime still runs.
        self.shared.closing.send_replace(true);
    }
}

impl Transport for SmppTransport {
    fn send<'a>(&'a self, item: &'a Item) -> SendFuture<'a> {
        Box::pin(self.send_one(item))
    }

    fn unsendable(&self, item: &Item) -> Option<String> {
        let cfg = &self.shared.cfg;
        message::encode(&item.request, cfg)
            .and_then(|sms| message::submit_sm(&sms, &item.idempotency_key, cfg))
            .err()
    }

    fn receipts(&self) -> Option<ReceiptInbox> {
        self.start();
        Some(Arc::clone(&self.inbox))
    }

    fn preflight(&self) -> Result<(), Preflight> {
        let shared = &self.shared;
        shared.cfg.preflight(&shared.name, &*shared.credentials)
    }

    fn stats(&self) -> Option<TransportStats> {
        Some(TransportStats::Smpp(SmppTransport::stats(self)))
    }

    fn suspended(&self) -> Option<String> {
        SmppTransport::suspended(self)
    }

    fn ready(&self) -> super::CloseFuture<'_> {
        Box::pin(async move {
            self.start();
            let _ = self
                .bound(Instant::now() + self.shared.cfg.pdu_timeout)
                .await;
        })
    }

    fn close(&self) -> super::CloseFuture<'_> {
        Box::pin(SmppTransport::close(self))
    }
}
