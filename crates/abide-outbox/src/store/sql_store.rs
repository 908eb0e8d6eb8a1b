//! [`SqlStore`]: the outbox in a SQL database, written once for every [`SqlBackend`].
//!
//! Every write transaction runs on a connection checked out for it ([`SqlStore::write`]);
//! when the transaction fails at any point (a statement, or the `COMMIT` itself, e.g. a
//! full disk) that connection is closed instead of going back to the pool. SQLite rolls a
//! transaction back by itself on some errors (`SQLITE_FULL`, `SQLITE_IOERR`); sqlx then
//! still counts it open, its `ROLLBACK` fails, and every later `BEGIN` on that connection
//! was refused ("attempted to call begin_with at non-zero transaction depth") while
//! single statements (claims) still ran. A fresh connection has no such history; the pool
//! opens one on the next write.

use std::time::SystemTime;

use sqlx::pool::PoolConnection;
use sqlx::{
    ColumnIndex, Connection, Decode, Encode, Executor, IntoArguments, Pool, Transaction, Type,
};

use super::backend::SqlBackend;
use super::rows::{refused, refused_requeue};
use super::sql;
use crate::error::Result;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use abide_core::VerdictClass;

use super::plan::{pow2_chunks, AttemptRow, MAX_ATTEMPT_ROWS};
use super::rows::{code_columns, count_key, duration_ms};
use crate::model::{
    from_ms, to_ms, AttemptRecord, DelayReason, MovedBy, RemoteCode, RequeueFilter, SendMark,
    LEASE_EXPIRED_REASON,
};

/// A row of [`sql::RECLAIM_LOST`]: id, provider, idempotency key, attempts so far, sends
/// never recorded, claim time (ms).
type LostRow = (String, String, String, i64, i64, i64);
use crate::state::{transition, Event, State};

/// The outbox in a SQL database; `SqliteStore` and `PostgresStore` name
/// its two instances and hold their constructors.
///
/// Two pools: `writes` takes every change, `reads` the queries that change nothing
/// (counts, progress, `get`). On SQLite they differ (one writing connection, see
/// `SqliteStore`); on Postgres they are one pool.
///
/// # Clone
/// Clones share the connection pools.
#[derive(Debug)]
pub struct SqlStore<DB: SqlBackend> {
    pub(crate) writes: Pool<DB>,
    pub(crate) reads: Pool<DB>,
    /// False when `reads` is a clone of `writes`.
    pub(crate) separate_reads: bool,
    /// Opened by `open_read_only`: nothing may be written, not even a checkpoint.
    pub(crate) read_only: bool,
}

impl<DB: SqlBackend> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        Self {
            writes: self.writes.clone(),
            reads: self.reads.clone(),
            separate_reads: self.separate_reads,
            read_only: self.read_only,
        }
    }
}

impl<DB: SqlBackend> SqlStore<DB> {
    /// The pool that takes every write (for diagnostics, tests and one-off maintenance
    /// statements). On SQLite it has a single connection.
    pub fn pool(&self) -> &Pool<DB> {
        &self.writes
    }

    /// A connection for one write transaction; hand it back through [`settle`].
    pub(crate) async fn writer(&self) -> Result<PoolConnection<DB>> {
        Ok(self.writes.acquire().await?)
    }
}

/// Open a write transaction on `conn` with the backend's `BEGIN`.
pub(crate) async fn begin<DB: SqlBackend>(
    conn: &mut PoolConnection<DB>,
) -> Result<Transaction<'_, DB>> {
    Ok(match DB::BEGIN_WRITE {
        Some(statement) => conn.begin_with(statement).await?,
        None => Connection::begin(&mut **conn).await?,
    })
}

/// The result of a write transaction on `conn`: on failure, the connection is closed
/// rather than returned to the pool, whatever state the failure left it in; except a
/// refused key ([`crate::Error::KeyConflict`]), whose transaction was rolled back.
pub(crate) fn settle<DB: SqlBackend, T>(conn: &mut PoolConnection<DB>, r: Result<T>) -> Result<T> {
    // A refused key rolled back cleanly: the connection is sound, keep it.
    if matches!(&r, Err(e) if !matches!(e, crate::Error::KeyConflict { .. })) {
        conn.close_on_drop();
    }
    r
}

impl<DB> SqlStore<DB>
where
    DB: SqlBackend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> Option<i64>: Encode<'q, DB>,
    usize: ColumnIndex<DB::Row>,
    for<'r> &'r str: ColumnIndex<DB::Row>,
{
    /// `PENDING → QUEUED` for due items (of `provider`, or all): the first half of
    /// [`super::Store::claim`]. Returns how many.
    ///
    /// # Errors
    /// Database errors.
    pub async fn promote_due(&self, provider: Option<&str>, now: SystemTime) -> Result<u64> {
        let to = transition(State::Pending, Event::Due)?;
        let from = State::Pending.as_str();
        let now_ms = to_ms(now);
        let r = match provider {
            Some(p) => {
                sqlx::query(sql::PROMOTE_ONE_PROVIDER)
                    .bind(to.as_str())
                    .bind(now_ms)
                    .bind(p)
                    .bind(from)
                    .execute(&self.writes)
                    .await?
            }
            None => {
                sqlx::query(sql::PROMOTE_ALL)
                    .bind(to.as_str())
                    .bind(now_ms)
                    .bind(from)
                    .execute(&self.writes)
                    .await?
            }
        };
        Ok(DB::rows_affected(&r))
    }

    /// `PENDING → DEFERRED` for one item (a person's or a tool's decision; the dispatcher
    /// defers in bulk with [`super::Store::defer_older_than`]).
    ///
    /// # Errors
    /// [`Error::IllegalTransition`](crate::Error::IllegalTransition) unless `PENDING`,
    /// [`Error::NotFound`](crate::Error::NotFound), database errors.
    pub async fn defer(&self, id: &str, reason: &str, now: SystemTime) -> Result<()> {
        let to = transition(State::Pending, Event::Defer)?;
        let r = sqlx::query(sql::DEFER_ONE)
            .bind(to.as_str())
            .bind(reason)
            .bind(to_ms(now))
            .bind(id)
            .bind(State::Pending.as_str())
            .execute(&self.writes)
            .await?;
        if DB::rows_affected(&r) == 1 {
            return Ok(());
        }
        let cur: Option<(String, Option<String>)> = sqlx::query_as(sql::STATE_OF)
            .bind(id)
            .fetch_optional(&self.writes)
            .await?;
        Err(refused(id, cur, State::Pending, Event::Defer))
    }

    /// `DEFERRED → QUEUED` or `FAILED → QUEUED` for one item (a person decided to try
    /// again), starting a fresh attempt window: due at `now`, window attempts 0, reason
    /// cleared. The total attempt count and the attempts rows are kept. The bulk form is
    /// [`super::Store::requeue_deferred`] / [`super::Store::requeue_failed`] with ids.
    ///
    /// # Errors
    /// [`Error::IllegalTransition`](crate::Error::IllegalTransition) unless `DEFERRED` or
    /// `FAILED`, [`Error::NotFound`](crate::Error::NotFound), database errors.
    pub async fn requeue(&self, id: &str, now: SystemTime) -> Result<()> {
        for from in [State::Deferred, State::Failed] {
            let to = transition(from, Event::Requeue)?;
            let r = sqlx::query(sql::REQUEUE)
                .bind(to.as_str())
                .bind(to_ms(now))
                .bind(from.as_str())
                .bind("")
                .bind(id)
                .execute(&self.writes)
                .await?;
            if DB::rows_affected(&r) == 1 {
                return Ok(());
            }
        }
        let cur: Option<(String, Option<String>)> = sqlx::query_as(sql::STATE_OF)
            .bind(id)
            .fetch_optional(&self.writes)
            .await?;
        Err(refused_requeue(id, cur))
    }

    /// `from → QUEUED` (a person's requeue) for the items matching `filter`, in one
    /// transaction. Returns how many moved.
    pub(crate) async fn requeue_from(
        &self,
        from: State,
        filter: &RequeueFilter,
        now: SystemTime,
    ) -> Result<u64> {
        let to = transition(from, Event::Requeue)?;
        let provider = filter.provider.as_deref().unwrap_or("");
        let now_ms = to_ms(now);
        let all = [String::new()];
        let ids: &[String] = match &filter.ids {
            Some(ids) => ids,
            None => &all,
        };
        let mut conn = self.writer().await?;
        let r = async {
            let mut tx = begin(&mut conn).await?;
            let mut n = 0;
            for id in ids {
                if filter.ids.is_some() && id.is_empty() {
                    continue;
                }
                let r = sqlx::query(sql::REQUEUE)
                    .bind(to.as_str())
                    .bind(now_ms)
                    .bind(from.as_str())
                    .bind(provider)
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                n += DB::rows_affected(&r);
            }
            tx.commit().await?;
            Ok(n)
        }
        .await;
        settle(&mut conn, r)
    }

    /// Mark `sends[i]` for each `i` in `chunk` (distinct ids) as sent, in one statement on
    /// `on`; returns the (id, lease owner) pairs marked.
    pub(crate) async fn mark_chunk<'e, E>(
        &self,
        sends: &[SendMark],
        chunk: &[usize],
        on: E,
    ) -> Result<Vec<(String, String)>>
    where
        E: Executor<'e, Database = DB>,
    {
        let rows = chunk.len().next_power_of_two();
        let statement = sql::mark_sent_sql(rows, DB::PLACEHOLDERS);
        let mut q = sqlx::query_as::<_, (String, String)>(&statement);
        for &i in chunk {
            q = q
                .bind(sends[i].id.as_str())
                .bind(sends[i].lease_owner.as_str());
        }
        for _ in chunk.len()..rows {
            q = q.bind("").bind("");
        }
        Ok(q.bind(State::InFlight.as_str()).fetch_all(on).await?)
    }

    /// `IN_FLIGHT → PENDING` (lease expired): the expired leases (`all` false,
    /// [`sql::RECLAIM`]) or every one at start-up ([`sql::RECLAIM_ALL`]). Each request the
    /// lease holder put on the wire and never recorded (a crash, a `kill -9`) becomes an
    /// attempts row saying the remote's answer never arrived ([`RemoteCode::NoResponse`],
    /// class `retry`, delay 0, reason `lease_expired`), so that counts by remote code add
    /// up to the attempts charged. Its time is the claim's (the request went out at or after
    /// it) and its latency the time from the claim to the reclaim, during which no answer
    /// came. Returns how many items moved.
    pub(crate) async fn reclaim_with(&self, all: bool, now: SystemTime) -> Result<u64> {
        let to = transition(State::InFlight, Event::LeaseExpired)?;
        let now_ms = to_ms(now);
        let (lost_sql, update) = if all {
            (sql::RECLAIM_ALL_LOST, sql::RECLAIM_ALL)
        } else {
            (sql::RECLAIM_LOST, sql::RECLAIM)
        };
        let lost_sql = format!("{lost_sql}{}", DB::LOCK_ROWS);
        let mut conn = self.writer().await?;
        let r = async {
            let mut tx = begin(&mut conn).await?;
            let mut q = sqlx::query_as::<_, LostRow>(&lost_sql).bind(State::InFlight.as_str());
            if !all {
                q = q.bind(now_ms);
            }
            let lost: Vec<LostRow> = q.fetch_all(&mut *tx).await?;
            let moved: Vec<(String,)> = sqlx::query_as(update)
                .bind(to.as_str())
                .bind(now_ms)
                .bind(State::InFlight.as_str())
                .bind(LEASE_EXPIRED_REASON)
                .bind(MovedBy::LeaseExpired.as_str())
                .fetch_all(&mut *tx)
                .await?;
            let moved: HashSet<&str> = moved.iter().map(|(id,)| id.as_str()).collect();
            // Bounded: a lease records at most a handful of sends (one, two after a
            // credential refresh); a corrupt count must not make millions of rows.
            const MAX_LOST_PER_ITEM: i64 = 64;
            let records: Vec<(usize, i64, AttemptRecord)> = lost
                .iter()
                .enumerate()
                .filter(|(_, l)| moved.contains(l.0.as_str()))
                .flat_map(|(i, l)| {
                    let claimed = from_ms(l.5);
                    let record = AttemptRecord {
                        at: claimed,
                        provider: l.1.clone(),
                        remote: RemoteCode::NoResponse,
                        verdict_class: VerdictClass::Retry,
                        delay: Some(Duration::ZERO),
                        delay_reason: Some(DelayReason::LeaseExpired),
                        latency: now.duration_since(claimed).unwrap_or_default(),
                    };
                    (1..=l.4.clamp(0, MAX_LOST_PER_ITEM)).map(move |k| (i, l.3 + k, record.clone()))
                })
                .collect();
            let rows: Vec<AttemptRow<'_>> = records
                .iter()
                .map(|(i, no, record)| AttemptRow {
                    item_id: lost[*i].0.as_str(),
                    attempt_no: *no,
                    record,
                    key: lost[*i].2.clone(),
                })
                .collect();
            self.record_attempts(&mut tx, &rows).await?;
            tx.commit().await?;
            Ok(moved.len() as u64)
        }
        .await;
        settle(&mut conn, r)
    }

    /// Insert `rows` into `attempts` and add them to `attempt_counts`, inside the caller's
    /// write transaction.
    pub(crate) async fn record_attempts(
        &self,
        on: &mut DB::Connection,
        rows: &[AttemptRow<'_>],
    ) -> Result<()> {
        for chunk in pow2_chunks(rows, MAX_ATTEMPT_ROWS) {
            let statement = sql::insert_attempts_sql(chunk.len(), DB::PLACEHOLDERS);
            let mut q = sqlx::query(&statement);
            for r in chunk {
                let (http, smpp) = code_columns(r.record.remote);
                q = q
                    .bind(r.item_id)
                    .bind(r.attempt_no)
                    .bind(to_ms(r.record.at))
                    .bind(r.record.provider.as_str())
                    .bind(http)
                    .bind(smpp)
                    .bind(r.record.verdict_class.as_str())
                    .bind(r.record.delay.map(duration_ms))
                    .bind(r.record.delay_reason.map(|r| r.as_str()))
                    .bind(duration_ms(r.record.latency))
                    .bind(r.key.as_str());
            }
            q.execute(&mut *on).await?;
        }
        let mut counts: BTreeMap<(&str, i64, i64), i64> = BTreeMap::new();
        for r in rows {
            let (kind, code) = count_key(r.record.remote);
            *counts
                .entry((r.record.provider.as_str(), kind, code))
                .or_insert(0) += 1;
        }
        for ((provider, kind, code), n) in counts {
            sqlx::query(sql::BUMP_COUNT)
                .bind(provider)
                .bind(kind)
                .bind(code)
                .bind(n)
                .execute(&mut *on)
                .await?;
        }
        Ok(())
    }
}
