//! Migration 0003 (`items.moved_by`): items stored before it keep what the retry budget
//! read from their reason strings, once, and nothing else is marked.

use std::time::Duration;

use abide_outbox::model::MovedBy;
use abide_outbox::{NewItem, PostgresStore, Request, SqliteStore, Store};
use serde_json::json;

use crate::support::{t0, with_postgres};

const REASONS: [&str; 4] = [
    "lease_expired",
    "failed_over_from:p",
    "http_503",
    "lease_expired_x",
];
const EXPECTED: [Option<MovedBy>; 4] = [
    Some(MovedBy::LeaseExpired),
    Some(MovedBy::FailedOver),
    None,
    None,
];

/// Enqueue one item per reason, then roll the schema back to before 0003 with those
/// reasons stored as the old code stored them. Returns the ids.
async fn stored_before_0003<S: Store>(s: &S, pool_exec: impl AsyncFn(&str)) -> Vec<String> {
    let items: Vec<NewItem> = (0..REASONS.len())
        .map(|i| {
            NewItem::new("p", Request::post_json("/m", json!({ "i": i })))
                .with_idempotency_key(format!("k{i}"))
        })
        .collect();
    let ids: Vec<String> = s
        .enqueue(&items, t0())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    for (id, reason) in ids.iter().zip(REASONS) {
        pool_exec(&format!(
            "UPDATE items SET reason = '{reason}', moved_by = NULL WHERE id = '{id}'"
        ))
        .await;
    }
    pool_exec("ALTER TABLE items DROP COLUMN moved_by").await;
    pool_exec("DELETE FROM _sqlx_migrations WHERE version = 3").await;
    ids
}

async fn check<S: Store>(s: &S, ids: &[String]) {
    for (id, want) in ids.iter().zip(EXPECTED) {
        let it = s.get(id).await.unwrap().unwrap();
        assert_eq!(it.moved_by, want, "{:?}", it.reason);
    }
    let claimed = s
        .claim("p", "w", t0(), Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(claimed.iter().filter(|i| i.lease_reclaimed()).count(), 1);
    assert_eq!(claimed.iter().filter(|i| i.just_failed_over()).count(), 1);
}

#[tokio::test]
async fn sqlite_0003_marks_items_stored_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.db");
    let s = SqliteStore::open(&path).await.unwrap();
    let pool = s.pool().clone();
    let ids = stored_before_0003(&s, async |sql: &str| {
        sqlx::query(sql).execute(&pool).await.unwrap();
    })
    .await;
    s.close().await.unwrap();
    let s = SqliteStore::open(&path).await.unwrap();
    check(&s, &ids).await;
}

#[tokio::test]
async fn postgres_0003_marks_items_stored_before_it() {
    with_postgres(|s: PostgresStore| async move {
        let pool = s.pool().clone();
        let ids = stored_before_0003(&s, async |sql: &str| {
            sqlx::query(sql).execute(&pool).await.unwrap();
        })
        .await;
        let s = PostgresStore::from_pool(pool.clone()).await.unwrap();
        check(&s, &ids).await;
    })
    .await;
}
