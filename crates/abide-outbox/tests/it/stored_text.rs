//! The typed fields of items and attempts (`Request::method`, `Item::last_provider_code`,
//! `AttemptRecord::verdict_class` and `delay_reason`) are stored as the text they always
//! were: what the store writes is that text, and text an earlier version wrote reads back
//! as the typed value (no migration; an old database reads as it is).

use std::time::Duration;

use abide_core::VerdictClass;
use abide_outbox::model::{Completion, DelayReason};
use abide_outbox::{
    AttemptRecord, NewItem, Outcome, PostgresStore, RemoteCode, Request, SqlBackend, SqlStore,
    SqliteStore, Store,
};
use serde_json::json;
use sqlx::{ColumnIndex, Decode, Encode, IntoArguments, Type};

use crate::support::{t0, with_postgres, with_sqlite};

/// What earlier versions stored, and what it means.
const CODES: [(&str, RemoteCode); 4] = [
    ("http_429", RemoteCode::Http(429)),
    ("smpp_0x58", RemoteCode::Smpp(0x58)),
    ("smpp_0x400", RemoteCode::Smpp(0x400)),
    ("no_response", RemoteCode::NoResponse),
];
const CLASSES: [(&str, VerdictClass); 7] = [
    ("success", VerdictClass::Success),
    ("throttle", VerdictClass::Throttle),
    ("retry", VerdictClass::Retry),
    ("refresh_credentials", VerdictClass::RefreshCredentials),
    ("terminal", VerdictClass::Terminal),
    ("out_of_quota", VerdictClass::OutOfQuota),
    ("unknown", VerdictClass::Unknown),
];
const DELAYS: [(&str, DelayReason); 6] = [
    ("honoured", DelayReason::Honoured),
    ("floored", DelayReason::Floored),
    ("capped", DelayReason::Capped),
    ("unparseable", DelayReason::Unparseable),
    ("absent", DelayReason::Absent),
    ("lease_expired", DelayReason::LeaseExpired),
];

async fn text_is_unchanged<DB>(s: SqlStore<DB>)
where
    DB: SqlBackend,
    SqlStore<DB>: Store,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: IntoArguments<'q, DB>,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut req = Request::post_json("/m", json!({}));
    req.method = http::Method::PUT;
    let item = NewItem::new("p", req).with_idempotency_key("k");
    let id = s.enqueue(&[item], t0()).await.unwrap()[0].id.clone();
    s.claim("p", "w", t0(), Duration::from_secs(60), 1)
        .await
        .unwrap();
    let attempts = CLASSES
        .iter()
        .zip(DELAYS.iter().copied().cycle())
        .map(|((_, class), (_, delay))| AttemptRecord {
            at: t0(),
            provider: "p".into(),
            remote: RemoteCode::Http(503),
            verdict_class: *class,
            delay: Some(Duration::from_secs(1)),
            delay_reason: Some(delay),
            latency: Duration::from_millis(3),
        })
        .collect();
    let done = Completion {
        id: id.clone(),
        lease_owner: "w".into(),
        outcome: Outcome::Retry {
            next_attempt_at: t0(),
            reason: "http_503".into(),
        },
        attempts,
        last_provider_code: Some(RemoteCode::Smpp(0x58)),
        message_id: None,
    };
    s.complete(&[done], t0()).await.unwrap()[0]
        .as_ref()
        .unwrap();

    // Written as text.
    let pool = s.pool();
    let (method, code): (String, Option<String>) =
        sqlx::query_as("SELECT method, last_provider_code FROM items WHERE id = $1")
            .bind(id.as_str())
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(
        (method.as_str(), code.as_deref()),
        ("PUT", Some("smpp_0x58"))
    );
    let rows: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT verdict_class, delay_reason FROM attempts ORDER BY attempt_no")
            .fetch_all(pool)
            .await
            .unwrap();
    let want: Vec<(String, Option<String>)> = CLASSES
        .iter()
        .zip(DELAYS.iter().copied().cycle())
        .map(|((c, _), (d, _))| ((*c).to_owned(), Some(d.to_owned())))
        .collect();
    assert_eq!(rows, want);

    // Text as an earlier version wrote it reads as the typed value.
    for (text, code) in CODES {
        sqlx::query("UPDATE items SET last_provider_code = $1, method = 'DELETE' WHERE id = $2")
            .bind(text)
            .bind(id.as_str())
            .execute(pool)
            .await
            .unwrap();
        let it = s.get(&id).await.unwrap().unwrap();
        assert_eq!(it.last_provider_code, Some(code), "{text}");
        assert_eq!(it.request.method, http::Method::DELETE);
        let shown = serde_json::to_value(&it).unwrap();
        assert_eq!(shown["last_provider_code"], text, "shown as stored");
    }
    let read = s.attempts(&id).await.unwrap();
    let got: Vec<_> = read
        .iter()
        .map(|a| (a.record.verdict_class, a.record.delay_reason))
        .collect();
    let want: Vec<_> = CLASSES
        .iter()
        .zip(DELAYS.iter().copied().cycle())
        .map(|((_, c), (_, d))| (*c, Some(d)))
        .collect();
    assert_eq!(got, want);

    // Text no version wrote is a corrupt row, said so, not a panic.
    sqlx::query("UPDATE items SET last_provider_code = 'http_x' WHERE id = $1")
        .bind(id.as_str())
        .execute(pool)
        .await
        .unwrap();
    let err = s.get(&id).await.unwrap_err().to_string();
    assert!(
        err.contains("last_provider_code") && err.contains("http_x"),
        "{err}"
    );
}

#[tokio::test]
async fn sqlite_stores_the_text_it_always_stored() {
    with_sqlite(|s: SqliteStore| text_is_unchanged(s)).await;
}

#[tokio::test]
async fn postgres_stores_the_text_it_always_stored() {
    with_postgres(|s: PostgresStore| text_is_unchanged(s)).await;
}
