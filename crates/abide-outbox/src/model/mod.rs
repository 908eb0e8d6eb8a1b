//! What the outbox stores: items, their requests, and one record per attempt.
//!
//! Files: `request` (the call and its limits), `attempt` (attempt records, completions,
//! send marks), `query` (counts and filters), `ser` (JSON forms of times and durations).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::echo::clip;
use crate::error::Error;
use crate::state::State;

mod attempt;
pub mod headers;
mod query;
mod request;
mod ser;

pub use abide_core::DelayReason;
pub use attempt::{AttemptRecord, Completion, Outcome, RemoteCode, SendMark, StoredAttempt};
pub use query::{Counts, ListFilter, RequeueFilter};
pub use request::{
    parse_method, Body, Request, MAX_BODY_BYTES, MAX_HEADERS, MAX_HEADER_NAME_LEN,
    MAX_HEADER_VALUE_LEN, MAX_IDEMPOTENCY_KEY_LEN, MAX_METHOD_LEN, MAX_PATH_LEN,
    MAX_PROVIDER_NAME_LEN,
};

/// An item to enqueue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewItem {
    /// Name of a configured provider.
    pub provider: String,
    /// The call to make.
    pub request: Request,
    /// Sent in the provider's idempotency-key header on every attempt. When `None` the
    /// item id is used, which makes re-enqueueing the same input *not* a no-op: callers
    /// that want resumable batches (`abide send`) should derive a key from the input.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

impl NewItem {
    /// An item for `provider` without a caller-chosen idempotency key.
    pub fn new(provider: impl Into<String>, request: Request) -> Self {
        Self {
            provider: provider.into(),
            request,
            idempotency_key: None,
        }
    }

    /// Set the idempotency key (stable across every attempt; enqueueing the same
    /// message again with the same key is a no-op that returns the first item's id, and a
    /// different message with it is refused: [`Error::KeyConflict`]).
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Check request and key.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`].
    pub fn validate(&self) -> Result<(), Error> {
        self.request.validate()?;
        if self.provider.is_empty() {
            return Err(Error::InvalidRequest("empty provider name".into()));
        }
        if self.provider.len() > MAX_PROVIDER_NAME_LEN {
            return Err(Error::InvalidRequest(format!(
                "provider name {} is longer than {MAX_PROVIDER_NAME_LEN} bytes",
                clip(&self.provider)
            )));
        }
        if let Some(k) = &self.idempotency_key {
            // Visible ASCII (0x21-0x7E, RFC 5234 VCHAR): a space or tab would be trimmed or
            // split by some servers and proxies, and the key must reach the provider intact.
            if k.is_empty()
                || k.len() > MAX_IDEMPOTENCY_KEY_LEN
                || !k.bytes().all(|b| (0x21..=0x7e).contains(&b))
            {
                return Err(Error::InvalidRequest(format!(
                    "idempotency key must be 1..={MAX_IDEMPOTENCY_KEY_LEN} visible ASCII bytes \
                     (0x21-0x7E; no spaces)"
                )));
            }
        }
        Ok(())
    }
}

/// A new UUID v7 string whose timestamp is `now` (from the caller's clock, not the OS).
pub fn new_item_id(now: SystemTime) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let ts = uuid::Timestamp::from_unix(uuid::NoContext, d.as_secs(), d.subsec_nanos());
    Uuid::new_v7(ts).to_string()
}

/// Result of enqueueing one item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Enqueued {
    /// The item id (the existing one when `created` is false).
    pub id: String,
    /// False when an item with the same idempotency key and the same message already
    /// existed (a no-op; a different message with that key is refused instead).
    pub created: bool,
}

/// A stored item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// UUID v7, time-ordered.
    pub id: String,
    /// The provider the item was enqueued for (kept after a fail-over).
    pub provider: String,
    /// The provider it is currently sent to (differs from `provider` after a fail-over).
    pub current_provider: String,
    /// The call.
    pub request: Request,
    /// Sent on every attempt.
    pub idempotency_key: String,
    /// When it was enqueued (UTC; serialised as RFC 3339).
    #[serde(serialize_with = "ser::rfc3339")]
    pub created_at: SystemTime,
    /// Where it is.
    pub state: State,
    /// Attempts made so far, in total.
    pub attempts: u32,
    /// Attempts made in the current window (since enqueue, the last requeue or fail-over); attempt
    /// caps count these.
    pub window_attempts: u32,
    /// Start of the current window (enqueue, last requeue or fail-over, UTC; RFC 3339); the maximum
    /// age and the fail-over age are measured from here.
    #[serde(serialize_with = "ser::rfc3339")]
    pub window_start: SystemTime,
    /// Earliest time of the next attempt (UTC; RFC 3339).
    #[serde(serialize_with = "ser::rfc3339")]
    pub next_attempt_at: SystemTime,
    /// What the provider said last; serialised (and stored) as its text, e.g. `http_429`
    /// or `smpp_0x58`.
    #[serde(serialize_with = "ser::display_opt")]
    pub last_provider_code: Option<RemoteCode>,
    /// Why it is in its state (failure reason, deferral reason, ...): free text for
    /// people, never decided on (see [`Item::moved_by`] for what the outbox decides on).
    pub reason: Option<String>,
    /// Set when the outbox itself put the item back in the queue without an answer from
    /// the remote (its lease was reclaimed, or it failed over); cleared by the next
    /// completion or requeue. The retry budget reads it ([`Item::lease_reclaimed`],
    /// [`Item::just_failed_over`]). Left out of JSON when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_by: Option<MovedBy>,
    /// The worker holding the lease while `IN_FLIGHT`.
    pub lease_owner: Option<String>,
    /// When the lease runs out (UTC; RFC 3339).
    #[serde(serialize_with = "ser::rfc3339_opt")]
    pub lease_expires_at: Option<SystemTime>,
    /// The remote's id of the accepted message (an SMSC's `submit_sm_resp` `message_id`),
    /// which its delivery receipts name. Left out of JSON when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// Prefix of [`Item::reason`] set by a fail-over (`failed_over_from:<provider>`). Shown
/// to people only; the outbox decides on [`Item::moved_by`].
pub const FAILED_OVER_PREFIX: &str = "failed_over_from:";

/// [`Item::reason`] of an item whose lease was reclaimed ([`crate::Store::reclaim_expired`],
/// [`crate::Store::reclaim_all_in_flight`]): its worker died or hung, the remote said
/// nothing we know of. Shown to people only; the outbox decides on [`Item::moved_by`].
pub const LEASE_EXPIRED_REASON: &str = "lease_expired";

abide_core::named_enum! {
    /// Why the outbox itself (not the remote) put an item back in the queue; stored in the
    /// `moved_by` column as [`MovedBy::as_str`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum MovedBy("moved_by") {
        /// Its lease ran out (the worker crashed or hung): the next attempt repeats one
        /// whose answer was never seen. Reason shown: [`LEASE_EXPIRED_REASON`].
        LeaseExpired = "lease_expired",
        /// It moved to the fail-over provider: the next attempt is its first there. Reason
        /// shown: [`FAILED_OVER_PREFIX`] and the provider it left.
        FailedOver = "failed_over",
    }
}

impl Item {
    /// True when the item's last event was a fail-over: its next attempt is its first on
    /// the new provider (so it draws no retry budget there).
    pub fn just_failed_over(&self) -> bool {
        self.moved_by == Some(MovedBy::FailedOver)
    }

    /// True when the item's last event was a reclaimed lease (a crash or a hang): its
    /// next attempt repeats one whose answer was never seen, not one the remote refused,
    /// so it draws no retry budget.
    pub fn lease_reclaimed(&self) -> bool {
        self.moved_by == Some(MovedBy::LeaseExpired)
    }
}

/// Milliseconds since the Unix epoch, as stored (times before 1970 are stored as 0).
pub(crate) fn to_ms(t: SystemTime) -> i64 {
    let ms = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Inverse of [`to_ms`].
pub(crate) fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests;
