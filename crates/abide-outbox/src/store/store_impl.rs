//! [`Store`] for [`SqlStore`], once for both backends.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::backend::SqlBackend;
use super::batch::{mark_answers, mark_statements};
use super::rows::{count_code, duration_ms, refused_cancel, RawAttempt, RawItem};
use super::sql;
use super::sql_store::{begin, settle, SqlStore};
use super::Store;
use crate::error::{Error, Result};
use crate::keys::content_digest_hex;
use crate::model::{
    from_ms, new_item_id, to_ms, Completion, Counts, Enqueued, Item, ListFilter, MovedBy, NewItem,
    RemoteCode, RequeueFilter, SendMark, StoredAttempt, FAILED_OVER_PREFIX,
};
use crate::receipt::{Receipt, ReceiptCounts, ReceiptState};
use crate::state::{transition, Event, State};

impl<DB> Store for SqlStore<DB>
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
    async fn enqueue(&self, items: &[NewItem], now: SystemTime) -> Result<Vec<Enqueued>> {
        for it in items {
            it.validate()?;
        }
        let now_ms = to_ms(now);
        let state = State::Queued.as_str();
        let mut conn = self.writer().await?;
        let r = async {
            let mut out = Vec::with_capacity(items.len());
            let mut tx = begin(&mut conn).await?;
            for (index, it) in items.iter().enumerate() {
                let id = new_item_id(now);
                let digest = content_digest_hex(it);
                let key = it.idempotency_key.clone().unwrap_or_else(|| id.clone());
                let headers = serde_json::to_string(&it.request.headers)
                    .map_err(|e| Error::InvalidRequest(e.to_string()))?;
                let body = it
                    .request
                    .body
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()
                    .map_err(|e| Error::InvalidRequest(e.to_string()))?;
                let inserted: Option<(String,)> = sqlx::query_as(sql::INSERT)
                    .bind(id.as_str())
                    .bind(it.provider.as_str())
                    .bind(it.request.method.as_str())
                    .bind(it.request.path.as_str())
                    .bind(headers)
                    .bind(body)
                    .bind(key.as_str())
                    .bind(now_ms)
                    .bind(state)
                    .bind(digest.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
                let enq = match inserted {
                    Some((id,)) => Enqueued { id, created: true },
                    None => {
                        let (id, stored): (String, Option<String>) = sqlx::query_as(sql::ID_BY_KEY)
                            .bind(key.as_str())
                            .fetch_one(&mut *tx)
                            .await?;
                        // NULL: stored before digests were kept; unknown, so accepted.
                        if stored.is_some_and(|d| d != digest) {
                            // The whole call rolls back: all or nothing per call.
                            tx.rollback().await?;
                            return Err(Error::KeyConflict {
                                key,
                                existing_id: id,
                                index,
                            });
                        }
                        Enqueued { id, created: false }
                    }
                };
                out.push(enq);
            }
            tx.commit().await?;
            Ok(out)
        }
        .await;
        settle(&mut conn, r)
    }

    async fn check_keys(&self, items: &[NewItem]) -> Result<()> {
        let keyed: Vec<(usize, &str, String)> = items
            .iter()
            .enumerate()
            .filter_map(|(i, it)| {
                let key = it.idempotency_key.as_deref()?;
                Some((i, key, content_digest_hex(it)))
            })
            .collect();
        let sql = sql::digests_by_key_sql(DB::PLACEHOLDERS);
        for part in keyed.chunks(sql::KEYS_PER_PROBE) {
            let mut q = sqlx::query_as::<_, (String, String, Option<String>)>(&sql);
            for n in 0..sql::KEYS_PER_PROBE {
                let (_, key, _) = part[n.min(part.len() - 1)];
                q = q.bind(key);
            }
            let stored: HashMap<String, (String, Option<String>)> = q
                .fetch_all(&self.reads)
                .await?
                .into_iter()
                .map(|(key, id, digest)| (key, (id, digest)))
                .collect();
            for (index, key, digest) in part {
                if let Some((id, Some(known))) = stored.get(*key) {
                    if known != digest {
                        return Err(Error::KeyConflict {
                            key: (*key).to_owned(),
                            existing_id: id.clone(),
                            index: *index,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    async fn claim(
        &self,
        provider: &str,
        owner: &str,
        now: SystemTime,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Item>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.promote_due(Some(provider), now).await?;
        let to = transition(State::Queued, Event::Claim)?;
        let expires_ms = to_ms(now) + duration_ms(lease);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<RawItem> = if DB::CLAIMED.is_some() {
            self.claim_then_read(provider, owner, to_ms(now), expires_ms, limit)
                .await?
        } else {
            sqlx::query_as(DB::CLAIM)
                .bind(to.as_str())
                .bind(owner)
                .bind(expires_ms)
                .bind(to_ms(now))
                .bind(provider)
                .bind(State::Queued.as_str())
                .bind(limit)
                .fetch_all(&self.writes)
                .await?
        };
        let mut items = rows
            .into_iter()
            .map(RawItem::into_item)
            .collect::<Result<Vec<_>>>()?;
        items.sort_by(|a, b| (a.next_attempt_at, &a.id).cmp(&(b.next_attempt_at, &b.id)));
        Ok(items)
    }

    async fn complete(
        &self,
        completions: &[Completion],
        now: SystemTime,
    ) -> Result<Vec<Result<State>>> {
        Ok(self.write_batch(&[], completions, now).await?.1)
    }

    async fn mark_and_complete(
        &self,
        sends: &[SendMark],
        completions: &[Completion],
        now: SystemTime,
    ) -> Result<(Vec<bool>, Vec<Result<State>>)> {
        self.write_batch(sends, completions, now).await
    }

    async fn mark_sent(&self, sends: &[SendMark]) -> Result<Vec<bool>> {
        // Rounds in which every id occurs once, cut into statements of at most
        // MAX_COMPLETE_ROWS rows, each padded with rows that match nothing up to a power
        // of two (few statement shapes, all cached). One statement (the usual case) runs
        // on its own; more run in one transaction, so that a failure marks nothing.
        let statements = mark_statements(sends);
        let mut marked = std::collections::HashSet::new();
        match statements.as_slice() {
            [] => {}
            [one] => marked.extend(self.mark_chunk(sends, one, &self.writes).await?),
            many => {
                let mut conn = self.writer().await?;
                let r = async {
                    let mut tx = begin(&mut conn).await?;
                    let mut ids = Vec::new();
                    for chunk in many {
                        ids.extend(self.mark_chunk(sends, chunk, &mut *tx).await?);
                    }
                    tx.commit().await?;
                    Ok(ids)
                }
                .await;
                marked.extend(settle(&mut conn, r)?);
            }
        }
        Ok(mark_answers(sends, &marked))
    }

    async fn reclaim_expired(&self, now: SystemTime) -> Result<u64> {
        self.reclaim_with(false, now).await
    }

    async fn reclaim_all_in_flight(&self, now: SystemTime) -> Result<u64> {
        self.reclaim_with(true, now).await
    }

    async fn defer_older_than(
        &self,
        provider: &str,
        window_started_before: SystemTime,
        reason: &str,
        now: SystemTime,
    ) -> Result<u64> {
        let to = transition(State::Pending, Event::Defer)?;
        let r = sqlx::query(sql::DEFER_OLD)
            .bind(to.as_str())
            .bind(reason)
            .bind(to_ms(now))
            .bind(provider)
            .bind(State::Pending.as_str())
            .bind(to_ms(window_started_before))
            .execute(&self.writes)
            .await?;
        Ok(DB::rows_affected(&r))
    }

    async fn requeue_deferred(&self, filter: &RequeueFilter, now: SystemTime) -> Result<u64> {
        self.requeue_from(State::Deferred, filter, now).await
    }

    async fn requeue_failed(&self, filter: &RequeueFilter, now: SystemTime) -> Result<u64> {
        self.requeue_from(State::Failed, filter, now).await
    }

    async fn cancel(&self, id: &str, now: SystemTime) -> Result<()> {
        let to = transition(State::Queued, Event::Cancel)?;
        let r = sqlx::query(sql::CANCEL_ONE)
            .bind(to.as_str())
            .bind(crate::state::CANCELLED_REASON)
            .bind(to_ms(now))
            .bind(id)
            .bind(State::Queued.as_str())
            .bind(State::Pending.as_str())
            .bind(State::Deferred.as_str())
            .execute(&self.writes)
            .await?;
        if DB::rows_affected(&r) == 1 {
            return Ok(());
        }
        let cur: Option<(String, Option<String>)> = sqlx::query_as(sql::STATE_OF)
            .bind(id)
            .fetch_optional(&self.writes)
            .await?;
        Err(refused_cancel(id, cur))
    }

    async fn fail_over(
        &self,
        from: &str,
        to: &str,
        pending_since_before: SystemTime,
        now: SystemTime,
    ) -> Result<u64> {
        let reason = format!("{FAILED_OVER_PREFIX}{from}");
        let mut conn = self.writer().await?;
        let r = async {
            let mut tx = begin(&mut conn).await?;
            let mut n = 0;
            for source in [State::Queued, State::Pending] {
                let target = transition(source, Event::FailOver)?;
                let r = sqlx::query(sql::FAIL_OVER)
                    .bind(target.as_str())
                    .bind(to)
                    .bind(to_ms(now))
                    .bind(reason.as_str())
                    .bind(from)
                    .bind(source.as_str())
                    .bind(to_ms(pending_since_before))
                    .bind(MovedBy::FailedOver.as_str())
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

    async fn counts_by_state(&self, provider: Option<&str>) -> Result<Counts> {
        let rows: Vec<(String, i64)> = sqlx::query_as(sql::COUNTS)
            .bind(provider.unwrap_or(""))
            .fetch_all(&self.reads)
            .await?;
        let mut c = Counts::default();
        for (state, n) in rows {
            let s: State = state
                .parse()
                .map_err(|e| Error::Corrupt(format!("state: {e}")))?;
            *c.get_mut(s) = u64::try_from(n).unwrap_or(0);
        }
        Ok(c)
    }

    async fn reason_counts(&self, state: Option<State>) -> Result<Vec<(State, String, u64)>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(sql::REASON_COUNTS)
            .bind(state.map_or("", |s| s.as_str()))
            .fetch_all(&self.reads)
            .await?;
        rows.into_iter()
            .map(|(st, reason, n)| {
                let st: State = st
                    .parse()
                    .map_err(|e| Error::Corrupt(format!("state: {e}")))?;
                Ok((st, reason, u64::try_from(n).unwrap_or(0)))
            })
            .collect()
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<Item>> {
        let limit = filter.limit.min(ListFilter::MAX_LIMIT);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows: Vec<RawItem> = sqlx::query_as(sql::LIST)
            .bind(filter.state.map_or("", |s| s.as_str()))
            .bind(filter.provider.as_deref().unwrap_or(""))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.reads)
            .await?;
        rows.into_iter().map(RawItem::into_item).collect()
    }

    async fn oldest_pending_age(&self, now: SystemTime) -> Result<Option<Duration>> {
        let (min,): (Option<i64>,) = sqlx::query_as(sql::OLDEST_WAITING)
            .bind(State::Queued.as_str())
            .bind(State::Pending.as_str())
            .fetch_one(&self.reads)
            .await?;
        Ok(min.map(|ms| now.duration_since(from_ms(ms)).unwrap_or_default()))
    }

    async fn expired_leases(&self, now: SystemTime) -> Result<u64> {
        let (n,): (i64,) = sqlx::query_as(sql::EXPIRED_LEASES)
            .bind(State::InFlight.as_str())
            .bind(to_ms(now))
            .fetch_one(&self.reads)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn has_active(&self, providers: &[&str]) -> Result<bool> {
        if providers.is_empty() {
            return Ok(false);
        }
        let statement = sql::any_active_sql(providers.len(), DB::PLACEHOLDERS);
        let mut q = sqlx::query_as::<_, (i64,)>(&statement)
            .bind(State::Queued.as_str())
            .bind(State::InFlight.as_str())
            .bind(State::Pending.as_str());
        for p in providers {
            q = q.bind(*p);
        }
        Ok(q.fetch_optional(&self.reads).await?.is_some())
    }

    async fn next_due(&self, provider: &str) -> Result<Option<SystemTime>> {
        let (min,): (Option<i64>,) = sqlx::query_as(sql::NEXT_DUE)
            .bind(provider)
            .bind(State::Queued.as_str())
            .bind(State::Pending.as_str())
            .fetch_one(&self.reads)
            .await?;
        Ok(min.map(from_ms))
    }

    async fn get(&self, id: &str) -> Result<Option<Item>> {
        let row: Option<RawItem> = sqlx::query_as(sql::GET)
            .bind(id)
            .fetch_optional(&self.reads)
            .await?;
        row.map(RawItem::into_item).transpose()
    }

    async fn attempts(&self, id: &str) -> Result<Vec<StoredAttempt>> {
        let rows: Vec<RawAttempt> = sqlx::query_as(sql::ATTEMPTS)
            .bind(id)
            .fetch_all(&self.reads)
            .await?;
        rows.into_iter().map(RawAttempt::into_attempt).collect()
    }

    async fn remote_counts(&self, provider: Option<&str>) -> Result<Vec<(RemoteCode, u64)>> {
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(sql::REMOTE_COUNTS)
            .bind(provider.unwrap_or(""))
            .fetch_all(&self.reads)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(k, c, n)| (count_code(k, c), u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    async fn record_receipts(&self, receipts: &[Receipt]) -> Result<()> {
        if receipts.is_empty() {
            return Ok(());
        }
        let mut conn = self.writer().await?;
        let r = async {
            let mut tx = begin(&mut conn).await?;
            for r in receipts {
                sqlx::query(sql::RECORD_RECEIPT)
                    .bind(r.provider.as_str())
                    .bind(r.message_id.as_str())
                    .bind(r.state.as_str())
                    .bind(to_ms(r.at))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        }
        .await;
        settle(&mut conn, r)
    }

    async fn receipt_counts(&self, provider: Option<&str>) -> Result<ReceiptCounts> {
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(sql::RECEIPT_COUNTS)
            .bind(provider.unwrap_or(""))
            .fetch_all(&self.reads)
            .await?;
        let mut c = ReceiptCounts::default();
        for (state, all, matched) in rows {
            let s: ReceiptState = state
                .parse()
                .map_err(|e| Error::Corrupt(format!("receipt state: {e}")))?;
            let matched = u64::try_from(matched).unwrap_or(0);
            *c.get_mut(s) += matched;
            c.unmatched += u64::try_from(all).unwrap_or(0).saturating_sub(matched);
        }
        Ok(c)
    }

    async fn receipt_of(&self, id: &str) -> Result<Option<(ReceiptState, SystemTime)>> {
        let row: Option<(String, i64)> = sqlx::query_as(sql::RECEIPT_OF)
            .bind(id)
            .fetch_optional(&self.reads)
            .await?;
        row.map(|(state, at)| {
            let s: ReceiptState = state
                .parse()
                .map_err(|e| Error::Corrupt(format!("item {id}: receipt state: {e}")))?;
            Ok((s, from_ms(at)))
        })
        .transpose()
    }
}
