//! What the outbox stores: items, their requests, and one record per attempt.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::echo::clip;
use crate::error::Error;
use crate::state::State;

/// Longest accepted request path, in bytes.
pub const MAX_PATH_LEN: usize = 2048;
/// Longest accepted method, in bytes (the longest in the IANA HTTP Method Registry,
/// `UPDATEREDIRECTREF`, has 17).
pub const MAX_METHOD_LEN: usize = 32;
/// Longest accepted header name, in bytes.
pub const MAX_HEADER_NAME_LEN: usize = 256;
/// Longest accepted header value, in bytes (servers commonly refuse a header line over
/// 8 KiB, e.g. nginx's `large_client_header_buffers`).
pub const MAX_HEADER_VALUE_LEN: usize = 8192;
/// Longest provider name, in bytes (configured names are 1-64 of `A-Z a-z 0-9 - _ .`).
pub const MAX_PROVIDER_NAME_LEN: usize = 64;
/// Most non-secret headers an item may carry.
pub const MAX_HEADERS: usize = 32;
/// Longest accepted idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;
/// Largest accepted request body, in bytes (1 MiB), measured as sent: the UTF-8 text, or
/// the JSON as serialised. Items are stored whole in the database and read on every claim
/// and `status`; a provider API call (an SMS, a notification, a payment) is far smaller,
/// so a larger body is a mistake, not a message.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Headers abide sets itself or that belong to the connection, not the call: an item that
/// carried one would break the request (a wrong `Content-Length`, a second framing), route
/// it elsewhere (`Host`) or contradict the idempotency key abide sends. Compared in lower
/// case; every `Proxy-*` header is refused as well. Hop-by-hop headers: RFC 9110 §7.6.1;
/// `Content-Length`/`Transfer-Encoding`: RFC 9112 §6; `Idempotency-Key`:
/// draft-ietf-httpapi-idempotency-key-header.
const RESERVED_HEADERS: &[&str] = &[
    "idempotency-key",
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
];

/// Header names that carry secrets: credentials come from the provider's environment
/// variable, never from an item (items are stored in plain text and shown by `status`).
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
];

/// A request body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    /// Sent as `application/json`.
    Json(serde_json::Value),
    /// Sent as `text/plain; charset=utf-8`.
    Text(String),
}

/// The call to make: relative to the provider's base URL, never a full URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// HTTP method, upper case (e.g. `"POST"`).
    pub method: String,
    /// Path (and optional query) below the provider's base URL, starting with `/`.
    pub path: String,
    /// Non-secret headers. `Authorization`, cookies and API keys are refused.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Optional body.
    #[serde(default)]
    pub body: Option<Body>,
}

impl Request {
    /// A `POST` of a JSON body to `path`.
    pub fn post_json(path: impl Into<String>, body: serde_json::Value) -> Self {
        Self {
            method: "POST".into(),
            path: path.into(),
            headers: BTreeMap::new(),
            body: Some(Body::Json(body)),
        }
    }

    /// Check that the request cannot reach an arbitrary URL or carry a secret.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] naming the problem: a path broken by a rule of
    /// [`crate::path`] (an absolute URL, `//host`, a dot segment in any spelling, a
    /// backslash, `%2F`, control characters, ...; the message names the rule), a method
    /// over [`MAX_METHOD_LEN`] bytes or not one, a header name over [`MAX_HEADER_NAME_LEN`]
    /// or a value over [`MAX_HEADER_VALUE_LEN`] bytes, a bad header, a secret header, a header abide sets or that belongs to the
    /// connection (`Idempotency-Key`, `Content-Length`, `Transfer-Encoding`, `Host`,
    /// `Connection`, `Upgrade`, `TE`, `Trailer`, `Keep-Alive`, `Proxy-*`), or a body over
    /// [`MAX_BODY_BYTES`]. A provider's own idempotency-key and auth header names are
    /// checked by [`crate::Config::check_item`].
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |why: String| Err(Error::InvalidRequest(why));
        crate::path::check(&self.path)?;
        if self.method.len() > MAX_METHOD_LEN {
            return bad(format!(
                "method {} is longer than {MAX_METHOD_LEN} bytes",
                clip(&self.method)
            ));
        }
        if http::Method::from_bytes(self.method.as_bytes()).is_err()
            || self.method.is_empty()
            || self.method != self.method.to_ascii_uppercase()
        {
            return bad(format!(
                "method {} is not an upper-case HTTP method",
                clip(&self.method)
            ));
        }
        if self.headers.len() > MAX_HEADERS {
            return bad(format!("more than {MAX_HEADERS} headers"));
        }
        for (name, value) in &self.headers {
            if name.len() > MAX_HEADER_NAME_LEN {
                return bad(format!(
                    "header name {} is longer than {MAX_HEADER_NAME_LEN} bytes",
                    clip(name)
                ));
            }
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return bad(format!("header name {name:?} is not valid"));
            }
            if value.len() > MAX_HEADER_VALUE_LEN {
                return bad(format!(
                    "header {name:?}: value is {} bytes; the limit is {MAX_HEADER_VALUE_LEN}",
                    value.len()
                ));
            }
            if http::HeaderValue::from_str(value).is_err() {
                return bad(format!("header {name:?} has an invalid value"));
            }
            let lower = name.to_ascii_lowercase();
            if SECRET_HEADERS.contains(&lower.as_str()) {
                return bad(format!(
                    "header {name:?} carries a secret; credentials come from the provider's credentials_env"
                ));
            }
            if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
                return bad(format!(
                    "header {name:?} is set by abide or belongs to the connection; remove it \
                     (the idempotency key goes in the item's idempotency_key)"
                ));
            }
        }
        let body_len = match &self.body {
            None => 0,
            Some(Body::Text(t)) => t.len(),
            Some(Body::Json(v)) => serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()),
        };
        if body_len > MAX_BODY_BYTES {
            return bad(format!(
                "body is {body_len} bytes; the limit is {MAX_BODY_BYTES} bytes (1 MiB)"
            ));
        }
        Ok(())
    }
}

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

    /// Set the idempotency key (stable across every attempt; enqueueing another item
    /// with the same key is a no-op that returns the first item's id).
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
    /// False when an item with the same idempotency key already existed (a no-op).
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
    /// Attempts made in the current window (since enqueue or the last requeue); attempt
    /// caps count these.
    pub window_attempts: u32,
    /// Start of the current window (enqueue or last requeue, UTC; RFC 3339); the maximum
    /// age and the fail-over age are measured from here.
    #[serde(serialize_with = "ser::rfc3339")]
    pub window_start: SystemTime,
    /// Earliest time of the next attempt (UTC; RFC 3339).
    #[serde(serialize_with = "ser::rfc3339")]
    pub next_attempt_at: SystemTime,
    /// What the provider said last, e.g. `"http_429"` or `"smpp_0x58"`.
    pub last_provider_code: Option<String>,
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

/// Why the outbox itself (not the remote) put an item back in the queue; stored in the
/// `moved_by` column as [`MovedBy::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MovedBy {
    /// Its lease ran out (the worker crashed or hung): the next attempt repeats one whose
    /// answer was never seen. Reason shown: [`LEASE_EXPIRED_REASON`].
    LeaseExpired,
    /// It moved to the fail-over provider: the next attempt is its first there. Reason
    /// shown: [`FAILED_OVER_PREFIX`] and the provider it left.
    FailedOver,
}

impl MovedBy {
    /// Every value.
    pub const ALL: [MovedBy; 2] = [MovedBy::LeaseExpired, MovedBy::FailedOver];

    /// The stored name: `lease_expired` or `failed_over`.
    pub fn as_str(self) -> &'static str {
        match self {
            MovedBy::LeaseExpired => "lease_expired",
            MovedBy::FailedOver => "failed_over",
        }
    }
}

impl std::fmt::Display for MovedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for MovedBy {
    type Err = String;

    /// # Errors
    /// A name other than those of [`MovedBy::as_str`], quoted.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MovedBy::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or_else(|| format!("unknown moved_by {s:?}"))
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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteCode::Http(s) => write!(f, "http_{s}"),
            RemoteCode::Smpp(c) => write!(f, "smpp_0x{c:02x}"),
            RemoteCode::NoResponse => f.write_str("no_response"),
        }
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
    /// Our classification, e.g. `"throttle"` ([`abide_core::VerdictClass::as_str`]).
    pub verdict_class: String,
    /// The delay chosen before the next attempt, if any.
    #[serde(rename = "delay_ms", serialize_with = "ser::millis_opt")]
    pub delay: Option<Duration>,
    /// Why that delay (`"honoured"`, `"floored"`, `"capped"`, `"unparseable"`, `"absent"`,
    /// `"budget_exhausted"`).
    pub delay_reason: Option<String>,
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
    /// The lease owner the item was claimed under ([`Item::lease_owner`]); the store
    /// refuses the completion if the lease has since passed to someone else.
    pub lease_owner: String,
    /// Where it goes.
    pub outcome: Outcome,
    /// The attempts made under this lease (usually one; two after a credential refresh).
    pub attempts: Vec<AttemptRecord>,
    /// The last thing the provider said, stored on the item.
    pub last_provider_code: Option<String>,
    /// The remote's id of the message, stored on the item with an accepting outcome
    /// ([`Outcome::Submitted`]); ignored otherwise.
    pub message_id: Option<String>,
}

/// Items per state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `QUEUED`.
    pub queued: u64,
    /// `IN_FLIGHT`.
    pub in_flight: u64,
    /// `PENDING`.
    pub pending: u64,
    /// `SUBMITTED`.
    pub submitted: u64,
    /// `FAILED`.
    pub failed: u64,
    /// `DEFERRED`.
    pub deferred: u64,
}

impl Counts {
    /// The count for one state.
    pub fn get(&self, s: State) -> u64 {
        match s {
            State::Queued => self.queued,
            State::InFlight => self.in_flight,
            State::Pending => self.pending,
            State::Submitted => self.submitted,
            State::Failed => self.failed,
            State::Deferred => self.deferred,
        }
    }

    /// Mutable count for one state.
    pub fn get_mut(&mut self, s: State) -> &mut u64 {
        match s {
            State::Queued => &mut self.queued,
            State::InFlight => &mut self.in_flight,
            State::Pending => &mut self.pending,
            State::Submitted => &mut self.submitted,
            State::Failed => &mut self.failed,
            State::Deferred => &mut self.deferred,
        }
    }

    /// Items still being worked on (`QUEUED + IN_FLIGHT + PENDING`).
    pub fn active(&self) -> u64 {
        self.queued + self.in_flight + self.pending
    }

    /// All items.
    pub fn total(&self) -> u64 {
        State::ALL.iter().map(|&s| self.get(s)).sum()
    }
}

/// Which items to requeue: [`crate::Store::requeue_deferred`] applies it to `DEFERRED`
/// items, [`crate::Store::requeue_failed`] to `FAILED` ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequeueFilter {
    /// Only items currently targeting this provider.
    pub provider: Option<String>,
    /// Only these ids.
    pub ids: Option<Vec<String>>,
}

/// Which items [`crate::Store::list`] returns: newest first (by `created_at`, then id,
/// descending), at most `limit` of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only items in this state.
    pub state: Option<State>,
    /// Only items currently targeting this provider ([`Item::current_provider`]: after a
    /// fail-over, the second provider).
    pub provider: Option<String>,
    /// At most this many items; clamped to [`ListFilter::MAX_LIMIT`]. `0` returns none.
    pub limit: usize,
}

impl ListFilter {
    /// The most items one [`crate::Store::list`] call returns (10,000): a person's view,
    /// not an export; page with a narrower filter.
    pub const MAX_LIMIT: usize = 10_000;
}

/// Serde helpers: times as RFC 3339 strings (UTC, `Z`), durations as whole milliseconds,
/// so that JSON readers (`jq`, dashboards) need no knowledge of Rust's `SystemTime`.
mod ser {
    use std::time::{Duration, SystemTime};

    use serde::Serializer;

    /// RFC 3339 (RFC 3339 §5.6), e.g. `2025-06-15T14:13:20.123Z`.
    pub(super) fn format(t: SystemTime) -> String {
        time::OffsetDateTime::from(t)
            .format(&time::format_description::well_known::Rfc3339)
            // Only years beyond 9999 fail; the store's milliseconds cannot reach them.
            .unwrap_or_else(|_| "9999-12-31T23:59:59Z".to_owned())
    }

    pub(super) fn rfc3339<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(*t))
    }

    pub(super) fn rfc3339_opt<S: Serializer>(
        t: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&format(*t)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn millis_opt<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => millis(d, s),
            None => s.serialize_none(),
        }
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
mod tests {
    use super::*;

    fn req(path: &str) -> Request {
        Request::post_json(path, serde_json::json!({"to": "+1"}))
    }

    #[test]
    fn paths_never_name_a_host() {
        for p in [
            "https://evil.example/x",
            "//evil.example/x",
            "/\\evil",
            "x/y",
            "",
            "/a/../b",
            "/a b",
            "/redirect?u=http://x",
        ] {
            assert!(req(p).validate().is_err(), "{p:?} accepted");
        }
        for p in ["/", "/v1/messages", "/v1/messages?x=1&y=2"] {
            assert!(req(p).validate().is_ok(), "{p:?} refused");
        }
    }

    #[test]
    fn secret_headers_are_refused() {
        let mut r = req("/m");
        r.headers.insert("Authorization".into(), "Bearer x".into());
        assert!(r.validate().is_err());
        let mut r = req("/m");
        r.headers.insert("X-Trace".into(), "1".into());
        assert!(r.validate().is_ok());
    }

    #[test]
    fn headers_abide_sets_or_the_connection_owns_are_refused_by_name() {
        for name in [
            "Idempotency-Key",
            "content-length",
            "Transfer-Encoding",
            "Host",
            "Connection",
            "Upgrade",
            "TE",
            "Trailer",
            "Keep-Alive",
            "Proxy-Connection",
            "proxy-foo",
        ] {
            let mut r = req("/m");
            r.headers.insert(name.into(), "x".into());
            let err = r.validate().unwrap_err().to_string();
            assert!(err.contains(name), "{name}: {err}");
        }
        let mut r = req("/m");
        r.headers.insert("Tenant".into(), "1".into());
        assert!(
            r.validate().is_ok(),
            "a name merely starting like 'TE' is fine"
        );
    }

    #[test]
    fn bodies_over_one_mib_are_refused_with_the_limit() {
        let mut r = req("/m");
        r.body = Some(Body::Text("x".repeat(MAX_BODY_BYTES)));
        assert!(r.validate().is_ok());
        r.body = Some(Body::Text("x".repeat(MAX_BODY_BYTES + 1)));
        let err = r.validate().unwrap_err().to_string();
        assert!(err.contains("1048576"), "{err}");
        let big = serde_json::json!({"text": "x".repeat(MAX_BODY_BYTES)});
        let err = Request::post_json("/m", big).validate().unwrap_err();
        assert!(err.to_string().contains("limit"), "{err}");
    }

    #[test]
    fn methods_names_and_values_are_bounded_and_echoes_clipped() {
        let big = "X".repeat(50_000_000);
        let mut r = req("/m");
        r.method = big.clone();
        let err = r.validate().unwrap_err().to_string();
        assert!(
            err.len() < 500 && err.contains("longer than 32"),
            "{err:.300}"
        );
        let mut r = req("/m");
        r.headers.insert(big.clone(), "v".into());
        let err = r.validate().unwrap_err().to_string();
        assert!(
            err.len() < 500 && err.contains("longer than 256"),
            "{err:.300}"
        );
        let mut r = req("/m");
        r.headers.insert("X-Big".into(), big.clone());
        let err = r.validate().unwrap_err().to_string();
        assert!(
            err.len() < 500 && err.contains("limit is 8192"),
            "{err:.300}"
        );
        let err = NewItem::new(big.clone(), req("/m")).validate().unwrap_err();
        let err = err.to_string();
        assert!(
            err.len() < 500 && err.contains("longer than 64"),
            "{err:.300}"
        );
        let err = req(&format!("/{big}")).validate().unwrap_err().to_string();
        assert!(err.len() < 500 && err.contains("too-long"), "{err:.300}");
        let mut r = req("/m");
        r.method = "UPDATEREDIRECTREF".into();
        assert!(r.validate().is_ok());
    }

    #[test]
    fn idempotency_keys_are_visible_ascii() {
        let with = |k: &str| {
            NewItem::new("p", req("/m"))
                .with_idempotency_key(k)
                .validate()
        };
        for bad in ["", "a b", "tab\there", "é", &"k".repeat(256)] {
            let err = with(bad).unwrap_err().to_string();
            assert!(err.contains("visible ASCII"), "{bad:?}: {err}");
        }
        for good in ["a", "order-42", "!~", &"k".repeat(255)] {
            assert!(with(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn item_ids_are_v7_from_the_given_time() {
        let t = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        let id = new_item_id(t);
        let u = Uuid::parse_str(&id).ok();
        assert_eq!(u.map(|u| u.get_version_num()), Some(7));
        let (secs, _) = u
            .and_then(|u| u.get_timestamp())
            .map(|ts| ts.to_unix())
            .unwrap_or_default();
        assert_eq!(secs, 1_750_000_000);
    }

    #[test]
    fn moved_by_names_round_trip_and_unknown_ones_are_named() {
        for m in MovedBy::ALL {
            assert_eq!(m.as_str().parse::<MovedBy>(), Ok(m));
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        let err = "failed_over_from:x".parse::<MovedBy>().unwrap_err();
        assert!(err.contains("failed_over_from:x"), "{err}");
    }

    #[test]
    fn times_serialise_as_rfc3339_and_durations_as_milliseconds() {
        let t = UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
        let item = Item {
            id: "i".into(),
            provider: "p".into(),
            current_provider: "p".into(),
            request: req("/m"),
            idempotency_key: "k".into(),
            created_at: t,
            state: State::Pending,
            attempts: 1,
            window_attempts: 1,
            window_start: t,
            next_attempt_at: t + Duration::from_secs(2),
            last_provider_code: None,
            reason: None,
            moved_by: None,
            lease_owner: None,
            lease_expires_at: None,
            message_id: None,
        };
        let v = serde_json::to_value(&item).unwrap();
        assert_eq!(v["created_at"], "2025-06-15T15:06:40.123Z");
        assert_eq!(v["next_attempt_at"], "2025-06-15T15:06:42.123Z");
        assert_eq!(v["lease_expires_at"], serde_json::Value::Null);
        assert!(
            v.get("moved_by").is_none(),
            "JSON unchanged for unmoved items"
        );
        let moved = Item {
            moved_by: Some(MovedBy::LeaseExpired),
            ..item
        };
        let v = serde_json::to_value(&moved).unwrap();
        assert_eq!(v["moved_by"], "lease_expired");
        let a = StoredAttempt {
            item_id: "i".into(),
            attempt_no: 1,
            idempotency_key: "k".into(),
            record: AttemptRecord {
                at: t,
                provider: "p".into(),
                remote: RemoteCode::Http(429),
                verdict_class: "throttle".into(),
                delay: Some(Duration::from_millis(1500)),
                delay_reason: Some("honoured".into()),
                latency: Duration::from_micros(12_700),
            },
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["at"], "2025-06-15T15:06:40.123Z");
        assert_eq!(v["delay_ms"], 1500);
        assert_eq!(v["latency_ms"], 12);
        assert_eq!(v["remote"], serde_json::json!({"http": 429}));
    }

    #[test]
    fn ms_round_trip() {
        let t = UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
        assert_eq!(from_ms(to_ms(t)), t);
    }
}
