//! The crate's one error type.

use crate::state::IllegalTransition;

/// Everything that can go wrong in the outbox.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request or item is malformed (absolute URL, secret header, bad key, ...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// An idempotency key given with an item is already stored with different content: one
    /// key names one message, so the new item is refused rather than taken for the stored
    /// one (and silently never sent). Nothing of that enqueue call was stored.
    #[error(
        "idempotency key {key:?} (item {index} of the batch) already names a different \
         message, item {existing_id}; nothing of this batch was enqueued (one key names one \
         message: give the new message a new key)"
    )]
    KeyConflict {
        /// The key, as given.
        key: String,
        /// The id of the stored item that holds it.
        existing_id: String,
        /// The position (0-based) of the refused item in the slice given to `enqueue`.
        index: usize,
    },
    /// The item targets a provider that is not configured.
    #[error("unknown provider {0:?}")]
    UnknownProvider(String),
    /// Provider configuration is invalid; names the provider and the field.
    #[error("provider {provider:?}: {field}: {message}")]
    Config {
        /// The provider's name (or `"<file>"` for file-level problems).
        provider: String,
        /// The offending field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The state machine forbids this move; the store refused it.
    #[error(transparent)]
    IllegalTransition(#[from] IllegalTransition),
    /// The item is `IN_FLIGHT` under another owner's lease (ours expired and was reclaimed).
    #[error("item {id} is leased by another worker")]
    LeaseLost {
        /// Item id.
        id: String,
    },
    /// No item with this id.
    #[error("no item {0}")]
    NotFound(String),
    /// A stored row could not be decoded (hand-edited database?).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The database URL or path cannot name a database (e.g. empty).
    #[error("database {0}")]
    DatabaseUrl(String),
    /// The database server could not be reached in time. `address` is `host:port`, never
    /// the URL (which may carry a password).
    #[error("could not reach the database at {address} within {timeout:?}: {source}")]
    Unreachable {
        /// `host:port` (or the socket path).
        address: String,
        /// How long the connection was given.
        timeout: std::time::Duration,
        /// What the driver said.
        source: sqlx::Error,
    },
    /// Another process is sending from this SQLite file: it holds the sender lock
    /// ([`crate::SenderLock`]).
    #[error(
        "another abide send or serve is using {} (lock {} is held); wait for it or stop it \
         first (a running abide serve takes new items on POST /v1/items)",
        database.display(),
        lock.display()
    )]
    Locked {
        /// The database file.
        database: std::path::PathBuf,
        /// The lock file.
        lock: std::path::PathBuf,
    },
    /// The sender lock file could not be created or locked.
    #[error("lock file {}: {source}", path.display())]
    LockFile {
        /// The lock file.
        path: std::path::PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Results could not be written for longer than the dispatcher's `store_fault_limit`:
    /// the run stopped sending rather than send what it cannot record. Items whose answers
    /// were lost stay `IN_FLIGHT` until their lease ends and are then resent with the same
    /// idempotency key.
    #[error("stopped: results could not be written to the database for {seconds} s (last error: {cause})")]
    ResultsNotRecorded {
        /// How long writes had been failing.
        seconds: u64,
        /// The last database error.
        cause: String,
    },
    /// Applying migrations failed.
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;
