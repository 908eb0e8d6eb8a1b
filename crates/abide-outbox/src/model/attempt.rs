//! What happened on the wire: one record per attempt, how an item's lease ended
//! ([`Completion`]), and the mark written before a request goes out ([`SendMark`]).

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use abide_core::{DelayReason, VerdictClass};
use serde::Serialize;

use super::ser;
use crate::state::State;

/// What the remote side said on one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteCode {
    /// An HTTP status.
    Http(u16),
    /// An SMPP `command_status`.
    Smpp(u32),
    /// Nothing: the transport failed.
    NoResponse,
}

impl fmt::Display for RemoteCode {
    /// `http_429`, `smpp_0x58`, `no_response`: the text stored as an item's
    /// `last_provider_code`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteCode::Http(s) => write!(f, "http_{s}"),
            RemoteCode::Smpp(c) => write!(f, "smpp_0x{c:02x}"),
            RemoteCode::NoResponse => f.write_str("no_response"),
        }
    }
}

impl FromStr for RemoteCode {
    type Err = String;

    /// The text [`RemoteCode`]'s `Display` writes.
    ///
    /// # Errors
    /// Any other text, quoted.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let code = if s == "no_response" {
            Some(RemoteCode::NoResponse)
        } else if let Some(n) = s.strip_prefix("http_") {
            n.parse().ok().map(RemoteCode::Http)
        } else if let Some(n) = s.strip_prefix("smpp_0x") {
            u32::from_str_radix(n, 16).ok().map(RemoteCode::Smpp)
        } else {
            None
        };
        code.ok_or_else(|| format!("unknown remote code {s:?}"))
    }
}

/// One attempt, as recorded in the attempts table. Serialised with `at` as RFC 3339 and
/// the durations as whole milliseconds (`delay_ms`, `latency_ms`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptRecord {
    /// When the request was sent (UTC).
    #[serde(serialize_with = "ser::rfc3339")]
    pub at: SystemTime,
    /// The provider it was sent to.
    pub provider: String,
    /// What the remote side said.
    pub remote: RemoteCode,
    /// Our classification (stored as [`VerdictClass::as_str`], e.g. `throttle`).
    pub verdict_class: VerdictClass,
    /// The delay chosen before the next attempt, if any.
    #[serde(rename = "delay_ms", serialize_with = "ser::millis_opt")]
    pub delay: Option<Duration>,
    /// Why that delay (stored as [`DelayReason::as_str`]; a reclaimed lease's
    /// attempts say [`DelayReason::LeaseExpired`]).
    pub delay_reason: Option<DelayReason>,
    /// Time from send to response.
    #[serde(rename = "latency_ms", serialize_with = "ser::millis")]
    pub latency: Duration,
}

/// A stored attempt row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredAttempt {
    /// The item.
    pub item_id: String,
    /// 1 for the first attempt.
    pub attempt_no: u32,
    /// The idempotency key that was sent.
    pub idempotency_key: String,
    /// The rest of the record.
    #[serde(flatten)]
    pub record: AttemptRecord,
}

/// How an attempt (or a lease) ended; moves an `IN_FLIGHT` item on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// Accepted: `IN_FLIGHT → SUBMITTED`.
    Submitted,
    /// Retry later: `IN_FLIGHT → PENDING` with `next_attempt_at`.
    Retry {
        /// Earliest next attempt (UTC; RFC 3339).
        #[serde(serialize_with = "ser::rfc3339")]
        next_attempt_at: SystemTime,
        /// Why.
        reason: String,
    },
    /// Never retry: `IN_FLIGHT → FAILED`.
    Failed {
        /// Why (stored).
        reason: String,
    },
    /// Retryable, but the attempt cap or maximum age is reached:
    /// `IN_FLIGHT → PENDING → DEFERRED` (both checked against the table).
    Deferred {
        /// Why (stored).
        reason: String,
    },
}

impl Outcome {
    /// The state the item ends up in.
    pub fn target(&self) -> State {
        match self {
            Outcome::Submitted => State::Submitted,
            Outcome::Retry { .. } => State::Pending,
            Outcome::Failed { .. } => State::Failed,
            Outcome::Deferred { .. } => State::Deferred,
        }
    }
}

/// The result of one claimed item's attempts, handed to [`crate::Store::complete`].
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Item id.
    pub id: String,
    /// The lease owner the item was claimed under ([`Item::lease_owner`](super::Item::lease_owner)); the store
    /// refuses the completion if the lease has since passed to someone else.
    pub lease_owner: String,
    /// Where it goes.
    pub outcome: Outcome,
    /// The attempts made under this lease (usually one; two after a credential refresh).
    pub attempts: Vec<AttemptRecord>,
    /// The last thing the provider said, stored on the item.
    pub last_provider_code: Option<RemoteCode>,
    /// The remote's id of the message, stored on the item with an accepting outcome
    /// ([`Outcome::Submitted`]); ignored otherwise.
    pub message_id: Option<String>,
}

/// A request about to go on the wire, for [`crate::Store::mark_sent`]: the item and the
/// lease it is sent under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendMark {
    /// Item id.
    pub id: String,
    /// The lease owner it was claimed under ([`Item::lease_owner`](super::Item::lease_owner)).
    pub lease_owner: String,
}
