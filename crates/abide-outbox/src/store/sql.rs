//! SQL text, written once for both backends.
//!
//! Both accept `$N` placeholders and `UPDATE … RETURNING`; only the claim differs
//! ([`CLAIM_SQLITE`], [`CLAIM_POSTGRES`]). Completions are written in batches generated per
//! size ([`complete_sql`], [`insert_attempts_sql`]), with anonymous `?` placeholders on
//! SQLite ([`Placeholders`]).

/// Columns of `items` decoded into [`super::rows::RawItem`].
macro_rules! item_cols {
    () => {
        "id, provider, current_provider, method, path, headers_json, body_json, \
         idempotency_key, created_at_ms, state, attempts, window_attempts, window_start_ms, \
         next_attempt_at_ms, last_provider_code, reason, moved_by, lease_owner, \
         lease_expires_at_ms, message_id"
    };
}

/// The SQLite claim, first of three statements in one write transaction: the rowids of
/// up to `$4` due items of provider `$1` in state `$2` (due by `$3`), oldest first, as one
/// JSON array. Reads `items_claim` alone (the rowid is in every index entry).
#[cfg(feature = "sqlite")]
pub(crate) const CLAIM_SQLITE: &str = "SELECT json_group_array(rowid) FROM (SELECT rowid \
     FROM items WHERE current_provider = $1 AND state = $2 AND next_attempt_at_ms <= $3 \
     ORDER BY next_attempt_at_ms LIMIT $4)";

/// The second: move the rows of [`CLAIM_SQLITE`]'s rowids (`$5`, a JSON array) still in
/// state `$6` to state `$1` under lease owner `$2` until `$3`, at `$4`. The state check is
/// written `+state` so that the planner looks the rows up by rowid: with a plain
/// `state = $6` it walked every `QUEUED` row (O(queue length), as the old `id IN (…)`
/// claim did).
#[cfg(feature = "sqlite")]
pub(crate) const CLAIM_MOVE_SQLITE: &str = "UPDATE items SET state = $1, lease_owner = $2, \
     lease_expires_at_ms = $3, updated_at_ms = $4 \
     WHERE rowid IN (SELECT value FROM json_each($5)) AND +state = $6";

/// The claimed items, read back after the commit on a reading connection, off the one
/// writer's thread: the rows of rowids `$1` (a JSON array) in state `$2` under lease owner
/// `$3` until `$4` (all of them: nothing else moves an item under its lease), as JSON
/// arrays of at most 32 items (32 consecutive rowids: a bound on one row's size), every
/// item an array of the columns [`super::rows::ClaimedRow`] decodes. Why JSON: sqlx copies
/// every value of every row it returns (`sqlite3_value_dup`, an allocation each) and hands
/// each row across a channel to its caller; for a claim's twenty columns that was about a
/// fifth of the CPU per item delivered.
#[cfg(feature = "sqlite")]
pub(crate) const CLAIMED_SQLITE: &str = "SELECT json_group_array(json_array(id, provider, \
     method, path, headers_json, body_json, idempotency_key, created_at_ms, attempts, \
     window_attempts, window_start_ms, next_attempt_at_ms, last_provider_code, reason, \
     moved_by, message_id)) FROM items \
     WHERE rowid IN (SELECT value FROM json_each($1)) AND state = $2 AND lease_owner = $3 \
     AND lease_expires_at_ms = $4 GROUP BY rowid / 32";

/// The Postgres claim statement. The rows are picked in a CTE with `FOR UPDATE SKIP
/// LOCKED` (a `LIMIT` inside `IN (…)` may be re-evaluated per row and over-claim).
#[cfg(feature = "postgres")]
pub(crate) const CLAIM_POSTGRES: &str = concat!(
    "WITH picked AS (SELECT id AS picked_id FROM items WHERE current_provider = $5 \
     AND state = $6 AND next_attempt_at_ms <= $4 ORDER BY next_attempt_at_ms \
     LIMIT $7 FOR UPDATE SKIP LOCKED) \
     UPDATE items SET state = $1, lease_owner = $2, lease_expires_at_ms = $3, \
     updated_at_ms = $4 FROM picked WHERE id = picked_id AND state = $6 RETURNING ",
    item_cols!()
);

pub(crate) const INSERT: &str = "INSERT INTO items (id, provider, current_provider, \
    method, path, headers_json, body_json, idempotency_key, created_at_ms, state, attempts, \
    window_attempts, window_start_ms, next_attempt_at_ms, updated_at_ms, content_sha256) \
    VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, 0, 0, $8, $8, $8, $10) \
    ON CONFLICT (idempotency_key) DO NOTHING RETURNING id";

/// The item holding a key and its content digest (NULL for items stored before
/// migration 0006: unknown, never refused).
pub(crate) const ID_BY_KEY: &str =
    "SELECT id, content_sha256 FROM items WHERE idempotency_key = $1";

/// Keys per [`digests_by_key_sql`] statement; a shorter list is padded by repeating its
/// last key, so that one statement text (one prepared statement) serves every call.
pub(crate) const KEYS_PER_PROBE: usize = 256;

/// Id and content digest of the items holding any of [`KEYS_PER_PROBE`] keys. Bind the
/// keys in order.
pub(crate) fn digests_by_key_sql(p: Placeholders) -> String {
    let mut sql = String::from(
        "SELECT idempotency_key, id, content_sha256 FROM items WHERE idempotency_key IN (",
    );
    for n in 1..=KEYS_PER_PROBE {
        if n > 1 {
            sql.push_str(", ");
        }
        p.push(&mut sql, n);
    }
    sql.push(')');
    sql
}

pub(crate) const PROMOTE_ONE_PROVIDER: &str = "UPDATE items SET state = $1, \
    updated_at_ms = $2 WHERE current_provider = $3 AND state = $4 AND next_attempt_at_ms <= $2";

pub(crate) const PROMOTE_ALL: &str = "UPDATE items SET state = $1, updated_at_ms = $2 \
    WHERE state = $3 AND next_attempt_at_ms <= $2";

pub(crate) const STATE_OF: &str = "SELECT state, lease_owner FROM items WHERE id = $1";

/// `$4` is [`crate::model::LEASE_EXPIRED_REASON`], `$5` the marker
/// [`crate::model::MovedBy::LeaseExpired`]. Charges the requests the lease holder marked as
/// sent ([`mark_sent_sql`]) and never recorded: an attempt is a request on the wire, so an item
/// claimed and never sent costs nothing. Returns the ids moved; [`RECLAIM_LOST`] read their
/// unrecorded sends first, in the same transaction.
pub(crate) const RECLAIM: &str = "UPDATE items SET state = $1, \
    attempts = attempts + sent_unrecorded, \
    window_attempts = window_attempts + sent_unrecorded, sent_unrecorded = 0, \
    next_attempt_at_ms = $2, reason = $4, \
    moved_by = $5, lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = $2 \
    WHERE state = $3 AND lease_expires_at_ms <= $2 RETURNING id";

/// [`RECLAIM`] whatever the lease: for a caller that knows every lease holder is dead.
pub(crate) const RECLAIM_ALL: &str = "UPDATE items SET state = $1, \
    attempts = attempts + sent_unrecorded, \
    window_attempts = window_attempts + sent_unrecorded, sent_unrecorded = 0, \
    next_attempt_at_ms = $2, reason = $4, moved_by = $5, lease_owner = NULL, \
    lease_expires_at_ms = NULL, updated_at_ms = $2 WHERE state = $3 RETURNING id";

/// The requests [`RECLAIM`] is about to charge, before it runs: the items in state `$1`
/// whose lease ended by `$2` and that hold sends never recorded, with their attempts so
/// far, the provider, the idempotency key and the claim time (`updated_at_ms`: nothing
/// else writes an in-flight item). The backend's row lock is appended.
pub(crate) const RECLAIM_LOST: &str = "SELECT id, current_provider, idempotency_key, attempts, \
    sent_unrecorded, updated_at_ms FROM items \
    WHERE state = $1 AND lease_expires_at_ms <= $2 AND sent_unrecorded > 0";

/// [`RECLAIM_LOST`] for [`RECLAIM_ALL`], whatever the lease.
pub(crate) const RECLAIM_ALL_LOST: &str = "SELECT id, current_provider, idempotency_key, \
    attempts, sent_unrecorded, updated_at_ms FROM items \
    WHERE state = $1 AND sent_unrecorded > 0";

pub(crate) const DEFER_ONE: &str = "UPDATE items SET state = $1, reason = $2, \
    updated_at_ms = $3 WHERE id = $4 AND state = $5";

/// `$5`, `$6`, `$7` are the states an item may be cancelled from (never `IN_FLIGHT`).
pub(crate) const CANCEL_ONE: &str = "UPDATE items SET state = $1, reason = $2, \
    updated_at_ms = $3 WHERE id = $4 AND state IN ($5, $6, $7)";

pub(crate) const DEFER_OLD: &str = "UPDATE items SET state = $1, reason = $2, \
    updated_at_ms = $3 WHERE current_provider = $4 AND state = $5 AND window_start_ms <= $6";

/// `$4` is a provider name or `''` for any; `$5` an id or `''` for any.
pub(crate) const REQUEUE: &str = "UPDATE items SET state = $1, window_attempts = 0, \
    window_start_ms = $2, next_attempt_at_ms = $2, reason = NULL, moved_by = NULL, \
    updated_at_ms = $2 \
    WHERE state = $3 AND ($4 = '' OR current_provider = $4) AND ($5 = '' OR id = $5)";

/// `$8` is the marker [`crate::model::MovedBy::FailedOver`]. The item starts a new attempt
/// window at the move: the new provider's caps and its own fail-over wait count from there.
pub(crate) const FAIL_OVER: &str = "UPDATE items SET state = $1, current_provider = $2, \
    next_attempt_at_ms = $3, window_start_ms = $3, window_attempts = 0, reason = $4, \
    moved_by = $8, updated_at_ms = $3 \
    WHERE current_provider = $5 AND state = $6 AND window_start_ms <= $7";

/// `$1` is a state name or `''` for all.
pub(crate) const REASON_COUNTS: &str = "SELECT state, COALESCE(reason, ''), COUNT(*) \
    FROM items WHERE ($1 = '' OR state = $1) GROUP BY state, COALESCE(reason, '') \
    ORDER BY 3 DESC, 1, 2";

/// `$1` is a state name or `''`, `$2` a provider name or `''`, `$3` the limit.
pub(crate) const LIST: &str = concat!(
    "SELECT ",
    item_cols!(),
    " FROM items WHERE ($1 = '' OR state = $1) AND ($2 = '' OR current_provider = $2) \
     ORDER BY created_at_ms DESC, id DESC LIMIT $3"
);

/// `$1` is a provider name or `''` for all.
pub(crate) const COUNTS: &str = "SELECT state, COUNT(*) FROM items \
    WHERE ($1 = '' OR current_provider = $1) GROUP BY state";

pub(crate) const OLDEST_WAITING: &str =
    "SELECT MIN(window_start_ms) FROM items WHERE state IN ($1, $2)";

/// `IN_FLIGHT` (`$1`) items whose lease ended by `$2`: what [`RECLAIM`] would move.
pub(crate) const EXPIRED_LEASES: &str = "SELECT COUNT(*) FROM items \
    WHERE state = $1 AND lease_expires_at_ms <= $2";

/// Whether any of `providers` providers has an active item: bind the three active
/// states, then the providers. One statement: one snapshot of the whole outbox. Probes
/// `items_claim` (provider, state) per pair.
pub(crate) fn any_active_sql(providers: usize, p: Placeholders) -> String {
    let mut sql = String::from("SELECT CAST(1 AS BIGINT) FROM items WHERE state IN (");
    for n in 1..=3 {
        if n > 1 {
            sql.push_str(", ");
        }
        p.push(&mut sql, n);
    }
    sql.push_str(") AND current_provider IN (");
    for n in 4..4 + providers {
        if n > 4 {
            sql.push_str(", ");
        }
        p.push(&mut sql, n);
    }
    sql.push_str(") LIMIT 1");
    sql
}

pub(crate) const NEXT_DUE: &str = "SELECT MIN(next_attempt_at_ms) FROM items \
    WHERE current_provider = $1 AND state IN ($2, $3)";

pub(crate) const GET: &str = concat!("SELECT ", item_cols!(), " FROM items WHERE id = $1");

pub(crate) const ATTEMPTS: &str = "SELECT item_id, attempt_no, at_ms, provider, \
    remote_http_status, remote_smpp_code, verdict_class, delay_ms, delay_reason, latency_ms, \
    idempotency_key FROM attempts WHERE item_id = $1 ORDER BY attempt_no";

/// `$1` is a provider name or `''` for all. Reads the small `attempt_counts` table (one
/// row per provider and code), not the attempts.
pub(crate) const REMOTE_COUNTS: &str = "SELECT kind, code, CAST(SUM(n) AS BIGINT) \
    FROM attempt_counts WHERE ($1 = '' OR provider = $1) \
    GROUP BY kind, code ORDER BY 3 DESC, 1, 2";

/// Add `$4` attempts to the counter of (provider `$1`, kind `$2`, code `$3`).
pub(crate) const BUMP_COUNT: &str = "INSERT INTO attempt_counts (provider, kind, code, n) \
    VALUES ($1, $2, $3, $4) ON CONFLICT (provider, kind, code) \
    DO UPDATE SET n = attempt_counts.n + excluded.n";

/// Store a receipt for (provider `$1`, message id `$2`): state `$3` received at `$4`; a
/// later receipt for the same id replaces it.
pub(crate) const RECORD_RECEIPT: &str = "INSERT INTO receipts (provider, message_id, \
    state, at_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (provider, message_id) \
    DO UPDATE SET state = excluded.state, at_ms = excluded.at_ms";

/// Receipts per state (`$1` a provider name or `''` for all): all of them, and those
/// matched to an item (the item that carries the `message_id` on that provider).
pub(crate) const RECEIPT_COUNTS: &str = "SELECT r.state, CAST(COUNT(*) AS BIGINT), \
    CAST(COUNT(i.id) AS BIGINT) FROM receipts r LEFT JOIN items i \
    ON i.current_provider = r.provider AND i.message_id = r.message_id \
    WHERE ($1 = '' OR r.provider = $1) GROUP BY r.state";

/// The receipt of item `$1`, if one arrived.
pub(crate) const RECEIPT_OF: &str = "SELECT r.state, r.at_ms FROM items i JOIN receipts r \
    ON r.provider = i.current_provider AND r.message_id = i.message_id WHERE i.id = $1";

/// How a backend writes bind parameters in generated statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholders {
    /// `$1, $2, …` (Postgres).
    Numbered,
    /// `?` bound in textual order (SQLite). SQLite resolves a named parameter such as
    /// `$7` by a linear search of the statement's names, so binding n of them costs
    /// O(n²): 40 % of a 256-row insert's time went there.
    Anonymous,
}

impl Placeholders {
    pub(crate) fn push(self, sql: &mut String, n: usize) {
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
/// attempts made, next attempt (ms or NULL), provider code, reason, lease owner, the
/// remote's message id (or NULL, which keeps the stored one); then now
/// (ms) and the source state (`IN_FLIGHT`). Conditioned per row on the state and lease
/// owner like a single-row update; returns the rows it moved. The attempts made replace
/// the lease's sends marked as unrecorded ([`mark_sent_sql`]). Clears `moved_by` when the
/// remote answered (attempts made); an item handed back unsent keeps it, or a reclaimed
/// item would turn into a retry that spends budget.
pub(crate) fn complete_sql(rows: usize, ph: Placeholders) -> String {
    const TYPES: [&str; 8] = [
        "TEXT", "TEXT", "BIGINT", "BIGINT", "TEXT", "TEXT", "TEXT", "TEXT",
    ];
    let mut sql = String::with_capacity(600 + rows * 150);
    sql.push_str("WITH v (id, target, n, next_ms, code, reason, owner, mid) AS (VALUES ");
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
         window_attempts = window_attempts + v.n, sent_unrecorded = 0, \
         next_attempt_at_ms = COALESCE(v.next_ms, next_attempt_at_ms), \
         last_provider_code = COALESCE(v.code, last_provider_code), reason = v.reason, \
         moved_by = CASE WHEN v.n = 0 THEN moved_by ELSE NULL END, \
         message_id = COALESCE(v.mid, message_id), lease_owner = NULL, lease_expires_at_ms = NULL, updated_at_ms = ",
    );
    ph.push(&mut sql, n + 1);
    sql.push_str(" FROM v WHERE items.id = v.id AND items.state = ");
    ph.push(&mut sql, n + 2);
    sql.push_str(" AND items.lease_owner = v.owner");
    sql.push_str(COMPLETE_RETURNING);
    sql
}

/// The end of [`complete_sql`]: without it the statement moves the same rows and returns
/// none.
pub(crate) const COMPLETE_RETURNING: &str =
    " RETURNING items.id, items.attempts, items.idempotency_key";

/// One request each of `rows` items goes on the wire: bind, per item, its id and lease
/// owner; then the source state (`IN_FLIGHT`). One statement (atomic on its own, no
/// transaction around it), committed before the requests are sent so that a lease
/// reclaimed after a crash charges them ([`RECLAIM`]); returns the (id, lease owner) pairs
/// it marked. The ids
/// must be distinct.
pub(crate) fn mark_sent_sql(rows: usize, ph: Placeholders) -> String {
    let mut sql = String::with_capacity(200 + rows * 50);
    sql.push_str("WITH v (id, owner) AS (VALUES ");
    let mut n = 0;
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push_str("(CAST(");
        ph.push(&mut sql, n + 1);
        sql.push_str(" AS TEXT), CAST(");
        ph.push(&mut sql, n + 2);
        sql.push_str(" AS TEXT))");
        n += 2;
    }
    sql.push_str(
        ") UPDATE items SET sent_unrecorded = sent_unrecorded + 1 FROM v \
         WHERE items.id = v.id AND items.lease_owner = v.owner AND items.state = ",
    );
    ph.push(&mut sql, n + 1);
    sql.push_str(MARK_SENT_RETURNING);
    sql
}

/// The end of [`mark_sent_sql`]: without it the statement marks the same rows and returns
/// none (the count of rows it touched says whether all were marked).
pub(crate) const MARK_SENT_RETURNING: &str = " RETURNING items.id, items.lease_owner";

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
