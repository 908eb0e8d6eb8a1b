//! Row mapping: stored rows to model types and back, and what a refused update means.

use std::time::Duration;

use abide_core::VerdictClass;

use crate::error::{Error, Result};
use crate::model::{
    from_ms, AttemptRecord, Body, DelayReason, Item, MovedBy, RemoteCode, Request, StoredAttempt,
};
use crate::state::{Event, IllegalTransition, State};

/// [`RemoteCode`] as the `(kind, code)` key of `attempt_counts`.
pub(crate) fn count_key(code: RemoteCode) -> (i64, i64) {
    match code {
        RemoteCode::NoResponse => (0, 0),
        RemoteCode::Http(s) => (1, i64::from(s)),
        RemoteCode::Smpp(c) => (2, i64::from(c)),
    }
}

/// The `(kind, code)` key of `attempt_counts` as a [`RemoteCode`].
pub(crate) fn count_code(kind: i64, code: i64) -> RemoteCode {
    match kind {
        1 => remote_code(Some(code), None),
        2 => remote_code(None, Some(code)),
        _ => RemoteCode::NoResponse,
    }
}

/// An `items` row as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawItem {
    id: String,
    provider: String,
    current_provider: String,
    method: String,
    path: String,
    headers_json: String,
    body_json: Option<String>,
    idempotency_key: String,
    created_at_ms: i64,
    state: String,
    attempts: i64,
    window_attempts: i64,
    window_start_ms: i64,
    next_attempt_at_ms: i64,
    last_provider_code: Option<String>,
    reason: Option<String>,
    moved_by: Option<String>,
    lease_owner: Option<String>,
    lease_expires_at_ms: Option<i64>,
    message_id: Option<String>,
}

/// The columns of one claimed item as [`super::sql::CLAIMED_SQLITE`] reads them back: id,
/// provider, method, path, headers (JSON), body (JSON), idempotency key, created (ms),
/// attempts, window attempts, window start (ms), next attempt (ms), last provider code,
/// reason, moved by, message id. The rest the claim itself set.
pub(crate) type ClaimedRow = (
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    i64,
    i64,
    i64,
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl RawItem {
    /// The row of an item claimed for `current_provider` (now in `state`) under `owner`
    /// until `expires_ms`.
    pub(crate) fn claimed(
        r: ClaimedRow,
        current_provider: &str,
        state: State,
        owner: &str,
        expires_ms: i64,
    ) -> Self {
        Self {
            id: r.0,
            provider: r.1,
            current_provider: current_provider.to_owned(),
            method: r.2,
            path: r.3,
            headers_json: r.4,
            body_json: r.5,
            idempotency_key: r.6,
            created_at_ms: r.7,
            state: state.as_str().to_owned(),
            attempts: r.8,
            window_attempts: r.9,
            window_start_ms: r.10,
            next_attempt_at_ms: r.11,
            last_provider_code: r.12,
            reason: r.13,
            moved_by: r.14,
            lease_owner: Some(owner.to_owned()),
            lease_expires_at_ms: Some(expires_ms),
            message_id: r.15,
        }
    }

    pub(crate) fn into_item(self) -> Result<Item> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            Error::Corrupt(format!("item {}: {what}: {e}", self.id))
        };
        let headers =
            serde_json::from_str(&self.headers_json).map_err(|e| corrupt("headers_json", &e))?;
        let body: Option<Body> = match &self.body_json {
            Some(b) => Some(serde_json::from_str(b).map_err(|e| corrupt("body_json", &e))?),
            None => None,
        };
        let state: State = self.state.parse().map_err(|e| corrupt("state", &e))?;
        let moved_by: Option<MovedBy> = match &self.moved_by {
            Some(h) => Some(h.parse().map_err(|e| corrupt("moved_by", &e))?),
            None => None,
        };
        let last_provider_code: Option<RemoteCode> = match &self.last_provider_code {
            Some(c) => Some(c.parse().map_err(|e| corrupt("last_provider_code", &e))?),
            None => None,
        };
        let method = crate::model::parse_method(&self.method).map_err(|e| corrupt("method", &e))?;
        Ok(Item {
            request: Request {
                method,
                path: self.path,
                headers,
                body,
            },
            id: self.id,
            provider: self.provider,
            current_provider: self.current_provider,
            idempotency_key: self.idempotency_key,
            created_at: from_ms(self.created_at_ms),
            state,
            attempts: clamp_u32(self.attempts),
            window_attempts: clamp_u32(self.window_attempts),
            window_start: from_ms(self.window_start_ms),
            next_attempt_at: from_ms(self.next_attempt_at_ms),
            last_provider_code,
            reason: self.reason,
            moved_by,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at_ms.map(from_ms),
            message_id: self.message_id,
        })
    }
}

/// An `attempts` row as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawAttempt {
    item_id: String,
    attempt_no: i64,
    at_ms: i64,
    provider: String,
    remote_http_status: Option<i64>,
    remote_smpp_code: Option<i64>,
    verdict_class: String,
    delay_ms: Option<i64>,
    delay_reason: Option<String>,
    latency_ms: i64,
    idempotency_key: String,
}

impl RawAttempt {
    pub(crate) fn into_attempt(self) -> Result<StoredAttempt> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            Error::Corrupt(format!(
                "attempt {} of item {}: {what}: {e}",
                self.attempt_no, self.item_id
            ))
        };
        let verdict_class: VerdictClass = self
            .verdict_class
            .parse()
            .map_err(|e| corrupt("verdict_class", &e))?;
        let delay_reason: Option<DelayReason> = match &self.delay_reason {
            Some(r) => Some(r.parse().map_err(|e| corrupt("delay_reason", &e))?),
            None => None,
        };
        Ok(StoredAttempt {
            item_id: self.item_id,
            attempt_no: clamp_u32(self.attempt_no),
            idempotency_key: self.idempotency_key,
            record: AttemptRecord {
                at: from_ms(self.at_ms),
                provider: self.provider,
                remote: remote_code(self.remote_http_status, self.remote_smpp_code),
                verdict_class,
                delay: self.delay_ms.map(ms_duration),
                delay_reason,
                latency: ms_duration(self.latency_ms),
            },
        })
    }
}

/// The two nullable code columns as a [`RemoteCode`].
pub(crate) fn remote_code(http: Option<i64>, smpp: Option<i64>) -> RemoteCode {
    match (http, smpp) {
        (Some(s), _) => RemoteCode::Http(u16::try_from(s).unwrap_or(0)),
        (None, Some(c)) => RemoteCode::Smpp(u32::try_from(c).unwrap_or(u32::MAX)),
        (None, None) => RemoteCode::NoResponse,
    }
}

/// [`RemoteCode`] split into the two code columns.
pub(crate) fn code_columns(code: RemoteCode) -> (Option<i64>, Option<i64>) {
    match code {
        RemoteCode::Http(s) => (Some(i64::from(s)), None),
        RemoteCode::Smpp(c) => (None, Some(i64::from(c))),
        RemoteCode::NoResponse => (None, None),
    }
}

pub(crate) fn clamp_u32(v: i64) -> u32 {
    u32::try_from(v.clamp(0, i64::from(u32::MAX))).unwrap_or(u32::MAX)
}

pub(crate) fn ms_duration(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Why a conditioned single-row update touched nothing.
pub(crate) fn refused(
    id: &str,
    row: Option<(String, Option<String>)>,
    expected: State,
    event: Event,
) -> Error {
    match row {
        None => Error::NotFound(id.to_owned()),
        Some((state, _)) => match state.parse::<State>() {
            Err(e) => Error::Corrupt(format!("item {id}: state: {e}")),
            Ok(from) if from != expected => {
                Error::IllegalTransition(IllegalTransition { from, event })
            }
            Ok(_) => Error::LeaseLost { id: id.to_owned() },
        },
    }
}

/// Why [`super::Store::cancel`] touched nothing: the item is gone, or in a state it cannot
/// be cancelled from (`IN_FLIGHT`, or final), as its current state says.
pub(crate) fn refused_cancel(id: &str, row: Option<(String, Option<String>)>) -> Error {
    match row {
        None => Error::NotFound(id.to_owned()),
        Some((state, _)) => match state.parse::<State>() {
            Err(e) => Error::Corrupt(format!("item {id}: state: {e}")),
            Ok(from) => Error::IllegalTransition(IllegalTransition {
                from,
                event: Event::Cancel,
            }),
        },
    }
}

/// Why [`super::SqlStore::requeue`] touched nothing: the item is gone, or in a state from
/// which a person's requeue is illegal (or it changed in between, which is reported the
/// same way as its current state says).
pub(crate) fn refused_requeue(id: &str, row: Option<(String, Option<String>)>) -> Error {
    match row {
        None => Error::NotFound(id.to_owned()),
        Some((state, _)) => match state.parse::<State>() {
            Err(e) => Error::Corrupt(format!("item {id}: state: {e}")),
            Ok(from) => Error::IllegalTransition(IllegalTransition {
                from,
                event: Event::Requeue,
            }),
        },
    }
}
