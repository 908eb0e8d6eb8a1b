//! Opening and closing stores: bad URLs fail at once, an unreachable server is named
//! without its password, and a cleanly closed SQLite file holds all its data alone.

use std::time::Duration;

use abide_outbox::{AnyStore, Error, NewItem, PostgresStore, Request, SqliteStore, Store};
use serde_json::json;

use crate::support::t0;

/// Generous: these calls must fail at once; the bound only turns a hang into a failure.
const NO_HANG: Duration = Duration::from_secs(30);

#[tokio::test]
async fn empty_database_names_fail_at_once_with_a_clear_error() {
    for db in ["", "  ", "sqlite:", "sqlite://", "sqlite:?mode=rwc"] {
        let r = tokio::time::timeout(NO_HANG, AnyStore::connect(db))
            .await
            .unwrap_or_else(|_| panic!("{db:?} hung"));
        match r {
            Err(Error::DatabaseUrl(msg)) => assert!(msg.contains("sqlite://PATH"), "{msg}"),
            other => panic!("{db:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn unreachable_postgres_names_the_address_but_not_the_password() {
    // Port 1 on loopback: nothing listens, the connection is refused.
    let url = "postgres://abide:s3cret@127.0.0.1:1/outbox";
    let quick = PostgresStore::connect_with_timeout(url, Duration::from_millis(300));
    let r = tokio::time::timeout(NO_HANG, quick)
        .await
        .expect("connect must give up by itself");
    let err = r.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, Error::Unreachable { .. }), "{text}");
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[tokio::test]
async fn a_closed_sqlite_file_holds_its_data_without_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let store = AnyStore::connect(db.to_str().unwrap()).await.unwrap();
    let req = Request::post_json("/m", json!({"text": "kept"}));
    let id = store
        .enqueue(&[NewItem::new("p", req).with_idempotency_key("k")], t0())
        .await
        .unwrap()[0]
        .id
        .clone();
    store.close().await.unwrap();
    let wal = dir.path().join("outbox.db-wal");
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_len, 0, "the WAL was checkpointed into the .db file");
    // Only the .db file is copied: the item must be in it.
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let reopened = SqliteStore::open(&copy).await.unwrap();
    let it = reopened
        .get(&id)
        .await
        .unwrap()
        .expect("item in the copied file");
    assert_eq!(it.idempotency_key, "k");
    reopened.close().await.unwrap();
}
