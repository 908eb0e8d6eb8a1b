//! The transport seam: a request for one item goes out, an answer (or a transport failure)
//! comes back. Nothing here decides anything: the answer goes to the provider's
//! [`abide_core::Session`].
//!
//! - [`HttpTransport`]: reqwest, one per provider (base URL, timeout, credentials,
//!   idempotency-key header).
//! - [`SmppTransport`]: SMPP 3.4 to an SMSC, one bind per provider ([`smpp`]).
//! - [`ScriptedTransport`]: answers from a script, in memory, for tests and benchmarks.
//!
//! Any other protocol implements the same trait.

pub mod http;
pub mod scripted;
pub mod smpp;

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use abide_core::{Observation, TransportFailure};
use bytes::Bytes;

pub use self::http::{target_url, HttpTransport, MAX_CLASSIFIED_BODY};
pub use scripted::{ScriptedTransport, Sent};
pub use smpp::{InboundReceipt, ReceiptInbox, SmppStats, SmppTransport};

use crate::model::{Item, RemoteCode};

/// What came back from one send.
#[derive(Debug, Clone)]
pub enum Response {
    /// An HTTP response: status, headers and the start of the body.
    Http {
        /// Status code.
        status: ::http::StatusCode,
        /// Headers.
        headers: ::http::HeaderMap,
        /// Up to [`MAX_CLASSIFIED_BODY`] bytes of the body (some vendors say "rate
        /// limited" only there).
        body: Bytes,
    },
    /// An SMPP response PDU's `command_status` (SMPP 3.4 §5.1.3).
    Smpp {
        /// `command_status`.
        command_status: u32,
        /// The `message_id` of a `submit_sm_resp` (delivery receipts name it).
        message_id: Option<String>,
    },
    /// No answer: the transport failed.
    Transport(TransportFailure),
}

impl Response {
    /// An HTTP answer with `status` and no headers or body.
    pub fn status(status: u16) -> Self {
        Response::Http {
            status: ::http::StatusCode::from_u16(status)
                .unwrap_or(::http::StatusCode::INTERNAL_SERVER_ERROR),
            headers: ::http::HeaderMap::new(),
            body: Bytes::new(),
        }
    }

    /// An HTTP answer with `status` and the given headers (names and values must be valid;
    /// invalid ones are skipped).
    pub fn with_headers(status: u16, headers: &[(&str, &str)]) -> Self {
        let mut r = Self::status(status);
        if let Response::Http { headers: map, .. } = &mut r {
            for (k, v) in headers {
                if let (Ok(k), Ok(v)) = (
                    ::http::HeaderName::from_bytes(k.as_bytes()),
                    ::http::HeaderValue::from_str(v),
                ) {
                    map.append(k, v);
                }
            }
        }
        r
    }

    /// The remote's code as recorded per attempt.
    pub fn remote(&self) -> RemoteCode {
        match self {
            Response::Http { status, .. } => RemoteCode::Http(status.as_u16()),
            Response::Smpp { command_status, .. } => RemoteCode::Smpp(*command_status),
            Response::Transport(_) => RemoteCode::NoResponse,
        }
    }

    /// An SMPP answer with `command_status` and no `message_id`.
    pub fn smpp(command_status: u32) -> Self {
        Response::Smpp {
            command_status,
            message_id: None,
        }
    }

    /// The remote's id of the message, when the answer names one (SMPP `message_id`).
    pub fn message_id(&self) -> Option<&str> {
        match self {
            Response::Smpp { message_id, .. } => message_id.as_deref(),
            _ => None,
        }
    }

    /// The answer as the classifier reads it.
    pub fn observation(&self) -> Observation<'_> {
        match self {
            Response::Http {
                status,
                headers,
                body,
            } => Observation::Http {
                status: *status,
                headers,
                body,
            },
            Response::Smpp { command_status, .. } => Observation::Smpp {
                command_status: *command_status,
            },
            Response::Transport(t) => Observation::Transport(*t),
        }
    }
}

/// A boxed, `Send` future returned by [`Transport::send`].
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Response> + Send + 'a>>;

/// A boxed, `Send` future returned by [`Transport::close`].
pub type CloseFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Sends one item's request to its provider.
pub trait Transport: Debug + Send + Sync {
    /// Send `item` once and return the answer. Never retries: retrying is the session's
    /// decision.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request; the item's lease and idempotency key make
    /// a later resend safe.
    fn send<'a>(&'a self, item: &'a Item) -> SendFuture<'a>;

    /// Why `item` can never be sent by this transport (a path that leaves the base URL, a
    /// message no SMS encoding holds), or `None` (the default). Validated at enqueue, so
    /// only a row edited by hand fails here. Senders ask before anything goes out and fail
    /// such an item at once: retrying cannot help, and a request never made is neither an
    /// attempt nor a host outage.
    fn unsendable(&self, _item: &Item) -> Option<String> {
        None
    }

    /// Fetch credentials anew (after a `401`). The default does nothing.
    fn refresh_credentials(&self) {}

    /// Delivery receipts the remote sends on its own (SMPP `deliver_sm`), to be stored
    /// and then acknowledged ([`InboundReceipt::stored`]); `None` (the default) for
    /// transports without them. Called by the dispatcher when a run starts; a transport
    /// may start its connection then, so receipts flow before the first send.
    fn receipts(&self) -> Option<ReceiptInbox> {
        None
    }

    /// Resolves when a send would go out or fail at once, not wait for a connection
    /// being made (SMPP: the bind in progress, up to `pdu_timeout`); the default at once.
    /// Senders await it before an item is marked as sent, so a bind refused for good
    /// ([`Transport::suspended`]) charges no item an attempt.
    fn ready(&self) -> CloseFuture<'_> {
        Box::pin(std::future::ready(()))
    }

    /// Why the transport will not send again this run (an SMPP bind refused for good),
    /// naming what to fix; `None` (the default) while it may. The dispatcher stops
    /// claiming for a suspended provider; its items wait.
    fn suspended(&self) -> Option<String> {
        None
    }

    /// What an SMPP transport has seen; `None` (the default) for others.
    fn smpp_stats(&self) -> Option<SmppStats> {
        None
    }

    /// Say goodbye to the remote (SMPP `unbind`) and stop. The default does nothing.
    fn close(&self) -> CloseFuture<'_> {
        Box::pin(std::future::ready(()))
    }
}
