//! [`SqlStore`]: the outbox in a SQL database, written once for every [`Dialect`].
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

use super::dialect::Dialect;
use super::rows::{refused, refused_requeue};
use super::sql;
use crate::error::Result;
use crate::model::{to_ms, MovedBy, RequeueFilter, SendMark, LEASE_EXPIRED_REASON};
use crate::state::{transition, Event, State};

/// The outbox in a SQL database; [`super::SqliteStore`] and [`super::PostgresStore`] name
/// its two instances and hold their constructors.
///
/// Two pools: `writes` takes every change, `reads` the queries that change nothing
/// (counts, progress, `get`). On SQLite they differ (one writing connection, see
/// [`super::SqliteStore`]); on Postgres they are one pool.
///
/// # Clone
/// Clones share the connection pools.
#[derive(Debug)]
pub struct SqlStore<DB: Dialect> {
    pub(crate) writes: Pool<DB>,
    pub(crate) reads: Pool<DB>,
    /// False when `reads` is a clone of `writes`.
    pub(crate) separate_reads: bool,
}

impl<DB: Dialect> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        Self {
            writes: self.writes.clone(),
            reads: self.reads.clone(),
            separate_reads: self.separate_reads,
        }
    }
}

impl<DB: Dialect> SqlStore<DB> {
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

/// Open a write transaction on `conn` with the dialect's `BEGIN`.
pub(crate) async fn begin<DB: Dialect>(
    conn: &mut PoolConnection<DB>,
) -> Result<Transaction<'_, DB>> {
    Ok(match DB::BEGIN_WRITE {
        Some(statement) => conn.begin_with(statement).await?,
        None => Connection::begin(&mut **conn).await?,
    })
}

/// The result of a write transaction on `conn`: on failure, the connection is closed
/// rather than returned to the pool, whatever state the failure left it in.
pub(crate) fn settle<DB: Dialect, T>(conn: &mut PoolConnection<DB>, r: Result<T>) -> Result<T> {
    if r.is_err() {
        conn.close_on_drop();
    }
    r
}

impl<DB> SqlStore<DB>
where
    DB: Dialect,
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

    /// `IN_FLIGHT → PENDING` (lease expired) for the rows `statement` selects: the expired
    /// leases ([`sql::RECLAIM`]) or every one at start-up ([`sql::RECLAIM_ALL`]).
    pub(crate) async fn reclaim_with(
        &self,
        statement: &'static str,
        now: SystemTime,
    ) -> Result<u64> {
        let to = transition(State::InFlight, Event::LeaseExpired)?;
        let r = sqlx::query(statement)
            .bind(to.as_str())
            .bind(to_ms(now))
            .bind(State::InFlight.as_str())
            .bind(LEASE_EXPIRED_REASON)
            .bind(MovedBy::LeaseExpired.as_str())
            .execute(&self.writes)
            .await?;
        Ok(DB::rows_affected(&r))
    }
}
