//! The embedded default: SQLite through sqlx, in WAL mode.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};

use crate::error::Result;

/// How long a writer waits for SQLite's single write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`super::Store`] in one SQLite file.
///
/// WAL mode lets readers (`status`, progress) run beside the single writer;
/// `synchronous = NORMAL` keeps every committed transaction across a process crash
/// (`kill -9`), though the last few may be lost on power failure. Claims are single
/// `UPDATE … RETURNING` statements and writes use `BEGIN IMMEDIATE`, so two workers never
/// claim the same item and never deadlock upgrading a read lock.
///
/// # Clone
/// Clones share the connection pool.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Open (creating if missing) the database file at `path` and apply migrations.
    ///
    /// # Errors
    /// Database or migration errors.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        Self::with_options(opts).await
    }

    /// Open from a `sqlite://path` URL.
    ///
    /// # Errors
    /// A malformed URL, database or migration errors.
    pub async fn connect(url: &str) -> Result<Self> {
        let opts = SqliteConnectOptions::from_str(url)?.create_if_missing(true);
        Self::with_options(opts).await
    }

    /// Open with explicit options; WAL, `synchronous = NORMAL` and the busy timeout are
    /// always applied on top.
    ///
    /// # Errors
    /// Database or migration errors.
    pub async fn with_options(opts: SqliteConnectOptions) -> Result<Self> {
        let opts = opts
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .statement_cache_capacity(64);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(Self { pool })
    }

    /// The underlying pool (for diagnostics and tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>> {
        // IMMEDIATE takes the write lock up front (waiting up to the busy timeout) instead
        // of failing with SQLITE_BUSY when a read lock cannot be upgraded.
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}

store_impl!(
    SqliteStore,
    claim = claim_sql_sqlite!(),
    placeholders = crate::store::common::Placeholders::Anonymous
);
