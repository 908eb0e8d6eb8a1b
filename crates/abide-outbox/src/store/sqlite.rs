//! The embedded default: SQLite through sqlx, in WAL mode.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Sqlite;

use super::SqlStore;
use crate::error::Result;

/// How long a writer waits for SQLite's single write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`super::Store`] in one SQLite file.
///
/// Two pools: every write goes through ONE connection (SQLite has one writer anyway),
/// and queries that change nothing (counts, progress, `get`) use up to four others. In
/// WAL mode a connection drops its whole page cache whenever another connection has
/// committed since its last transaction; with writes spread over several connections,
/// every claim and every completion started cold and re-read its pages. The readers'
/// caches may go cold; the writer's stays warm.
///
/// WAL mode lets readers (`status`, progress) run beside the single writer;
/// `synchronous = NORMAL` keeps every committed transaction across a process crash
/// (`kill -9`), though the last few may be lost on power failure (or a kernel crash): the
/// write-ahead log is synced only at checkpoints. What that risks: the lost commits may
/// hold send marks of requests that went out, so after a power cut such an item is
/// charged fewer attempts than the provider saw and is resent with the same idempotency
/// key; nothing committed before the last checkpoint is lost. `FULL` would close that at
/// the cost of one fsync per write batch. Measured and not adopted: a larger
/// `wal_autocheckpoint` (10,000 pages) changed nothing beyond the spread, and a larger
/// page cache made commits slower (BENCHMARKS.md). Claims are single
/// `UPDATE … RETURNING` statements and writes use `BEGIN IMMEDIATE`, so two workers never
/// claim the same item and never deadlock upgrading a read lock.
///
/// # Clone
/// Clones share the connection pool.
pub type SqliteStore = SqlStore<Sqlite>;

impl SqlStore<Sqlite> {
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

    /// Open the existing outbox file at `path` for reading only: nothing is created,
    /// migrated or written (not even the journal mode), so a file another application owns
    /// is left as it was. For `abide status`.
    ///
    /// # Errors
    /// [`crate::Error::NotAnOutbox`] when the file holds no abide tables or an older
    /// schema; database errors (a missing file among them).
    pub async fn open_read_only(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(false)
            .read_only(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(0)
            .connect_with(opts)
            .await?;
        let migrator = sqlx::migrate!("./migrations/sqlite");
        super::existing::require_schema(&pool, &migrator, &path.display().to_string()).await?;
        Ok(Self {
            writes: pool.clone(),
            reads: pool,
            separate_reads: false,
            read_only: true,
        })
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
            .connect_with(opts.clone())
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        let name = opts.get_filename().to_string_lossy();
        let in_memory = name == ":memory:" || name.starts_with("file:sqlx-in-memory");
        let reads = if in_memory {
            // Each connection of an unnamed in-memory database is a database of its own.
            pool.clone()
        } else {
            // Opened after the migrations so that they exist (and the file is in WAL mode).
            SqlitePoolOptions::new()
                .max_connections(4)
                .min_connections(0)
                .connect_with(opts.create_if_missing(false))
                .await?
        };
        Ok(Self {
            writes: pool,
            reads,
            separate_reads: !in_memory,
            read_only: false,
        })
    }

    /// Close cleanly: checkpoint the write-ahead log into the database file
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`) and close both pools. Afterwards the `.db` file
    /// alone holds every committed item, so it can be copied or moved without its `-wal`
    /// file. Other clones fail afterwards. Skipping it loses nothing (the WAL is replayed
    /// on the next open); it only leaves the data split over two files.
    ///
    /// # Errors
    /// Database errors from the checkpoint; the pools are closed either way.
    pub async fn close(&self) -> Result<()> {
        if self.read_only {
            self.writes.close().await;
            return Ok(());
        }
        // Readers first: a checkpoint cannot truncate past a reader's snapshot.
        if self.separate_reads {
            self.reads.close().await;
        }
        let r = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.writes)
            .await;
        self.writes.close().await;
        r?;
        Ok(())
    }
}
