//! SQL and row decoding shared by the SQLite and Postgres stores.
//!
//! Both backends accept `$N` placeholders and `UPDATE … RETURNING`, so the statements are
//! written once; only claiming differs (Postgres adds `FOR UPDATE SKIP LOCKED`, SQLite has
//! a single writer). Completions are written in batches generated per size
//! ([`complete_sql`], [`insert_attempts_sql`]), with anonymous `?` placeholders on SQLite
//! ([`Placeholders`]). [`store_impl!`] stamps the [`super::Store`] implementation onto a
//! backend type that has a `pool` field and a `begin_write` method.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::{from_ms, AttemptRecord, Body, Item, RemoteCode, Request, StoredAttempt};
use crate::state::State;

/// Columns of `items` decoded into [`RawItem`].
macro_rules! item_cols {
    () => {
        "id, provider, current_provider, method, path, headers_json, body_json, \
         idempotency_key, created_at_ms, state, attempts, window_attempts, window_start_ms, \
         next_attempt_at_ms, last_provider_code, reason, lease_owner, lease_expires_at_ms"
    };
}

/// The SQLite claim statement: a single `UPDATE … RETURNING`, atomic because SQLite has
/// one writer. The outer state check is written `+state` so that the planner cannot use
/// `items_state` for it: with a plain `state = $6` it walked every `QUEUED` row and tested
/// `id IN (…)` on each, one full pass over the queue per claim (O(queue length)).
macro_rules! claim_sql_sqlite {
    () => {
        concat!(
            "UPDATE items SET state = $1, lease_owner = $2, lease_expires_at_ms = $3, \
             updated_at_ms = $4 \
             WHERE id IN (SELECT id FROM items WHERE current_provider = $5 AND state = $6 \
             AND next_attempt_at_ms <= $4 ORDER BY next_attempt_at_ms LIMIT $7) \
             AND +state = $6 RETURNING ",
            item_cols!()
        )
    };
}

/// The Postgres claim statement. The rows are picked in a CTE with `FOR UPDATE SKIP
/// LOCKED` (a `LIMIT` inside `IN (…)` may be re-evaluated per row and over-claim).
macro_rules! claim_sql_postgres {
    () => {
        concat!(
            "WITH picked AS (SELECT id AS picked_id FROM items WHERE current_provider = $5 \
             AND state = $6 AND next_attempt_at_ms <= $4 ORDER BY next_attempt_at_ms \
             LIMIT $7 FOR UPDATE SKIP LOCKED) \
             UPDATE items SET state = $1, lease_owner = $2, lease_expires_at_ms = $3, \
             updated_at_ms = $4 FROM picked WHERE id = picked_id AND state = $6 RETURNING ",
            item_cols!()
        )
    };
}

pub(crate) const SQL_INSERT: &str = "INSERT INTO items (id, provider, current_provider, \
    method, path, headers_json, body_json, idempotency_key, created_at_ms, state, attempts, \
    window_attempts, window_start_ms, next_attempt_at_ms, updated_at_ms) \
    VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, 0, 0, $8, $8, $8) \
    ON CONFLICT (idempotency_key) DO NOTHING RETURNING id";

pub(crate) const SQL_ID_BY_KEY: &str = "SELECT id FROM items WHERE idempotency_key = $1";

pub(crate) const SQL_PROMOTE_ONE_PROVIDER: &str = "UPDATE items SET state = $1, \
    updated_at_ms = $2 WHERE current_provider = $3 AND state = $4 AND next_attempt_at_ms <= $2";

pub(crate) const SQL_PROMOTE_ALL: &str = "UPDATE items SET state = $1, updated_at_ms = $2 \
    WHERE state = $3 AND next_attempt_at_ms <= $2";

pub(crate) const SQL_STATE_OF: &str = "SELECT state, lease_owner FROM items WHERE id = $1";

/// `$4` is [`crate::model::LEASE_EXPIRED_REASON`].
pub(crate) const SQL_RECLAIM: &str = "UPDATE items SET state = $1, attempts = attempts + 1, \
    window_attempts = window_attempts + 1, next_attempt_at_ms = $2, reason = $4, \
    lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 \
    WHERE state = $3 AND lease_expires_at_ms <= $2";

/// [`SQL_RECLAIM`] whatever the lease: for a caller that knows every lease holder is dead.
pub(crate) const SQL_RECLAIM_ALL: &str = "UPDATE items SET state = $1, \
    attempts = attempts + 1, window_attempts = window_attempts + 1, next_attempt_at_ms = $2, \
    reason = $4, lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 \
    WHERE state = $3";

pub(crate) const SQL_DEFER_ONE: &str = "UPDATE items SET state = $1, reason = $2, \
    updated_at_ms = $3 WHERE id = $4 AND state = $5";

pub(crate) const SQL_DEFER_OLD: &str = "UPDATE items SET state = $1, reason = $2, \
    updated_at_ms = $3 WHERE current_provider = $4 AND state = $5 AND window_start_ms <= $6";

/// `$4` is a provider name or `''` for any; `$5` an id or `''` for any.
pub(crate) const SQL_REQUEUE: &str = "UPDATE items SET state = $1, window_attempts = 0, \
    window_start_ms = $2, next_attempt_at_ms = $2, reason = NULL, updated_at_ms = $2 \
    WHERE state = $3 AND ($4 = '' OR current_provider = $4) AND ($5 = '' OR id = $5)";

pub(crate) const SQL_FAIL_OVER: &str = "UPDATE items SET state = $1, current_provider = $2, \
    next_attempt_at_ms = $3, reason = $4, updated_at_ms = $3 \
    WHERE current_provider = $5 AND state = $6 AND window_start_ms <= $7";

/// `$1` is a state name or `''` for all.
pub(crate) const SQL_REASON_COUNTS: &str = "SELECT state, COALESCE(reason, ''), COUNT(*) \
    FROM items WHERE ($1 = '' OR state = $1) GROUP BY state, COALESCE(reason, '') \
    ORDER BY 3 DESC, 1, 2";

/// `$1` is a state name or `''`, `$2` a provider name or `''`, `$3` the limit.
pub(crate) const SQL_LIST: &str = concat!(
    "SELECT ",
    item_cols!(),
    " FROM items WHERE ($1 = '' OR state = $1) AND ($2 = '' OR current_provider = $2) \
     ORDER BY created_at_ms DESC, id DESC LIMIT $3"
);

/// `$1` is a provider name or `''` for all.
pub(crate) const SQL_COUNTS: &str = "SELECT state, COUNT(*) FROM items \
    WHERE ($1 = '' OR current_provider = $1) GROUP BY state";

pub(crate) const SQL_OLDEST_WAITING: &str =
    "SELECT MIN(window_start_ms) FROM items WHERE state IN ($1, $2)";

pub(crate) const SQL_ANY_ACTIVE: &str = "SELECT 1 FROM items \
    WHERE current_provider = $1 AND state IN ($2, $3, $4) LIMIT 1";

pub(crate) const SQL_NEXT_DUE: &str = "SELECT MIN(next_attempt_at_ms) FROM items \
    WHERE current_provider = $1 AND state IN ($2, $3)";

pub(crate) const SQL_GET: &str = concat!("SELECT ", item_cols!(), " FROM items WHERE id = $1");

pub(crate) const SQL_ATTEMPTS: &str = "SELECT item_id, attempt_no, at_ms, provider, \
    remote_http_status, remote_smpp_code, verdict_class, delay_ms, delay_reason, latency_ms, \
    idempotency_key FROM attempts WHERE item_id = $1 ORDER BY attempt_no";

/// `$1` is a provider name or `''` for all. Reads the small `attempt_counts` table (one
/// row per provider and code), not the attempts.
pub(crate) const SQL_REMOTE_COUNTS: &str = "SELECT kind, code, CAST(SUM(n) AS BIGINT) \
    FROM attempt_counts WHERE ($1 = '' OR provider = $1) \
    GROUP BY kind, code ORDER BY 3 DESC, 1, 2";

/// Add `$4` attempts to the counter of (provider `$1`, kind `$2`, code `$3`).
pub(crate) const SQL_BUMP_COUNT: &str = "INSERT INTO attempt_counts (provider, kind, code, n) \
    VALUES ($1, $2, $3, $4) ON CONFLICT (provider, kind, code) \
    DO UPDATE SET n = attempt_counts.n + excluded.n";

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

/// Most completions in one batched `UPDATE` (7 parameters each, well under SQLite's
/// 32,766 and Postgres' 65,535).
pub(crate) const MAX_COMPLETE_ROWS: usize = 256;
/// Most attempts rows in one multi-row `INSERT` (11 parameters each).
pub(crate) const MAX_ATTEMPT_ROWS: usize = 256;

/// One completion, checked against the state table and reduced to its column values.
#[derive(Debug)]
pub(crate) struct Planned<'a> {
    pub(crate) index: usize,
    pub(crate) id: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) event: crate::state::Event,
    pub(crate) target: State,
    pub(crate) n: i64,
    pub(crate) next: Option<i64>,
    pub(crate) code: Option<&'a str>,
    pub(crate) reason: Option<&'a str>,
}

/// The target state and column values of completion `index`, or why the state table
/// refuses it (nothing is written for it then).
pub(crate) fn plan_completion(index: usize, c: &crate::model::Completion) -> Result<Planned<'_>> {
    use crate::model::Outcome;
    use crate::state::{transition, Event};
    let (event, then) = match &c.outcome {
        Outcome::Submitted => (Event::Accept, None),
        Outcome::Retry { .. } => (Event::Retry, None),
        Outcome::Failed { .. } => (Event::Fail, None),
        Outcome::Deferred { .. } => (Event::Retry, Some(Event::Defer)),
    };
    let mut target = transition(State::InFlight, event)?;
    if let Some(e) = then {
        target = transition(target, e)?;
    }
    let (next, reason) = match &c.outcome {
        Outcome::Submitted => (None, None),
        Outcome::Retry {
            next_attempt_at,
            reason,
        } => (
            Some(crate::model::to_ms(*next_attempt_at)),
            Some(reason.as_str()),
        ),
        Outcome::Failed { reason } | Outcome::Deferred { reason } => (None, Some(reason.as_str())),
    };
    Ok(Planned {
        index,
        id: &c.id,
        owner: &c.lease_owner,
        event,
        target,
        n: i64::try_from(c.attempts.len()).unwrap_or(i64::MAX),
        next,
        code: c.last_provider_code.as_deref(),
        reason,
    })
}

/// Split into rounds in which every id occurs once, keeping order: a second completion
/// of the same item is applied after the first, exactly as one-by-one application would
/// (and is then refused, the item having left `IN_FLIGHT`). A joined `UPDATE` could not
/// promise that for two rows matching one item.
pub(crate) fn rounds(planned: Vec<Planned<'_>>) -> Vec<Vec<Planned<'_>>> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut rounds: Vec<Vec<Planned<'_>>> = Vec::new();
    for p in planned {
        let r = seen.entry(p.id).or_insert(0);
        if rounds.len() <= *r {
            rounds.push(Vec::new());
        }
        rounds[*r].push(p);
        *r += 1;
    }
    rounds
}

/// Consecutive chunks whose lengths are powers of two (at most `max`, itself a power of
/// two): batched statements come in at most log2(max) + 1 shapes, so the per-connection
/// prepared-statement cache keeps them all instead of re-preparing every odd size.
pub(crate) fn pow2_chunks<T>(items: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = rest.len().min(max);
        let len = 1usize << (usize::BITS - 1 - len.leading_zeros());
        let (head, tail) = rest.split_at(len);
        rest = tail;
        Some(head)
    })
}

/// How a backend writes bind parameters in generated statements.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Placeholders {
    /// `$1, $2, …` (Postgres).
    Numbered,
    /// `?` bound in textual order (SQLite). SQLite resolves a named parameter such as
    /// `$7` by a linear search of the statement's names, so binding n of them costs
    /// O(n²): 40 % of a 256-row insert's time went there.
    Anonymous,
}

impl Placeholders {
    fn push(self, sql: &mut String, n: usize) {
        match self {
            Placeholders::Numbered => {
                sql.push('$');
                sql.push_str(&n.to_string());
            }
            Placeholders::Anonymous => sql.push('?'),
        }
    }
}

/// Batched completion of `rows` items. Bind, in order: per item id, target state,
/// attempts made, next attempt (ms or NULL), provider code, reason, lease owner; then now
/// (ms) and the source state (`IN_FLIGHT`). Conditioned per row on the state and lease
/// owner like a single-row update; returns the rows it moved.
pub(crate) fn complete_sql(rows: usize, ph: Placeholders) -> String {
    const TYPES: [&str; 7] = ["TEXT", "TEXT", "BIGINT", "BIGINT", "TEXT", "TEXT", "TEXT"];
    let mut sql = String::with_capacity(600 + rows * 150);
    sql.push_str("WITH v (id, target, n, next_ms, code, reason, owner) AS (VALUES ");
    let mut n = 0;
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for (k, ty) in TYPES.iter().enumerate() {
            if k > 0 {
                sql.push_str(", ");
            }
            n += 1;
            sql.push_str("CAST(");
            ph.push(&mut sql, n);
            sql.push_str(" AS ");
            sql.push_str(ty);
            sql.push(')');
        }
        sql.push(')');
    }
    sql.push_str(
        ") UPDATE items SET state = v.target, attempts = attempts + v.n, \
         window_attempts = window_attempts + v.n, \
         next_attempt_at_ms = COALESCE(v.next_ms, next_attempt_at_ms), \
         last_provider_code = COALESCE(v.code, last_provider_code), reason = v.reason, \
         lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = ",
    );
    ph.push(&mut sql, n + 1);
    sql.push_str(" FROM v WHERE items.id = v.id AND items.state = ");
    ph.push(&mut sql, n + 2);
    sql.push_str(
        " AND items.lease_owner = v.owner \
         RETURNING items.id, items.attempts, items.idempotency_key",
    );
    sql
}

/// One attempts row waiting for the multi-row insert.
#[derive(Debug)]
pub(crate) struct AttemptRow<'a> {
    pub(crate) item_id: &'a str,
    pub(crate) attempt_no: i64,
    pub(crate) record: &'a AttemptRecord,
    pub(crate) key: String,
}

/// `INSERT INTO attempts` of `rows` rows, 11 parameters each in the order of the column
/// list.
pub(crate) fn insert_attempts_sql(rows: usize, ph: Placeholders) -> String {
    let mut sql = String::with_capacity(200 + rows * 60);
    sql.push_str(
        "INSERT INTO attempts (item_id, attempt_no, at_ms, provider, remote_http_status, \
         remote_smpp_code, verdict_class, delay_ms, delay_reason, latency_ms, \
         idempotency_key) VALUES ",
    );
    let mut n = 0;
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for k in 0..11 {
            if k > 0 {
                sql.push_str(", ");
            }
            n += 1;
            ph.push(&mut sql, n);
        }
        sql.push(')');
    }
    sql
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
    lease_owner: Option<String>,
    lease_expires_at_ms: Option<i64>,
}

impl RawItem {
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
        Ok(Item {
            request: Request {
                method: self.method,
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
            last_provider_code: self.last_provider_code,
            reason: self.reason,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at_ms.map(from_ms),
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
    pub(crate) fn into_attempt(self) -> StoredAttempt {
        StoredAttempt {
            item_id: self.item_id,
            attempt_no: clamp_u32(self.attempt_no),
            idempotency_key: self.idempotency_key,
            record: AttemptRecord {
                at: from_ms(self.at_ms),
                provider: self.provider,
                remote: remote_code(self.remote_http_status, self.remote_smpp_code),
                verdict_class: self.verdict_class,
                delay: self.delay_ms.map(ms_duration),
                delay_reason: self.delay_reason,
                latency: ms_duration(self.latency_ms),
            },
        }
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
    event: crate::state::Event,
) -> Error {
    match row {
        None => Error::NotFound(id.to_owned()),
        Some((state, _)) => match state.parse::<State>() {
            Err(e) => Error::Corrupt(format!("item {id}: state: {e}")),
            Ok(from) if from != expected => {
                Error::IllegalTransition(crate::state::IllegalTransition { from, event })
            }
            Ok(_) => Error::LeaseLost { id: id.to_owned() },
        },
    }
}

/// Why [`super::Store::requeue`] touched nothing: the item is gone, or in a state from
/// which a person's requeue is illegal (or it changed in between, which is reported the
/// same way as its current state says).
pub(crate) fn refused_requeue(id: &str, row: Option<(String, Option<String>)>) -> Error {
    use crate::state::{Event, IllegalTransition};
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

/// Implements [`super::Store`] for a backend with `self.pool` (writes), `self.read_pool()`
/// (queries that change nothing) and `self.begin_write()`.
macro_rules! store_impl {
    ($ty:ty, claim = $claim_sql:expr, placeholders = $ph:expr) => {
        impl $ty {
            /// `from → QUEUED` (a person's requeue) for the items matching `filter`, in one
            /// transaction. Returns how many moved.
            async fn requeue_from(
                &self,
                from: $crate::State,
                filter: &$crate::model::RequeueFilter,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                use $crate::store::common::*;
                let to = $crate::transition(from, $crate::Event::Requeue)?;
                let provider = filter.provider.as_deref().unwrap_or("");
                let now_ms = $crate::model::to_ms(now);
                let mut tx = self.begin_write().await?;
                let mut n = 0;
                let all = [String::new()];
                let ids: &[String] = match &filter.ids {
                    Some(ids) => ids,
                    None => &all,
                };
                for id in ids {
                    if filter.ids.is_some() && id.is_empty() {
                        continue;
                    }
                    n += sqlx::query(SQL_REQUEUE)
                        .bind(to.as_str())
                        .bind(now_ms)
                        .bind(from.as_str())
                        .bind(provider)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                }
                tx.commit().await?;
                Ok(n)
            }

            /// `IN_FLIGHT → PENDING` (lease expired) for the rows `sql` selects: the expired
            /// leases (`SQL_RECLAIM`) or every one at start-up (`SQL_RECLAIM_ALL`).
            async fn reclaim_with(
                &self,
                sql: &'static str,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                let to = $crate::transition($crate::State::InFlight, $crate::Event::LeaseExpired)?;
                let r = sqlx::query(sql)
                    .bind(to.as_str())
                    .bind($crate::model::to_ms(now))
                    .bind($crate::State::InFlight.as_str())
                    .bind($crate::model::LEASE_EXPIRED_REASON)
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected())
            }
        }

        impl $crate::store::Store for $ty {
            async fn enqueue(
                &self,
                items: &[$crate::model::NewItem],
                now: std::time::SystemTime,
            ) -> $crate::Result<Vec<$crate::model::Enqueued>> {
                use $crate::store::common::*;
                for it in items {
                    it.validate()?;
                }
                let now_ms = $crate::model::to_ms(now);
                let state = $crate::State::Queued.as_str();
                let mut out = Vec::with_capacity(items.len());
                let mut tx = self.begin_write().await?;
                for it in items {
                    let id = $crate::model::new_item_id(now);
                    let key = it.idempotency_key.clone().unwrap_or_else(|| id.clone());
                    let headers = serde_json::to_string(&it.request.headers)
                        .map_err(|e| $crate::Error::InvalidRequest(e.to_string()))?;
                    let body = it
                        .request
                        .body
                        .as_ref()
                        .map(serde_json::to_string)
                        .transpose()
                        .map_err(|e| $crate::Error::InvalidRequest(e.to_string()))?;
                    let inserted: Option<(String,)> = sqlx::query_as(SQL_INSERT)
                        .bind(&id)
                        .bind(&it.provider)
                        .bind(&it.request.method)
                        .bind(&it.request.path)
                        .bind(headers)
                        .bind(body)
                        .bind(&key)
                        .bind(now_ms)
                        .bind(state)
                        .fetch_optional(&mut *tx)
                        .await?;
                    let enq = match inserted {
                        Some((id,)) => $crate::model::Enqueued { id, created: true },
                        None => {
                            let (id,): (String,) = sqlx::query_as(SQL_ID_BY_KEY)
                                .bind(&key)
                                .fetch_one(&mut *tx)
                                .await?;
                            $crate::model::Enqueued { id, created: false }
                        }
                    };
                    out.push(enq);
                }
                tx.commit().await?;
                Ok(out)
            }

            async fn claim(
                &self,
                provider: &str,
                owner: &str,
                now: std::time::SystemTime,
                lease: std::time::Duration,
                limit: usize,
            ) -> $crate::Result<Vec<$crate::Item>> {
                use $crate::store::common::*;
                if limit == 0 {
                    return Ok(Vec::new());
                }
                self.promote_due(Some(provider), now).await?;
                let to = $crate::transition($crate::State::Queued, $crate::Event::Claim)?;
                let rows: Vec<RawItem> = sqlx::query_as($claim_sql)
                    .bind(to.as_str())
                    .bind(owner)
                    .bind($crate::model::to_ms(now) + duration_ms(lease))
                    .bind($crate::model::to_ms(now))
                    .bind(provider)
                    .bind($crate::State::Queued.as_str())
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                    .fetch_all(&self.pool)
                    .await?;
                let mut items = rows
                    .into_iter()
                    .map(RawItem::into_item)
                    .collect::<$crate::Result<Vec<_>>>()?;
                items.sort_by(|a, b| (a.next_attempt_at, &a.id).cmp(&(b.next_attempt_at, &b.id)));
                Ok(items)
            }

            async fn complete(
                &self,
                completions: &[$crate::model::Completion],
                now: std::time::SystemTime,
            ) -> $crate::Result<Vec<$crate::Result<$crate::State>>> {
                use $crate::store::common::*;
                use $crate::State;
                let now_ms = $crate::model::to_ms(now);
                let mut out: Vec<Option<$crate::Result<State>>> =
                    completions.iter().map(|_| None).collect();
                let mut planned = Vec::with_capacity(completions.len());
                for (i, c) in completions.iter().enumerate() {
                    match plan_completion(i, c) {
                        Ok(p) => planned.push(p),
                        Err(e) => out[i] = Some(Err(e)),
                    }
                }
                let mut tx = self.begin_write().await?;
                for round in rounds(planned) {
                    for chunk in pow2_chunks(&round, MAX_COMPLETE_ROWS) {
                        let sql = complete_sql(chunk.len(), $ph);
                        let mut q = sqlx::query_as::<_, (String, i64, String)>(&sql);
                        for p in chunk {
                            q = q
                                .bind(p.id)
                                .bind(p.target.as_str())
                                .bind(p.n)
                                .bind(p.next)
                                .bind(p.code)
                                .bind(p.reason)
                                .bind(p.owner);
                        }
                        let q = q.bind(now_ms).bind(State::InFlight.as_str());
                        let rows = q.fetch_all(&mut *tx).await?;
                        let mut moved: std::collections::HashMap<String, (i64, String)> = rows
                            .into_iter()
                            .map(|(id, attempts, key)| (id, (attempts, key)))
                            .collect();
                        let mut attempt_rows = Vec::new();
                        for p in chunk {
                            let Some((attempts, key)) = moved.remove(p.id) else {
                                let cur: Option<(String, Option<String>)> =
                                    sqlx::query_as(SQL_STATE_OF)
                                        .bind(p.id)
                                        .fetch_optional(&mut *tx)
                                        .await?;
                                out[p.index] =
                                    Some(Err(refused(p.id, cur, State::InFlight, p.event)));
                                continue;
                            };
                            let first_no = attempts - p.n + 1;
                            for (i, a) in completions[p.index].attempts.iter().enumerate() {
                                attempt_rows.push(AttemptRow {
                                    item_id: p.id,
                                    attempt_no: first_no + i64::try_from(i).unwrap_or(0),
                                    record: a,
                                    key: key.clone(),
                                });
                            }
                            out[p.index] = Some(Ok(p.target));
                        }
                        for rows in pow2_chunks(&attempt_rows, MAX_ATTEMPT_ROWS) {
                            let sql = insert_attempts_sql(rows.len(), $ph);
                            let mut q = sqlx::query(&sql);
                            for r in rows {
                                let (http, smpp) = code_columns(r.record.remote);
                                q = q
                                    .bind(r.item_id)
                                    .bind(r.attempt_no)
                                    .bind($crate::model::to_ms(r.record.at))
                                    .bind(&r.record.provider)
                                    .bind(http)
                                    .bind(smpp)
                                    .bind(&r.record.verdict_class)
                                    .bind(r.record.delay.map(duration_ms))
                                    .bind(r.record.delay_reason.as_deref())
                                    .bind(duration_ms(r.record.latency))
                                    .bind(&r.key);
                            }
                            q.execute(&mut *tx).await?;
                        }
                        let mut counts: std::collections::BTreeMap<(&str, i64, i64), i64> =
                            std::collections::BTreeMap::new();
                        for r in &attempt_rows {
                            let (kind, code) = count_key(r.record.remote);
                            *counts
                                .entry((r.record.provider.as_str(), kind, code))
                                .or_insert(0) += 1;
                        }
                        for ((provider, kind, code), n) in counts {
                            sqlx::query(SQL_BUMP_COUNT)
                                .bind(provider)
                                .bind(kind)
                                .bind(code)
                                .bind(n)
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                }
                tx.commit().await?;
                Ok(out
                    .into_iter()
                    .map(|r| {
                        r.unwrap_or_else(|| {
                            Err($crate::Error::Corrupt("unplanned completion".into()))
                        })
                    })
                    .collect())
            }

            async fn reclaim_expired(&self, now: std::time::SystemTime) -> $crate::Result<u64> {
                use $crate::store::common::*;
                self.reclaim_with(SQL_RECLAIM, now).await
            }

            async fn reclaim_all_in_flight(
                &self,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                use $crate::store::common::*;
                self.reclaim_with(SQL_RECLAIM_ALL, now).await
            }

            async fn promote_due(
                &self,
                provider: Option<&str>,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                use $crate::store::common::*;
                let to = $crate::transition($crate::State::Pending, $crate::Event::Due)?;
                let from = $crate::State::Pending.as_str();
                let now_ms = $crate::model::to_ms(now);
                let r = match provider {
                    Some(p) => {
                        sqlx::query(SQL_PROMOTE_ONE_PROVIDER)
                            .bind(to.as_str())
                            .bind(now_ms)
                            .bind(p)
                            .bind(from)
                            .execute(&self.pool)
                            .await?
                    }
                    None => {
                        sqlx::query(SQL_PROMOTE_ALL)
                            .bind(to.as_str())
                            .bind(now_ms)
                            .bind(from)
                            .execute(&self.pool)
                            .await?
                    }
                };
                Ok(r.rows_affected())
            }

            async fn defer(
                &self,
                id: &str,
                reason: &str,
                now: std::time::SystemTime,
            ) -> $crate::Result<()> {
                use $crate::store::common::*;
                use $crate::{Event, State};
                let to = $crate::transition(State::Pending, Event::Defer)?;
                let r = sqlx::query(SQL_DEFER_ONE)
                    .bind(to.as_str())
                    .bind(reason)
                    .bind($crate::model::to_ms(now))
                    .bind(id)
                    .bind(State::Pending.as_str())
                    .execute(&self.pool)
                    .await?;
                if r.rows_affected() == 1 {
                    return Ok(());
                }
                let cur: Option<(String, Option<String>)> = sqlx::query_as(SQL_STATE_OF)
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                Err(refused(id, cur, State::Pending, Event::Defer))
            }

            async fn defer_older_than(
                &self,
                provider: &str,
                window_started_before: std::time::SystemTime,
                reason: &str,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                use $crate::store::common::*;
                use $crate::{Event, State};
                let to = $crate::transition(State::Pending, Event::Defer)?;
                let r = sqlx::query(SQL_DEFER_OLD)
                    .bind(to.as_str())
                    .bind(reason)
                    .bind($crate::model::to_ms(now))
                    .bind(provider)
                    .bind(State::Pending.as_str())
                    .bind($crate::model::to_ms(window_started_before))
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected())
            }

            async fn requeue(&self, id: &str, now: std::time::SystemTime) -> $crate::Result<()> {
                use $crate::store::common::*;
                use $crate::{Event, State};
                for from in [State::Deferred, State::Failed] {
                    let to = $crate::transition(from, Event::Requeue)?;
                    let r = sqlx::query(SQL_REQUEUE)
                        .bind(to.as_str())
                        .bind($crate::model::to_ms(now))
                        .bind(from.as_str())
                        .bind("")
                        .bind(id)
                        .execute(&self.pool)
                        .await?;
                    if r.rows_affected() == 1 {
                        return Ok(());
                    }
                }
                let cur: Option<(String, Option<String>)> = sqlx::query_as(SQL_STATE_OF)
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                Err(refused_requeue(id, cur))
            }

            async fn requeue_deferred(
                &self,
                filter: &$crate::model::RequeueFilter,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                self.requeue_from($crate::State::Deferred, filter, now)
                    .await
            }

            async fn requeue_failed(
                &self,
                filter: &$crate::model::RequeueFilter,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                self.requeue_from($crate::State::Failed, filter, now).await
            }

            async fn reason_counts(
                &self,
                state: Option<$crate::State>,
            ) -> $crate::Result<Vec<($crate::State, String, u64)>> {
                use $crate::store::common::*;
                let rows: Vec<(String, String, i64)> = sqlx::query_as(SQL_REASON_COUNTS)
                    .bind(state.map_or("", |s| s.as_str()))
                    .fetch_all(self.read_pool())
                    .await?;
                rows.into_iter()
                    .map(|(st, reason, n)| {
                        let st: $crate::State = st
                            .parse()
                            .map_err(|e| $crate::Error::Corrupt(format!("state: {e}")))?;
                        Ok((st, reason, u64::try_from(n).unwrap_or(0)))
                    })
                    .collect()
            }

            async fn list(
                &self,
                filter: &$crate::model::ListFilter,
            ) -> $crate::Result<Vec<$crate::Item>> {
                use $crate::store::common::*;
                let limit = filter.limit.min($crate::model::ListFilter::MAX_LIMIT);
                if limit == 0 {
                    return Ok(Vec::new());
                }
                let rows: Vec<RawItem> = sqlx::query_as(SQL_LIST)
                    .bind(filter.state.map_or("", |s| s.as_str()))
                    .bind(filter.provider.as_deref().unwrap_or(""))
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                    .fetch_all(self.read_pool())
                    .await?;
                rows.into_iter().map(RawItem::into_item).collect()
            }

            async fn fail_over(
                &self,
                from: &str,
                to: &str,
                pending_since_before: std::time::SystemTime,
                now: std::time::SystemTime,
            ) -> $crate::Result<u64> {
                use $crate::store::common::*;
                use $crate::{Event, State};
                let mut tx = self.begin_write().await?;
                let mut n = 0;
                for source in [State::Queued, State::Pending] {
                    let target = $crate::transition(source, Event::FailOver)?;
                    n += sqlx::query(SQL_FAIL_OVER)
                        .bind(target.as_str())
                        .bind(to)
                        .bind($crate::model::to_ms(now))
                        .bind(format!("{}{from}", $crate::model::FAILED_OVER_PREFIX))
                        .bind(from)
                        .bind(source.as_str())
                        .bind($crate::model::to_ms(pending_since_before))
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                }
                tx.commit().await?;
                Ok(n)
            }

            async fn counts_by_state(
                &self,
                provider: Option<&str>,
            ) -> $crate::Result<$crate::model::Counts> {
                use $crate::store::common::*;
                let rows: Vec<(String, i64)> = sqlx::query_as(SQL_COUNTS)
                    .bind(provider.unwrap_or(""))
                    .fetch_all(self.read_pool())
                    .await?;
                let mut c = $crate::model::Counts::default();
                for (state, n) in rows {
                    let s: $crate::State = state
                        .parse()
                        .map_err(|e| $crate::Error::Corrupt(format!("state: {e}")))?;
                    *c.get_mut(s) = u64::try_from(n).unwrap_or(0);
                }
                Ok(c)
            }

            async fn oldest_pending_age(
                &self,
                now: std::time::SystemTime,
            ) -> $crate::Result<Option<std::time::Duration>> {
                use $crate::store::common::*;
                let (min,): (Option<i64>,) = sqlx::query_as(SQL_OLDEST_WAITING)
                    .bind($crate::State::Queued.as_str())
                    .bind($crate::State::Pending.as_str())
                    .fetch_one(self.read_pool())
                    .await?;
                Ok(min.map(|ms| {
                    now.duration_since($crate::model::from_ms(ms))
                        .unwrap_or_default()
                }))
            }

            async fn has_active(&self, provider: &str) -> $crate::Result<bool> {
                use $crate::store::common::*;
                use $crate::State;
                let row: Option<(i32,)> = sqlx::query_as(SQL_ANY_ACTIVE)
                    .bind(provider)
                    .bind(State::Queued.as_str())
                    .bind(State::InFlight.as_str())
                    .bind(State::Pending.as_str())
                    .fetch_optional(self.read_pool())
                    .await?;
                Ok(row.is_some())
            }

            async fn next_due(
                &self,
                provider: &str,
            ) -> $crate::Result<Option<std::time::SystemTime>> {
                use $crate::store::common::*;
                let (min,): (Option<i64>,) = sqlx::query_as(SQL_NEXT_DUE)
                    .bind(provider)
                    .bind($crate::State::Queued.as_str())
                    .bind($crate::State::Pending.as_str())
                    .fetch_one(self.read_pool())
                    .await?;
                Ok(min.map($crate::model::from_ms))
            }

            async fn get(&self, id: &str) -> $crate::Result<Option<$crate::Item>> {
                use $crate::store::common::*;
                let row: Option<RawItem> = sqlx::query_as(SQL_GET)
                    .bind(id)
                    .fetch_optional(self.read_pool())
                    .await?;
                row.map(RawItem::into_item).transpose()
            }

            async fn attempts(
                &self,
                id: &str,
            ) -> $crate::Result<Vec<$crate::model::StoredAttempt>> {
                use $crate::store::common::*;
                let rows: Vec<RawAttempt> = sqlx::query_as(SQL_ATTEMPTS)
                    .bind(id)
                    .fetch_all(self.read_pool())
                    .await?;
                Ok(rows.into_iter().map(RawAttempt::into_attempt).collect())
            }

            async fn remote_counts(
                &self,
                provider: Option<&str>,
            ) -> $crate::Result<Vec<($crate::model::RemoteCode, u64)>> {
                use $crate::store::common::*;
                let rows: Vec<(i64, i64, i64)> = sqlx::query_as(SQL_REMOTE_COUNTS)
                    .bind(provider.unwrap_or(""))
                    .fetch_all(self.read_pool())
                    .await?;
                Ok(rows
                    .into_iter()
                    .map(|(k, c, n)| (count_code(k, c), u64::try_from(n).unwrap_or(0)))
                    .collect())
            }
        }
    };
}
