//! Durable storage for items and attempts.
//!
//! [`Store`] is the only thing the dispatcher knows about storage, and holds only what
//! the dispatcher and the CLI call. One implementation, [`SqlStore`], is written once
//! over a [`SqlBackend`] (as sqlx's drivers mirror one core trait); its two instances are
//! `SqliteStore` (embedded, the default) and `PostgresStore`, and [`AnyStore`] picks
//! one from a URL at run time. Both keep callers unaware of the backend:
//!
//! - Every method that compares times takes `now` from the caller's
//!   [`abide_core::Clock`] instead of asking the database, so leases and retries are
//!   testable with a manual clock.
//! - Every state change computes its target with [`crate::transition`] and conditions the
//!   `UPDATE` on the source state (and the lease owner for `IN_FLIGHT`): an illegal
//!   transition is refused by the database. Single-item methods return
//!   [`Error::IllegalTransition`](crate::Error::IllegalTransition); bulk methods touch
//!   only the rows for which the move is legal and return how many moved.
//! - Claiming is a lease with `SKIP LOCKED` semantics: two claimers never get the same
//!   item, and an item whose lease ran out (a crash) goes back to `PENDING`.
//! - A failed write transaction closes its connection instead of returning it to the
//!   pool, so a fault (a full disk, a killed server connection) never outlives itself.
//!
//! Files: `sql` (statement text), `plan` (completions checked and batched before any SQL
//! runs), `rows` (rows to model types), `sql_store` and `store_impl` (the store itself),
//! `backend` (what differs per database), `sqlite`/`postgres` (opening each), `any`.

use std::future::Future;
use std::time::{Duration, SystemTime};

use crate::error::Result;
use crate::model::{
    Completion, Counts, Enqueued, Item, ListFilter, NewItem, RemoteCode, RequeueFilter, SendMark,
    StoredAttempt,
};
use crate::receipt::{Receipt, ReceiptCounts, ReceiptState};
use crate::state::State;

mod any;
mod backend;
mod batch;
mod blind;
mod claimed;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod existing;
mod plan;
#[cfg(feature = "postgres")]
mod postgres;
mod rows;
mod sql;
mod sql_store;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store_impl;

pub use any::AnyStore;
pub use backend::SqlBackend;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, POSTGRES_CONNECT_TIMEOUT};
pub use sql::Placeholders;
pub use sql_store::SqlStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// Storage for the outbox. Cheap to clone (a connection pool inside); clones share it.
///
/// All futures are `Send`, and every method is cancel safe in the sense that a dropped
/// future either committed its transaction or rolled it back.
pub trait Store: Clone + Send + Sync + 'static {
    /// Enqueue `items` in ONE transaction: all are stored or none is. An item whose
    /// idempotency key already exists with the same content (provider, method, path,
    /// headers, body: [`crate::content_digest_hex`]) is a no-op returning the existing id
    /// (`created: false`); this is what makes re-running a batch resumable. One key names
    /// one message: a known key with different content refuses the whole call, the way
    /// draft-ietf-httpapi-idempotency-key-header §2.7 (Error Scenarios) refuses a key reused with another
    /// payload. An item stored before content digests were kept (migration 0006) has an
    /// unknown digest and is never a conflict.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`](crate::Error::InvalidRequest) if any item is invalid,
    /// [`Error::KeyConflict`](crate::Error::KeyConflict) for the first item whose key
    /// names different stored content (or an earlier item of the same call), both with
    /// nothing stored; or a database error.
    fn enqueue(
        &self,
        items: &[NewItem],
        now: SystemTime,
    ) -> impl Future<Output = Result<Vec<Enqueued>>> + Send;

    /// Read only: refuse `items` if one carries an idempotency key the store holds for
    /// different content, as [`Store::enqueue`] would, without writing anything. Lets a
    /// caller that enqueues in several transactions check all of them before committing
    /// the first. Items without a key are skipped; keys repeated within `items` are not
    /// compared with each other (enqueue does that). Not a reservation: a writer may take
    /// a key in between, and then [`Store::enqueue`] still refuses.
    ///
    /// # Errors
    /// [`Error::KeyConflict`](crate::Error::KeyConflict) for the first such item (its
    /// `index` in `items`), or a database error.
    fn check_keys(&self, items: &[NewItem]) -> impl Future<Output = Result<()>> + Send;

    /// Claim up to `limit` items for `provider` whose `next_attempt_at <= now`:
    /// first `PENDING → QUEUED` for the due ones ([`SqlStore::promote_due`]), then
    /// `QUEUED → IN_FLIGHT` with `lease_owner = owner` and
    /// `lease_expires_at = now + lease`. Oldest due first.
    ///
    /// # Errors
    /// Database errors.
    fn claim(
        &self,
        provider: &str,
        owner: &str,
        now: SystemTime,
        lease: Duration,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Item>>> + Send;

    /// Apply a batch of completions in one transaction, recording one attempts row per
    /// attempt. Each completion is checked on its own: the returned vector holds, in
    /// order, the new state or the reason it was refused (illegal transition, lease lost,
    /// not found); a refused completion changes nothing.
    ///
    /// # Errors
    /// The outer error is a database failure (nothing committed).
    fn complete(
        &self,
        completions: &[Completion],
        now: SystemTime,
    ) -> impl Future<Output = Result<Vec<Result<State>>>> + Send;

    /// Before one request per item goes on the wire: count it as sent and unrecorded under
    /// its lease, in one committed transaction. A completion replaces that count with the
    /// attempts it records; a lease reclaimed before then ([`Store::reclaim_expired`])
    /// charges it. This is what makes an item's `attempts` the requests that went on the
    /// wire: a claim handed back or reclaimed unsent costs nothing. Returns, in order,
    /// whether each item is still `IN_FLIGHT` under that lease: send only those (another
    /// worker may hold the others now).
    ///
    /// A process killed after the commit and before its request is written over-counts
    /// that request by one; it never under-counts one.
    ///
    /// # Errors
    /// Database errors (nothing is marked; send nothing).
    fn mark_sent(&self, sends: &[SendMark]) -> impl Future<Output = Result<Vec<bool>>> + Send;

    /// [`Store::complete`] of `completions`, then [`Store::mark_sent`] of `sends`, in ONE
    /// transaction where the store can (the SQL stores do): the dispatcher writes the marks
    /// of requests about to go and the results of requests answered together, one commit
    /// for both. Returns the two answers as those methods would. The default runs the two
    /// methods one after the other (completions first).
    ///
    /// # Errors
    /// Database errors: nothing is marked (send nothing); with the SQL stores nothing of
    /// the batch is committed.
    fn mark_and_complete(
        &self,
        sends: &[SendMark],
        completions: &[Completion],
        now: SystemTime,
    ) -> impl Future<Output = Result<(Vec<bool>, Vec<Result<State>>)>> + Send {
        async move {
            let done = if completions.is_empty() {
                Vec::new()
            } else {
                self.complete(completions, now).await?
            };
            let marked = if sends.is_empty() {
                Vec::new()
            } else {
                self.mark_sent(sends).await?
            };
            Ok((marked, done))
        }
    }

    /// `IN_FLIGHT → PENDING` for every item whose lease ran out by `now` (its worker
    /// crashed or hung): due at once, reason `lease_expired`, charged the requests its
    /// lease holder marked as sent ([`Store::mark_sent`]) and never recorded. Returns how
    /// many.
    ///
    /// # Errors
    /// Database errors.
    fn reclaim_expired(&self, now: SystemTime) -> impl Future<Output = Result<u64>> + Send;

    /// `IN_FLIGHT → PENDING` for EVERY in-flight item, whatever its lease: the same change
    /// as [`Store::reclaim_expired`] (due at `now`, charged its unrecorded sends, reason
    /// [`LEASE_EXPIRED_REASON`](crate::model::LEASE_EXPIRED_REASON)). Only for a caller that
    /// knows every lease holder is dead, e.g. the one process allowed to send from an SQLite
    /// file (it holds an exclusive lock) starting up after a crash; with a live dispatcher
    /// on the same database its items would be sent twice (same idempotency key). Returns
    /// how many.
    ///
    /// # Errors
    /// Database errors.
    fn reclaim_all_in_flight(&self, now: SystemTime) -> impl Future<Output = Result<u64>> + Send;

    /// `PENDING → DEFERRED` for items of `provider` whose window started at or before
    /// `window_started_before` (the maximum age). Returns how many.
    ///
    /// # Errors
    /// Database errors.
    fn defer_older_than(
        &self,
        provider: &str,
        window_started_before: SystemTime,
        reason: &str,
        now: SystemTime,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// `DEFERRED → QUEUED` for every deferred item matching `filter`. Returns how many.
    ///
    /// # Errors
    /// Database errors.
    fn requeue_deferred(
        &self,
        filter: &RequeueFilter,
        now: SystemTime,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// `FAILED → QUEUED` for every failed item matching `filter`, in a fresh attempt window
    /// like [`SqlStore::requeue`]: a person overrules the terminal verdict (e.g. after fixing
    /// the payload or the account). Returns how many.
    ///
    /// # Errors
    /// Database errors.
    fn requeue_failed(
        &self,
        filter: &RequeueFilter,
        now: SystemTime,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// A person's cancel of one item: `QUEUED`, `PENDING` or `DEFERRED` → `FAILED` with the
    /// reason [`crate::CANCELLED_REASON`], in one statement conditioned on those states, so
    /// an item a sender claims at the same moment is either cancelled before the claim or
    /// refused. Nothing is sent for it afterwards; its attempts rows are kept.
    ///
    /// # Errors
    /// [`Error::IllegalTransition`](crate::Error::IllegalTransition) (event
    /// [`Cancel`](crate::Event::Cancel)) for an item `IN_FLIGHT` (a request may be on the
    /// wire) or already final, [`Error::NotFound`](crate::Error::NotFound), database errors.
    fn cancel(&self, id: &str, now: SystemTime) -> impl Future<Output = Result<()>> + Send;

    /// Fail-over: waiting (`QUEUED` or `PENDING`) items currently targeting `from` whose
    /// window started at or before `pending_since_before` move to `to` (the original provider stays
    /// recorded in [`Item::provider`]), become due at once and start a new attempt window
    /// there (`window_start` = `now`, no window attempts): `to`'s retry caps and its own
    /// fail-over wait count from the move. Returns how many.
    ///
    /// # Errors
    /// Database errors.
    fn fail_over(
        &self,
        from: &str,
        to: &str,
        pending_since_before: SystemTime,
        now: SystemTime,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Items per state (for `provider`'s current items, or all).
    ///
    /// # Errors
    /// Database errors.
    fn counts_by_state(
        &self,
        provider: Option<&str>,
    ) -> impl Future<Output = Result<Counts>> + Send;

    /// Items per (state, reason), for `state` only or all states, most frequent first
    /// (ties by state, then reason): says WHY items are `FAILED` or `DEFERRED`. An item
    /// without a reason (e.g. `SUBMITTED`, or `QUEUED` before its first attempt) counts
    /// under the empty string. One query.
    ///
    /// # Errors
    /// Database errors, [`Error::Corrupt`](crate::Error::Corrupt) for an unknown state.
    fn reason_counts(
        &self,
        state: Option<State>,
    ) -> impl Future<Output = Result<Vec<(State, String, u64)>>> + Send;

    /// Items matching `filter`, newest first (by `created_at`, then id, both descending),
    /// at most `filter.limit` clamped to [`ListFilter::MAX_LIMIT`].
    ///
    /// # Errors
    /// Database errors, [`Error::Corrupt`](crate::Error::Corrupt).
    fn list(&self, filter: &ListFilter) -> impl Future<Output = Result<Vec<Item>>> + Send;

    /// Age at `now` of the oldest item still waiting (`QUEUED` or `PENDING`), measured
    /// from its window start; `None` when nothing waits.
    ///
    /// # Errors
    /// Database errors.
    fn oldest_pending_age(
        &self,
        now: SystemTime,
    ) -> impl Future<Output = Result<Option<Duration>>> + Send;

    /// `IN_FLIGHT` items whose lease ran out by `now` (`lease_expires_at <= now`): their
    /// worker stopped (a crash, a kill, a hang) and [`Store::reclaim_expired`] has not run
    /// since. They are waiting for the next reclaim, not being sent. Reads only; one
    /// indexed count.
    ///
    /// # Errors
    /// Database errors.
    fn expired_leases(&self, now: SystemTime) -> impl Future<Output = Result<u64>> + Send;

    /// Whether any of `providers` still has an item `QUEUED`, `IN_FLIGHT` or `PENDING`, in
    /// one read (one statement, one snapshot): an item moving from one of them to another
    /// meanwhile (a fail-over) is seen on one side. What [`crate::Dispatcher::is_drained`]
    /// asks; the backends answer with index probes.
    ///
    /// # Errors
    /// Database errors.
    fn has_active(&self, providers: &[&str]) -> impl Future<Output = Result<bool>> + Send;

    /// Earliest `next_attempt_at` among `provider`'s waiting items (`QUEUED`/`PENDING`);
    /// tells an idle worker how long it may sleep.
    ///
    /// # Errors
    /// Database errors.
    fn next_due(&self, provider: &str) -> impl Future<Output = Result<Option<SystemTime>>> + Send;

    /// One item.
    ///
    /// # Errors
    /// Database errors, [`Error::Corrupt`](crate::Error::Corrupt).
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Item>>> + Send;

    /// An item's attempts, oldest first.
    ///
    /// # Errors
    /// Database errors.
    fn attempts(&self, id: &str) -> impl Future<Output = Result<Vec<StoredAttempt>>> + Send;

    /// "Count by what the remote side said": attempts per remote code (for `provider`,
    /// or all), most frequent first. One query.
    ///
    /// # Errors
    /// Database errors.
    fn remote_counts(
        &self,
        provider: Option<&str>,
    ) -> impl Future<Output = Result<Vec<(RemoteCode, u64)>>> + Send;

    /// Store delivery receipts in one transaction, each keyed by its provider and
    /// `message_id` (a later receipt for the same id replaces the earlier one). Never
    /// touches an item: receipts are matched to items when read, so one that arrives
    /// before its item's acceptance is written is matched once it is.
    ///
    /// # Errors
    /// Database errors (nothing stored).
    fn record_receipts(&self, receipts: &[Receipt]) -> impl Future<Output = Result<()>> + Send;

    /// Items per receipt state (for `provider`, or all), and the receipts that match no
    /// item ([`ReceiptCounts::unmatched`]). One query.
    ///
    /// # Errors
    /// Database errors, [`Error::Corrupt`](crate::Error::Corrupt) for an unknown state.
    fn receipt_counts(
        &self,
        provider: Option<&str>,
    ) -> impl Future<Output = Result<ReceiptCounts>> + Send;

    /// The receipt of item `id` (state, when received), if one arrived.
    ///
    /// # Errors
    /// Database errors, [`Error::Corrupt`](crate::Error::Corrupt) for an unknown state.
    fn receipt_of(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<(ReceiptState, SystemTime)>>> + Send;
}
