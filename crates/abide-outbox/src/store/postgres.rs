//! PostgreSQL, mirroring the SQLite store statement for statement.

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use crate::error::Result;

/// A [`super::Store`] in PostgreSQL. Claims use `FOR UPDATE SKIP LOCKED`, so any number of
/// dispatchers on any number of hosts can share one database.
///
/// # Clone
/// Clones share the connection pool.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connect to `url` (`postgres://user@host/db`) and apply migrations.
    ///
    /// # Errors
    /// Connection or migration errors.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new().max_connections(8).connect(url).await?;
        Self::from_pool(pool).await
    }

    /// Use an existing pool (e.g. one whose connections set a `search_path`) and apply
    /// migrations.
    ///
    /// # Errors
    /// Migration errors.
    pub async fn from_pool(pool: PgPool) -> Result<Self> {
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Postgres readers and writers share one pool: MVCC needs no separation.
    fn read_pool(&self) -> &PgPool {
        &self.pool
    }

    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }
}

store_impl!(
    PostgresStore,
    claim = claim_sql_postgres!(),
    placeholders = crate::store::common::Placeholders::Numbered
);
