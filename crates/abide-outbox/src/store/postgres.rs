//! PostgreSQL, mirroring the SQLite store statement for statement.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::Postgres;

use super::SqlStore;
use crate::error::{Error, Result};

/// How long [`PostgresStore::connect`] (and every later pool checkout) waits for a
/// connection before giving up: long enough for a server on another host, short enough
/// that a wrong address or a stopped server is reported at once instead of hanging.
pub const POSTGRES_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`super::Store`] in PostgreSQL. Claims use `FOR UPDATE SKIP LOCKED`, so any number of
/// dispatchers on any number of hosts can share one database.
///
/// # Clone
/// Clones share the connection pool.
pub type PostgresStore = SqlStore<Postgres>;

impl SqlStore<Postgres> {
    /// Connect to `url` (`postgres://user@host/db`) and apply migrations, waiting at most
    /// [`POSTGRES_CONNECT_TIMEOUT`] for the server.
    ///
    /// # Errors
    /// [`Error::DatabaseUrl`] for a malformed URL, [`Error::Unreachable`] (naming
    /// `host:port`, never the password) when no connection could be made in time, or
    /// migration errors.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with_timeout(url, POSTGRES_CONNECT_TIMEOUT).await
    }

    /// [`PostgresStore::connect`] with another connection timeout.
    ///
    /// # Errors
    /// As [`PostgresStore::connect`].
    pub async fn connect_with_timeout(url: &str, timeout: Duration) -> Result<Self> {
        // The parse error of sqlx may quote the URL; ours does not.
        let opts = PgConnectOptions::from_str(url)
            .map_err(|_| Error::DatabaseUrl("URL is not a valid postgres:// URL".into()))?;
        Self::from_pool(pool(opts, 8, timeout).await?).await
    }

    /// Connect to the existing outbox at `url` for reading only: no migration runs and
    /// every session is `default_transaction_read_only`, so an empty schema or another
    /// application's database is left as it was. For `abide status`.
    ///
    /// # Errors
    /// As [`PostgresStore::connect`], and [`Error::NotAnOutbox`] when the schema holds no
    /// abide tables or an older version of them.
    pub async fn connect_read_only(url: &str) -> Result<Self> {
        let timeout = POSTGRES_CONNECT_TIMEOUT;
        let opts = PgConnectOptions::from_str(url)
            .map_err(|_| Error::DatabaseUrl("URL is not a valid postgres:// URL".into()))?
            .options([("default_transaction_read_only", "on")]);
        let pool = pool(opts, 2, timeout).await?;
        let migrator = sqlx::migrate!("./migrations/postgres");
        super::existing::require_schema(&pool, &migrator, &abide_core::echo::redact_url(url))
            .await?;
        Ok(Self {
            writes: pool.clone(),
            reads: pool,
            separate_reads: false,
            read_only: true,
        })
    }

    /// Close the pool, waiting for checked-out connections to come back. Other clones
    /// fail afterwards.
    pub async fn close(&self) {
        self.writes.close().await;
    }

    /// Use an existing pool (e.g. one whose connections set a `search_path`) and apply
    /// migrations.
    ///
    /// # Errors
    /// Migration errors.
    pub async fn from_pool(pool: PgPool) -> Result<Self> {
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        // Readers and writers share one pool: MVCC needs no separation.
        Ok(Self {
            writes: pool.clone(),
            reads: pool,
            separate_reads: false,
            read_only: false,
        })
    }
}

/// A pool of at most `max` connections to `opts`, waiting at most `timeout` for the server.
///
/// # Errors
/// [`Error::Unreachable`], naming `host:port` (never the URL: it may carry a password).
async fn pool(opts: PgConnectOptions, max: u32, timeout: Duration) -> Result<PgPool> {
    let address = format!("{}:{}", opts.get_host(), opts.get_port());
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(timeout)
        .connect_with(opts)
        .await
        .map_err(|source| Error::Unreachable {
            address,
            timeout,
            source: source.into(),
        })
}
