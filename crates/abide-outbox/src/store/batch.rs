//! One write transaction for a batch of send marks and completions
//! ([`super::Store::mark_and_complete`]).
//!
//! Why one: on SQLite every commit writes each page it dirtied to the write-ahead log
//! (the same `items` index pages for nearly every batch), so the commit, not the row, is
//! the unit of cost; marks and results written in separate transactions paid it twice
//! for the same items. A failure commits neither half: the marked items are not sent and
//! the results are written again on the retry.

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::backend::SqlBackend;
use super::blind::MAX_BLIND_ROWS;
use super::plan::{plan_completion, pow2_chunks, rounds, AttemptRow, MAX_COMPLETE_ROWS};
use super::rows::refused;
use super::sql;
use super::sql_store::{begin, settle, SqlStore};
use crate::error::{Error, Result};
use crate::model::{to_ms, Completion, SendMark};
use crate::state::State;

/// What one batch wrote: per mark whether it may be sent, per completion its new state or
/// why it was refused, both in the order given.
pub(crate) type Written = (Vec<bool>, Vec<Result<State>>);

/// Statements of at most [`MAX_COMPLETE_ROWS`] marks in which every id occurs once (a
/// joined `UPDATE` marks a row once): each is a list of indices into `sends`.
pub(crate) fn mark_statements(sends: &[SendMark]) -> Vec<Vec<usize>> {
    let mut statements: Vec<Vec<usize>> = Vec::new();
    let mut pending: Vec<usize> = (0..sends.len()).collect();
    while !pending.is_empty() {
        let mut seen = HashSet::new();
        let (round, later): (Vec<usize>, Vec<usize>) = pending
            .into_iter()
            .partition(|&i| seen.insert(sends[i].id.as_str()));
        pending = later;
        statements.extend(round.chunks(MAX_COMPLETE_ROWS).map(<[usize]>::to_vec));
    }
    statements
}

/// Per mark, whether its (id, lease owner) pair is among those `marked`.
pub(crate) fn mark_answers(sends: &[SendMark], marked: &HashSet<(String, String)>) -> Vec<bool> {
    sends
        .iter()
        .map(|m| marked.contains(&(m.id.clone(), m.lease_owner.clone())))
        .collect()
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
    /// Apply `completions` (as [`super::Store::complete`]) and then mark `sends` (as
    /// [`super::Store::mark_sent`]) in ONE transaction.
    ///
    /// # Errors
    /// A database failure: nothing committed, nothing may be sent.
    pub(crate) async fn write_batch(
        &self,
        sends: &[SendMark],
        completions: &[Completion],
        now: SystemTime,
    ) -> Result<Written> {
        let now_ms = to_ms(now);
        let mut out: Vec<Option<Result<State>>> = completions.iter().map(|_| None).collect();
        let mut planned = Vec::with_capacity(completions.len());
        for (i, c) in completions.iter().enumerate() {
            match plan_completion(i, c) {
                Ok(p) => planned.push(p),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        let marks = mark_statements(sends);
        if planned.is_empty() && marks.is_empty() {
            return Ok((Vec::new(), collect(out)));
        }
        let distinct = {
            let mut seen = HashSet::with_capacity(planned.len());
            planned.iter().all(|p| seen.insert(p.id))
        };
        let attempt_rows: usize = planned
            .iter()
            .map(|p| completions[p.index].attempts.len())
            .sum();
        let blind = distinct
            && marks.len() <= 1
            && planned.len() <= MAX_BLIND_ROWS
            && attempt_rows <= MAX_BLIND_ROWS;
        let mut conn = self.writer().await?;
        let r = async {
            if blind {
                // The usual batch: written without reading back, unless some row was not
                // where it was expected (then rolled back and written statement by
                // statement below).
                let mut tx = begin(&mut conn).await?;
                if self
                    .write_blind(&mut tx, sends, completions, &planned, now_ms)
                    .await?
                {
                    tx.commit().await?;
                    for p in &planned {
                        out[p.index] = Some(Ok(p.target));
                    }
                    return Ok(None);
                }
                tx.rollback().await?;
            }
            let mut tx = begin(&mut conn).await?;
            for round in rounds(planned) {
                for chunk in pow2_chunks(&round, MAX_COMPLETE_ROWS) {
                    let statement = sql::complete_sql(chunk.len(), DB::PLACEHOLDERS);
                    let mut q = sqlx::query_as::<_, (String, i64, String)>(&statement);
                    for p in chunk {
                        q = q
                            .bind(p.id)
                            .bind(p.target.as_str())
                            .bind(p.n)
                            .bind(p.next)
                            .bind(p.code.as_deref())
                            .bind(p.reason)
                            .bind(p.owner)
                            .bind(p.message_id);
                    }
                    let q = q.bind(now_ms).bind(State::InFlight.as_str());
                    let rows = q.fetch_all(&mut *tx).await?;
                    let mut moved: HashMap<String, (i64, String)> = rows
                        .into_iter()
                        .map(|(id, attempts, key)| (id, (attempts, key)))
                        .collect();
                    let mut attempt_rows = Vec::new();
                    for p in chunk {
                        let Some((attempts, key)) = moved.remove(p.id) else {
                            let cur: Option<(String, Option<String>)> =
                                sqlx::query_as(sql::STATE_OF)
                                    .bind(p.id)
                                    .fetch_optional(&mut *tx)
                                    .await?;
                            out[p.index] = Some(Err(refused(p.id, cur, State::InFlight, p.event)));
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
                    self.record_attempts(&mut tx, &attempt_rows).await?;
                }
            }
            let mut marked = HashSet::new();
            for chunk in &marks {
                self.mark_counted(sends, chunk, &mut tx, &mut marked)
                    .await?;
            }
            tx.commit().await?;
            Ok(Some(marked))
        }
        .await;
        let marked = match settle(&mut conn, r)? {
            Some(marked) => mark_answers(sends, &marked),
            None => vec![true; sends.len()],
        };
        Ok((marked, collect(out)))
    }
}

impl<DB> SqlStore<DB>
where
    DB: SqlBackend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    /// Mark `sends[i]` for each `i` in `chunk` (distinct ids) inside the caller's
    /// transaction, adding the (id, lease owner) pairs marked to `marked`. Counts the rows
    /// instead of returning them (every returned row crosses sqlx's channel to its SQLite
    /// thread); only when some mark matched nothing is each one looked up. Exact inside
    /// the transaction: the rows it marked stay locked (Postgres) or unwritten by others
    /// (SQLite's one writer) until the commit, and no one else takes this lease's owner.
    async fn mark_counted(
        &self,
        sends: &[SendMark],
        chunk: &[usize],
        tx: &mut DB::Connection,
        marked: &mut HashSet<(String, String)>,
    ) -> Result<()> {
        let rows = chunk.len().next_power_of_two();
        let statement = sql::mark_sent_sql(rows, DB::PLACEHOLDERS);
        let statement = statement
            .strip_suffix(sql::MARK_SENT_RETURNING)
            .unwrap_or(&statement);
        let mut q = sqlx::query(statement);
        for &i in chunk {
            q = q
                .bind(sends[i].id.as_str())
                .bind(sends[i].lease_owner.as_str());
        }
        for _ in chunk.len()..rows {
            q = q.bind("").bind("");
        }
        let r = q.bind(State::InFlight.as_str()).execute(&mut *tx).await?;
        let all = DB::rows_affected(&r) == chunk.len() as u64;
        for &i in chunk {
            let m = &sends[i];
            let held = all
                || sqlx::query_as::<_, (i64,)>(LEASE_HELD)
                    .bind(m.id.as_str())
                    .bind(m.lease_owner.as_str())
                    .bind(State::InFlight.as_str())
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_some();
            if held {
                marked.insert((m.id.clone(), m.lease_owner.clone()));
            }
        }
        Ok(())
    }
}

/// Whether item `$1` is `$3` (`IN_FLIGHT`) under lease owner `$2`.
const LEASE_HELD: &str =
    "SELECT CAST(1 AS BIGINT) FROM items WHERE id = $1 AND lease_owner = $2 AND state = $3";

fn collect(out: Vec<Option<Result<State>>>) -> Vec<Result<State>> {
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::Corrupt("unplanned completion".into()))))
        .collect()
}
