//! Fresh stores for tests: a temp SQLite file, or a fresh Postgres schema.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abide_outbox::{PostgresStore, SqliteStore, Store};
use futures::FutureExt;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Executor;

pub mod smsc;
mod still;
pub use still::{still, StillStore, TokioClock};

pub const PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A fixed, readable start time for every test.
pub fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

/// Run `check` against a store in a fresh temporary SQLite file.
pub async fn with_sqlite<F, Fut>(check: F)
where
    F: FnOnce(SqliteStore) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("outbox.db"))
        .await
        .unwrap();
    check(store).await;
}

fn require_services() -> bool {
    std::env::var("ABIDE_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// Run `check` against a store in a fresh Postgres schema, dropped afterwards (also when
/// `check` panics). Prints `SKIPPED:` and returns when Postgres is unreachable, unless
/// `ABIDE_REQUIRE_SERVICES=1`.
pub async fn with_postgres<F, Fut>(check: F)
where
    F: FnOnce(PostgresStore) -> Fut,
    Fut: Future<Output = ()>,
{
    let admin = match PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(3))
        .connect(PG_URL)
        .await
    {
        Ok(p) => p,
        Err(e) if !require_services() => {
            println!("SKIPPED: PostgreSQL at {PG_URL} unreachable: {e}");
            return;
        }
        Err(e) => panic!("PostgreSQL required (ABIDE_REQUIRE_SERVICES=1) but unreachable: {e}"),
    };
    let schema = format!("abide_test_{}", uuid::Uuid::new_v4().simple());
    admin
        .execute(format!("CREATE SCHEMA {schema}").as_str())
        .await
        .unwrap();
    let opts = PgConnectOptions::from_str(PG_URL)
        .unwrap()
        .options([("search_path", schema.as_str())])
        .application_name(&schema);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(opts)
        .await
        .unwrap();
    let store = PostgresStore::from_pool(pool.clone()).await.unwrap();
    let result = AssertUnwindSafe(check(store)).catch_unwind().await;
    pool.close().await;
    admin
        .execute(format!("DROP SCHEMA {schema} CASCADE").as_str())
        .await
        .unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// The single-item moves the `Store` trait leaves out (no dispatcher or CLI path calls
/// them), so that the conformance matrix still applies every event of the state table.
pub trait ByHand: Store {
    fn promote_due(
        &self,
        provider: Option<&str>,
        now: SystemTime,
    ) -> impl Future<Output = abide_outbox::Result<u64>> + Send;
    fn defer(
        &self,
        id: &str,
        reason: &str,
        now: SystemTime,
    ) -> impl Future<Output = abide_outbox::Result<()>> + Send;
    fn requeue(
        &self,
        id: &str,
        now: SystemTime,
    ) -> impl Future<Output = abide_outbox::Result<()>> + Send;
    /// Make the item holding `key` look stored before migration 0006: content unknown.
    fn forget_content_digest(&self, key: &str) -> impl Future<Output = ()> + Send;
}

macro_rules! by_hand {
    ($($store:ty),*) => {$(
        impl ByHand for $store {
            async fn promote_due(
                &self,
                provider: Option<&str>,
                now: SystemTime,
            ) -> abide_outbox::Result<u64> {
                <$store>::promote_due(self, provider, now).await
            }
            async fn defer(&self, id: &str, reason: &str, now: SystemTime) -> abide_outbox::Result<()> {
                <$store>::defer(self, id, reason, now).await
            }
            async fn requeue(&self, id: &str, now: SystemTime) -> abide_outbox::Result<()> {
                <$store>::requeue(self, id, now).await
            }
            async fn forget_content_digest(&self, key: &str) {
                let done = sqlx::query(
                    "UPDATE items SET content_sha256 = NULL WHERE idempotency_key = $1",
                )
                .bind(key)
                .execute(self.pool())
                .await
                .unwrap();
                assert_eq!(done.rows_affected(), 1, "no item with key {key:?}");
            }
        }
    )*};
}

by_hand!(SqliteStore, PostgresStore);
