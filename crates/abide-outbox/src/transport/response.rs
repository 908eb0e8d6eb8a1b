//! What came back from one send: an HTTP response, an SMPP `command_status`, or no answer.

use abide_core::{Observation, TransportFailure};
use bytes::Bytes;

use crate::model::RemoteCode;

/// Bytes of a response body kept for classification (the rest of what is read is
/// dropped): the classifier's own bound, [`abide_core::MAX_CLASSIFY_BODY`], so the two can
/// never drift.
pub const MAX_CLASSIFIED_BODY: usize = abide_core::MAX_CLASSIFY_BODY;

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
