//! A claim in three statements where the backend copies returned rows dearly (SQLite
//! through sqlx, [`super::SqlBackend::CLAIMED`]): in one write transaction the rowids of the
//! items to claim and the `UPDATE` of exactly those, then, after the commit, the claimed
//! items read back as a few rows of JSON on a reading connection.
//!
//! Exact: the transaction excludes every other writer, so the rows it picked are the rows
//! it moved; and nothing moves an `IN_FLIGHT` item under its lease but its lease holder
//! (cancels refuse it, maintenance reclaims it only once the lease has ended), so the read
//! finds every one of them.

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::backend::SqlBackend;
use super::rows::{ClaimedRow, RawItem};
use super::sql_store::{begin, settle, SqlStore};
use crate::error::{Error, Result};
use crate::state::{transition, Event, State};

impl<DB> SqlStore<DB>
where
    DB: SqlBackend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    /// Claim up to `limit` items of `provider` due by `now_ms` for `owner` until
    /// `expires_ms`, and read them back.
    ///
    /// # Errors
    /// Database errors; [`Error::Corrupt`] for a row that does not decode. After the commit
    /// the items claimed stay `IN_FLIGHT` unsent until their lease ends, then are reclaimed
    /// without a charge (as after a crash between a claim and a send).
    pub(crate) async fn claim_then_read(
        &self,
        provider: &str,
        owner: &str,
        now_ms: i64,
        expires_ms: i64,
        limit: i64,
    ) -> Result<Vec<RawItem>> {
        let (update, read) =
            DB::CLAIMED.ok_or_else(|| Error::Corrupt("no claim in three statements".into()))?;
        let to = transition(State::Queued, Event::Claim)?;
        let mut conn = self.writer().await?;
        let r = async {
            let mut tx = begin(&mut conn).await?;
            let (picked,): (String,) = sqlx::query_as(DB::CLAIM)
                .bind(provider)
                .bind(State::Queued.as_str())
                .bind(now_ms)
                .bind(limit)
                .fetch_one(&mut *tx)
                .await?;
            let moved = sqlx::query(update)
                .bind(to.as_str())
                .bind(owner)
                .bind(expires_ms)
                .bind(now_ms)
                .bind(picked.as_str())
                .bind(State::Queued.as_str())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok((picked, DB::rows_affected(&moved)))
        }
        .await;
        let (picked, moved) = settle(&mut conn, r)?;
        drop(conn);
        if moved == 0 {
            return Ok(Vec::new());
        }
        let groups: Vec<(String,)> = sqlx::query_as(read)
            .bind(picked.as_str())
            .bind(to.as_str())
            .bind(owner)
            .bind(expires_ms)
            .fetch_all(&self.reads)
            .await?;
        let mut rows = Vec::with_capacity(usize::try_from(moved).unwrap_or(0));
        for (group,) in groups {
            let claimed: Vec<ClaimedRow> = serde_json::from_str(&group)
                .map_err(|e| Error::Corrupt(format!("items claimed by {owner}: {e}")))?;
            rows.extend(
                claimed
                    .into_iter()
                    .map(|r| RawItem::claimed(r, provider, to, owner, expires_ms)),
            );
        }
        if rows.len() as u64 != moved {
            tracing::warn!(
                owner,
                moved,
                read = rows.len(),
                "claimed items not all read back"
            );
        }
        Ok(rows)
    }
}
