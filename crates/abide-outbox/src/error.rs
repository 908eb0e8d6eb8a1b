//! The crate's one error type, and [`ErrorKind`]: what a caller may decide on without
//! matching every variant (as sqlx's `ErrorKind` classifies database errors).
//!
//! The database driver's errors stay inside: [`Error::Database`] holds a
//! [`DatabaseError`], which says its [`ErrorKind`] and shows the driver's message (its
//! [`std::error::Error::source`]) without naming the driver's type.

use std::path::PathBuf;
use std::time::Duration;

use crate::state::IllegalTransition;
use crate::transport::http::path::PathError;
use crate::transport::preflight::Preflight;

/// Everything that can go wrong in the outbox.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request or item is malformed (absolute URL, secret header, bad key, ...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// An item's path could reach something outside its provider's base path
    /// ([`crate::transport::http::path`]): the rule it broke, and the provider's base
    /// path when the path was judged against it.
    #[error("invalid request: {0}")]
    Path(PathError),
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
    /// A setting of the providers file is invalid: the provider it belongs to (`None` for
    /// a setting of the file, such as `[coordination]`), the setting, and what is wrong.
    #[error("{}{field}: {message}", provider_prefix(provider.as_deref()))]
    Config {
        /// The provider's name; `None` for a file-level setting.
        provider: Option<String>,
        /// The offending setting, as written in the file (`retry.max_attempts`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The providers file is not TOML of the expected shape (a syntax error, an unknown
    /// key, a value of the wrong type). The message is the TOML parser's, without the
    /// source line it would quote (a line may hold a password), redacted and bounded.
    #[error("TOML parse error{}: {message}", position(*line, *column))]
    Toml {
        /// 1-based line of the offending text, when the parser knows it.
        line: Option<usize>,
        /// 1-based column (in characters) on that line.
        column: Option<usize>,
        /// What the parser said.
        message: String,
    },
    /// The providers file could not be read.
    #[error("{}: {source}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A provider cannot start sending as configured (checked by
    /// [`crate::Dispatcher::new`] before anything is claimed; see [`Preflight`]).
    #[error(transparent)]
    Preflight(#[from] Preflight),
    /// The HTTP client could not be built (its TLS back-end did not initialise).
    #[error("the HTTP client could not be built: {0}")]
    HttpClient(String),
    /// The coordination through Redis could not be set up (an unusable URL); the message
    /// shows the URL without its password.
    #[error("coordination: {0}")]
    Coordination(String),
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
    /// The database opened read-only is not an outbox of this version: it holds no abide
    /// tables, or lacks some of this build's migrations. Nothing was changed in it.
    #[error("{database} is not an abide outbox: {reason}")]
    NotAnOutbox {
        /// The file path, or the URL without its password.
        database: String,
        /// What is missing, and what would create it.
        reason: String,
    },
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
        timeout: Duration,
        /// What the driver said.
        source: DatabaseError,
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
        database: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The sender lock file could not be created or locked.
    #[error("lock file {}: {source}", path.display())]
    LockFile {
        /// The lock file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The first write of a run that sends from an SQLite file under its sender lock
    /// failed: moving the items an earlier run left `IN_FLIGHT` back to `PENDING`
    /// ([`crate::open_for_sending`]). A read-only or full database fails here, whether or
    /// not an earlier run left anything.
    #[error(
        "preparing the outbox database for sending (its first write: items an earlier run \
         left IN_FLIGHT go back to PENDING): {0}"
    )]
    PrepareForSending(#[source] Box<Error>),
    /// The database failed (a query, a connection, applying the migrations).
    #[error("database: {0}")]
    Database(DatabaseError),
    /// Results could not be written for longer than the dispatcher's `store_fault_limit`
    /// (the run stopped sending rather than send what it cannot record), or the run was
    /// asked to stop while they could not be written (`interrupted`: it stopped waiting
    /// for the database at once). Items whose answers were lost stay `IN_FLIGHT` until
    /// their lease ends and are then resent with the same idempotency key.
    #[error(
        "stopped{}: results could not be written to the database for {seconds} s (last \
         error: {cause})",
        if *interrupted { " as asked" } else { "" }
    )]
    ResultsNotRecorded {
        /// How long writes had been failing.
        seconds: u64,
        /// The last database error.
        cause: String,
        /// Asked to stop (a SIGTERM) while writes were failing, before the limit.
        interrupted: bool,
    },
}

fn provider_prefix(provider: Option<&str>) -> String {
    provider.map_or_else(String::new, |p| format!("provider {p:?}: "))
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

/// What kind of failure an [`Error`] is: what to do about it, without matching every
/// variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An item is malformed, names an unknown provider, or reuses a key for another
    /// message: fix the input (nothing of it was stored).
    Input,
    /// The providers file, the database URL or a setting is wrong: fix the configuration.
    Config,
    /// The state machine or a lease refused a change, or the item does not exist.
    State,
    /// Another process holds the SQLite file's sender lock.
    Locked,
    /// The database cannot be reached or is not accepting work right now (connection
    /// refused, pool timed out, I/O): try again later.
    Unavailable,
    /// The database refused or failed a statement, a stored row is corrupt, or a migration
    /// failed.
    Database,
}

impl Error {
    /// A refused setting of `provider`.
    pub(crate) fn config(provider: &str, field: &str, message: impl Into<String>) -> Self {
        Error::Config {
            provider: Some(provider.to_owned()),
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidRequest(_)
            | Error::Path(_)
            | Error::KeyConflict { .. }
            | Error::UnknownProvider(_) => ErrorKind::Input,
            Error::Config { .. }
            | Error::Toml { .. }
            | Error::ReadConfig { .. }
            | Error::Preflight(_)
            | Error::HttpClient(_)
            | Error::Coordination(_)
            | Error::DatabaseUrl(_)
            | Error::NotAnOutbox { .. } => ErrorKind::Config,
            Error::IllegalTransition(_) | Error::LeaseLost { .. } | Error::NotFound(_) => {
                ErrorKind::State
            }
            Error::Locked { .. } | Error::LockFile { .. } => ErrorKind::Locked,
            Error::Unreachable { .. } | Error::ResultsNotRecorded { .. } => ErrorKind::Unavailable,
            Error::Database(e) => e.kind(),
            Error::PrepareForSending(e) => e.kind(),
            Error::Corrupt(_) => ErrorKind::Database,
        }
    }
}

/// A failure of the database driver: its message (the driver's error is the source), and
/// its [`ErrorKind`].
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct DatabaseError {
    kind: ErrorKind,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl DatabaseError {
    /// [`ErrorKind::Unavailable`] for a connection that failed or timed out, else
    /// [`ErrorKind::Database`].
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl From<sqlx::Error> for DatabaseError {
    fn from(e: sqlx::Error) -> Self {
        let kind = match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => ErrorKind::Unavailable,
            sqlx::Error::Configuration(_) => ErrorKind::Config,
            _ => ErrorKind::Database,
        };
        Self {
            kind,
            source: Box::new(e),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for DatabaseError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self {
            kind: ErrorKind::Database,
            source: Box::new(e),
        }
    }
}

// The store's `?` on driver results; the driver's types stay out of the variants.
#[doc(hidden)]
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Database(e.into())
    }
}

#[doc(hidden)]
impl From<sqlx::migrate::MigrateError> for Error {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Error::Database(e.into())
    }
}

impl From<PathError> for Error {
    fn from(e: PathError) -> Self {
        Error::Path(e)
    }
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_say_what_to_do() {
        let input = Error::UnknownProvider("x".into());
        assert_eq!(input.kind(), ErrorKind::Input);
        let config = Error::Config {
            provider: None,
            field: "provider".into(),
            message: "no [[provider]] configured".into(),
        };
        assert_eq!(config.kind(), ErrorKind::Config);
        assert_eq!(config.to_string(), "provider: no [[provider]] configured");
        let named = Error::Config {
            provider: Some("a".into()),
            field: "concurrency".into(),
            message: "must be 1..=1024".into(),
        };
        assert_eq!(
            named.to_string(),
            "provider \"a\": concurrency: must be 1..=1024"
        );
        let down = Error::from(sqlx::Error::PoolTimedOut);
        assert_eq!(down.kind(), ErrorKind::Unavailable);
        assert!(down.to_string().starts_with("database: "), "{down}");
        let refused = Error::from(sqlx::Error::RowNotFound);
        assert_eq!(refused.kind(), ErrorKind::Database);
        let toml = Error::Toml {
            line: Some(3),
            column: Some(7),
            message: "unknown field `x`".into(),
        };
        assert_eq!(
            toml.to_string(),
            "TOML parse error at line 3, column 7: unknown field `x`"
        );
    }
}
