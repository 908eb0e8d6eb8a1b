//! A batch of completions and send marks written without reading anything back: the
//! common case, in which every completion and every mark finds its row in `IN_FLIGHT`
//! under its lease ([`super::batch`] falls back to statement-by-statement writing when
//! one does not).
//!
//! What it saves per batch: the completion `UPDATE … RETURNING` sent one row per item
//! back across sqlx's channel to its SQLite thread, only so that the attempts rows could
//! be numbered and keyed; here the attempts are inserted first, numbered and keyed from
//! the item rows by the `INSERT … SELECT` itself. On SQLite the four statements (attempts,
//! completions, counters, marks) go to the database as ONE multi-statement query, one
//! round trip instead of four. Every statement touches at most one row per row it names
//! (each names an item by its primary key, or a counter by its key), so the sum of rows
//! touched equals the rows named exactly when every one of them matched.

use std::collections::BTreeMap;

use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use super::backend::SqlBackend;
use super::plan::Planned;
use super::rows::{code_columns, count_key, duration_ms};
use super::sql::{self, Placeholders};
use super::sql_store::SqlStore;
use crate::model::{to_ms, AttemptRecord, Completion, SendMark};
use crate::state::State;

/// Most rows of each kind (completions, attempts, marks) the blind write takes: the
/// statements' parameters stay below SQLite's 32,766 (8, 11 and 2 per row).
pub(crate) const MAX_BLIND_ROWS: usize = 512;

/// One attempt to insert: the completion it belongs to and its number among that
/// completion's attempts (from 1).
struct Attempt<'a> {
    item_id: &'a str,
    owner: &'a str,
    k: i64,
    record: &'a AttemptRecord,
}

type Q<'q, DB> = Query<'q, DB, <DB as Database>::Arguments<'q>>;

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
    /// Write `planned` (completions with distinct ids) and mark `sends` (distinct ids) in
    /// the caller's open transaction, reading nothing back. `Ok(false)`: some completion
    /// or mark found no row in `IN_FLIGHT` under its lease; what was written must be
    /// rolled back and the batch written statement by statement.
    ///
    /// # Errors
    /// A database failure.
    pub(crate) async fn write_blind(
        &self,
        tx: &mut DB::Connection,
        sends: &[SendMark],
        completions: &[Completion],
        planned: &[Planned<'_>],
        now_ms: i64,
    ) -> crate::error::Result<bool> {
        let attempts: Vec<Attempt<'_>> = planned
            .iter()
            .flat_map(|p| {
                completions[p.index]
                    .attempts
                    .iter()
                    .zip(1..)
                    .map(|(record, k)| Attempt {
                        item_id: p.id,
                        owner: p.owner,
                        k,
                        record,
                    })
            })
            .collect();
        let mut counts: BTreeMap<(&str, i64, i64), i64> = BTreeMap::new();
        for a in &attempts {
            let (kind, code) = count_key(a.record.remote);
            *counts
                .entry((a.record.provider.as_str(), kind, code))
                .or_insert(0) += 1;
        }
        let ph = DB::PLACEHOLDERS;
        // (statement, rows it must touch), in the order they run.
        let mut parts: Vec<(String, u64, Part)> = Vec::with_capacity(4);
        if !attempts.is_empty() {
            let rows = attempts.len().next_power_of_two();
            let text = attempts_sql(rows, ph, DB::LOCK_JOINED_ITEMS);
            parts.push((text, attempts.len() as u64, Part::Attempts));
        }
        if !planned.is_empty() {
            let rows = planned.len().next_power_of_two();
            let text = sql::complete_sql(rows, ph);
            let text = text
                .strip_suffix(sql::COMPLETE_RETURNING)
                .unwrap_or(&text)
                .to_owned();
            parts.push((text, planned.len() as u64, Part::Completions));
        }
        if !counts.is_empty() {
            parts.push((
                bump_counts_sql(counts.len(), ph),
                counts.len() as u64,
                Part::Counts,
            ));
        }
        if !sends.is_empty() {
            let rows = sends.len().next_power_of_two();
            let text = sql::mark_sent_sql(rows, ph);
            let text = text
                .strip_suffix(sql::MARK_SENT_RETURNING)
                .unwrap_or(&text)
                .to_owned();
            parts.push((text, sends.len() as u64, Part::Marks));
        }
        let data = Data {
            attempts: &attempts,
            planned,
            counts: &counts,
            sends,
            now_ms,
        };
        if DB::MULTI_STATEMENT {
            let text = parts
                .iter()
                .map(|(t, _, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(";\n");
            let mut q = sqlx::query(&text);
            for (_, _, part) in &parts {
                q = Self::bind_part(q, *part, &data);
            }
            let r = q.execute(&mut *tx).await?;
            let expected: u64 = parts.iter().map(|(_, n, _)| n).sum();
            return Ok(DB::rows_affected(&r) == expected);
        }
        for (text, expected, part) in &parts {
            let q = Self::bind_part(sqlx::query(text), *part, &data);
            let r = q.execute(&mut *tx).await?;
            if DB::rows_affected(&r) != *expected {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Bind the parameters of one statement of [`Self::write_blind`], padded as its text.
    fn bind_part<'q>(mut q: Q<'q, DB>, part: Part, d: &Data<'q, 'q>) -> Q<'q, DB> {
        let in_flight = State::InFlight.as_str();
        match part {
            Part::Attempts => {
                for a in d.attempts {
                    let (http, smpp) = code_columns(a.record.remote);
                    q = q
                        .bind(a.item_id)
                        .bind(a.owner)
                        .bind(a.k)
                        .bind(to_ms(a.record.at))
                        .bind(a.record.provider.as_str())
                        .bind(http)
                        .bind(smpp)
                        .bind(a.record.verdict_class.as_str())
                        .bind(a.record.delay.map(duration_ms))
                        .bind(a.record.delay_reason.map(|r| r.as_str()))
                        .bind(duration_ms(a.record.latency));
                }
                // Padding matches no item; the same types as a real row (Postgres prepares
                // the statement once with the types of its first use).
                for _ in d.attempts.len()..d.attempts.len().next_power_of_two() {
                    q = q
                        .bind("")
                        .bind("")
                        .bind(0i64)
                        .bind(0i64)
                        .bind("")
                        .bind(None::<i64>)
                        .bind(None::<i64>)
                        .bind("")
                        .bind(None::<i64>)
                        .bind(None::<&str>)
                        .bind(0i64);
                }
                q.bind(in_flight)
            }
            Part::Completions => {
                for p in d.planned {
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
                for _ in d.planned.len()..d.planned.len().next_power_of_two() {
                    q = q
                        .bind("")
                        .bind("")
                        .bind(0i64)
                        .bind(None::<i64>)
                        .bind(None::<&str>)
                        .bind(None::<&str>)
                        .bind("")
                        .bind(None::<&str>);
                }
                q.bind(d.now_ms).bind(in_flight)
            }
            Part::Counts => {
                for (&(provider, kind, code), &n) in d.counts {
                    q = q.bind(provider).bind(kind).bind(code).bind(n);
                }
                q
            }
            Part::Marks => {
                for m in d.sends {
                    q = q.bind(m.id.as_str()).bind(m.lease_owner.as_str());
                }
                for _ in d.sends.len()..d.sends.len().next_power_of_two() {
                    q = q.bind("").bind("");
                }
                q.bind(in_flight)
            }
        }
    }
}

/// The statements of a blind write.
#[derive(Debug, Clone, Copy)]
enum Part {
    Attempts,
    Completions,
    Counts,
    Marks,
}

/// What the statements of a blind write bind.
struct Data<'q, 'b> {
    attempts: &'b [Attempt<'q>],
    planned: &'b [Planned<'q>],
    counts: &'b BTreeMap<(&'q str, i64, i64), i64>,
    sends: &'q [SendMark],
    now_ms: i64,
}

/// Insert the attempts of `rows` completions' requests, numbered after the item's attempts
/// so far and keyed with its idempotency key, both read from the item row. Bind per row:
/// item id, lease owner, the attempt's number within its completion (from 1), at (ms),
/// provider, HTTP status, SMPP status, verdict class, delay (ms), delay reason, latency
/// (ms); then the source state (`IN_FLIGHT`). A row whose item is not in that state under
/// that lease inserts nothing (as its completion then moves nothing). Runs before the
/// completion `UPDATE` that adds the attempts to the item. `lock` ends the `SELECT`
/// (Postgres locks the item rows it read until the `UPDATE`).
fn attempts_sql(rows: usize, ph: Placeholders, lock: &str) -> String {
    const TYPES: [&str; 11] = [
        "TEXT", "TEXT", "BIGINT", "BIGINT", "TEXT", "BIGINT", "BIGINT", "TEXT", "BIGINT", "TEXT",
        "BIGINT",
    ];
    let mut sql = String::with_capacity(700 + rows * 200);
    sql.push_str(
        "WITH a (item_id, owner, k, at_ms, provider, http, smpp, class, delay_ms, \
         delay_reason, latency_ms) AS (VALUES ",
    );
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
        ") INSERT INTO attempts (item_id, attempt_no, at_ms, provider, remote_http_status, \
         remote_smpp_code, verdict_class, delay_ms, delay_reason, latency_ms, \
         idempotency_key) SELECT a.item_id, items.attempts + a.k, a.at_ms, a.provider, a.http, \
         a.smpp, a.class, a.delay_ms, a.delay_reason, a.latency_ms, items.idempotency_key \
         FROM a JOIN items ON items.id = a.item_id WHERE items.lease_owner = a.owner \
         AND items.state = ",
    );
    ph.push(&mut sql, n + 1);
    sql.push_str(lock);
    sql
}

/// Add to `rows` distinct counters of `attempt_counts`: bind per row provider, kind, code
/// and the attempts to add.
fn bump_counts_sql(rows: usize, ph: Placeholders) -> String {
    let mut sql = String::from("INSERT INTO attempt_counts (provider, kind, code, n) VALUES ");
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for k in 1..=4 {
            if k > 1 {
                sql.push_str(", ");
            }
            ph.push(&mut sql, r * 4 + k);
        }
        sql.push(')');
    }
    sql.push_str(
        " ON CONFLICT (provider, kind, code) DO UPDATE SET n = attempt_counts.n + excluded.n",
    );
    sql
}

#[cfg(all(test, feature = "sqlite", feature = "postgres"))]
mod tests {
    use std::time::{Duration, SystemTime};

    use abide_core::VerdictClass;
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    use sqlx::{Connection, Executor};

    use super::*;
    use crate::model::{Completion, NewItem, Outcome, RemoteCode, Request};
    use crate::store::plan::plan_completion;
    use crate::store::{PostgresStore, SqliteStore, Store};

    const PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

    fn record(remote: RemoteCode) -> AttemptRecord {
        AttemptRecord {
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000),
            provider: "p".into(),
            remote,
            verdict_class: VerdictClass::Success,
            delay: None,
            delay_reason: None,
            latency: Duration::from_millis(3),
        }
    }

    /// Marks and completions found under their lease are written blind (and number and
    /// key their attempts from the item row); one lease lost makes the whole batch report
    /// `false`.
    async fn check<DB>(store: SqlStore<DB>)
    where
        SqlStore<DB>: Store,
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
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let items: Vec<NewItem> = ["a", "b", "c"]
            .iter()
            .map(|k| {
                NewItem::new("p", Request::post_json("/m", serde_json::json!({ "k": k })))
                    .with_idempotency_key(*k)
            })
            .collect();
        store.enqueue(&items, now).await.unwrap();
        let claimed = store
            .claim("p", "w", now, Duration::from_secs(60), 10)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 3);
        let id = |i: usize| claimed[i].id.clone();
        let mark = |i: usize, owner: &str| SendMark {
            id: id(i),
            lease_owner: owner.into(),
        };
        let done = |i: usize, n: usize| Completion {
            id: id(i),
            lease_owner: "w".into(),
            outcome: Outcome::Submitted,
            attempts: vec![record(RemoteCode::Http(202)); n],
            last_provider_code: Some(RemoteCode::Http(202)),
            message_id: None,
        };
        let blind = |sends: Vec<SendMark>, completions: Vec<Completion>| {
            let store = store.clone();
            async move {
                let planned: Vec<_> = completions
                    .iter()
                    .enumerate()
                    .map(|(i, c)| plan_completion(i, c).unwrap())
                    .collect();
                let mut conn = store.writer().await.unwrap();
                let mut tx = conn.begin().await.unwrap();
                let ok = store
                    .write_blind(&mut tx, &sends, &completions, &planned, to_ms(now))
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                ok
            }
        };
        assert!(blind(vec![mark(0, "w"), mark(1, "w"), mark(2, "w")], vec![]).await);
        assert!(blind(vec![mark(2, "w")], vec![done(0, 1), done(1, 2)]).await);
        assert_eq!(
            store.get(&id(0)).await.unwrap().unwrap().state,
            State::Submitted
        );
        let a = store.attempts(&id(1)).await.unwrap();
        let nos: Vec<u32> = a.iter().map(|a| a.attempt_no).collect();
        assert_eq!(nos, [1, 2]);
        assert_eq!(a[1].idempotency_key, claimed[1].idempotency_key);
        let counts = store.remote_counts(Some("p")).await.unwrap();
        assert_eq!(counts, [(RemoteCode::Http(202), 3)]);
        // Another lease's mark, or a completion of an item no longer in flight: false.
        assert!(!blind(vec![mark(2, "other")], vec![]).await);
        assert!(!blind(vec![], vec![done(0, 1)]).await);
    }

    #[tokio::test]
    async fn a_batch_found_under_its_leases_is_written_blind_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        check(SqliteStore::open(dir.path().join("o.db")).await.unwrap()).await;
    }

    #[tokio::test]
    async fn a_batch_found_under_its_leases_is_written_blind_on_postgres() {
        let admin = match sqlx::PgPool::connect(PG_URL).await {
            Ok(p) => p,
            Err(e) if std::env::var("ABIDE_REQUIRE_SERVICES").as_deref() != Ok("1") => {
                println!("SKIPPED: PostgreSQL at {PG_URL} unreachable: {e}");
                return;
            }
            Err(e) => panic!("PostgreSQL required but unreachable: {e}"),
        };
        let schema = format!("abide_blind_{}", uuid::Uuid::new_v4().simple());
        admin
            .execute(format!("CREATE SCHEMA {schema}").as_str())
            .await
            .unwrap();
        let opts = PG_URL
            .parse::<PgConnectOptions>()
            .unwrap()
            .options([("search_path", schema.as_str())]);
        let pool = PgPoolOptions::new().connect_with(opts).await.unwrap();
        check(PostgresStore::from_pool(pool.clone()).await.unwrap()).await;
        pool.close().await;
        admin
            .execute(format!("DROP SCHEMA {schema} CASCADE").as_str())
            .await
            .unwrap();
    }
}
