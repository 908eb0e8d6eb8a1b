//! Pick a backend at run time from a URL.

// A build without any store driver keeps the type (it has no value): its methods' arguments
// go unused.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(unused_variables)
)]

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

#[cfg(feature = "postgres")]
use super::PostgresStore;
#[cfg(feature = "sqlite")]
use super::SqliteStore;
use super::Store;
use crate::error::{Error, Result};
use crate::model::{
    Completion, Counts, Enqueued, Item, ListFilter, NewItem, RemoteCode, RequeueFilter, SendMark,
    StoredAttempt,
};
use crate::receipt::{Receipt, ReceiptCounts, ReceiptState};
use crate::state::State;

/// Either backend, chosen by [`AnyStore::connect`]. Native `async fn` traits are not
/// object safe, so this enum is how a binary stays generic-free.
///
/// # Clone
/// Clones share the connection pool.
#[derive(Debug, Clone)]
pub enum AnyStore {
    /// Embedded SQLite (feature `sqlite`).
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteStore),
    /// PostgreSQL (feature `postgres`).
    #[cfg(feature = "postgres")]
    Postgres(PostgresStore),
}

/// The scheme of a `scheme://…` URL that names no store abide has (`mysql://…`), for an
/// error that says so instead of taking the URL for a file path.
fn foreign_scheme(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once("://")?;
    let known = ["sqlite", "postgres", "postgresql"];
    let is_scheme = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    (is_scheme && !known.contains(&scheme.to_ascii_lowercase().as_str())).then_some(scheme)
}

fn refuse_foreign(url_or_path: &str) -> Result<()> {
    match foreign_scheme(url_or_path.trim()) {
        Some(scheme) => Err(Error::DatabaseUrl(format!(
            "{scheme}:// is not a store abide has: give a file path (SQLite), sqlite://PATH \
             or postgres://…"
        ))),
        None => Ok(()),
    }
}

impl AnyStore {
    /// `postgres://…` or `postgresql://…` opens Postgres; `sqlite:…` or anything else
    /// (taken as a file path) opens SQLite, creating the file if needed.
    ///
    /// # Errors
    /// [`Error::DatabaseUrl`] for an empty string, an `sqlite:` URL without a path or a URL
    /// of another scheme (`mysql://…`),
    /// [`Error::Unreachable`](crate::Error::Unreachable) for a Postgres server that does
    /// not answer within `POSTGRES_CONNECT_TIMEOUT`, connection or migration
    /// errors.
    pub async fn connect(url_or_path: &str) -> Result<Self> {
        refuse_foreign(url_or_path)?;
        let trimmed = url_or_path.trim();
        if trimmed.is_empty() {
            return Err(Error::DatabaseUrl(
                "is empty: give a file path, sqlite://PATH or postgres://…".into(),
            ));
        }
        if let Some(rest) = trimmed
            .strip_prefix("sqlite://")
            .or_else(|| trimmed.strip_prefix("sqlite:"))
        {
            let path = rest.split('?').next().unwrap_or(rest);
            if path.trim().is_empty() {
                return Err(Error::DatabaseUrl(format!(
                    "{url_or_path:?} names no file: write sqlite://PATH (or just PATH)"
                )));
            }
        }
        if url_or_path.starts_with("postgres://") || url_or_path.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            return Ok(Self::Postgres(PostgresStore::connect(url_or_path).await?));
            #[cfg(not(feature = "postgres"))]
            return Err(not_built("postgres"));
        }
        #[cfg(feature = "sqlite")]
        if url_or_path.starts_with("sqlite:") {
            Ok(Self::Sqlite(SqliteStore::connect(url_or_path).await?))
        } else {
            Ok(Self::Sqlite(SqliteStore::open(url_or_path).await?))
        }
        #[cfg(not(feature = "sqlite"))]
        Err(not_built("sqlite"))
    }
}

impl AnyStore {
    /// Open the existing outbox `url_or_path` names (as [`AnyStore::connect`] reads it)
    /// for reading only: nothing is created, migrated or written.
    ///
    /// # Errors
    /// As [`AnyStore::connect`], and [`Error::NotAnOutbox`](crate::Error::NotAnOutbox) for
    /// a database without abide's tables (or with an older schema).
    pub async fn open_read_only(url_or_path: &str) -> Result<Self> {
        refuse_foreign(url_or_path)?;
        let trimmed = url_or_path.trim();
        if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            return Ok(Self::Postgres(
                PostgresStore::connect_read_only(trimmed).await?,
            ));
            #[cfg(not(feature = "postgres"))]
            return Err(not_built("postgres"));
        }
        #[cfg(feature = "sqlite")]
        match Self::sqlite_file(trimmed) {
            Some(path) => Ok(Self::Sqlite(SqliteStore::open_read_only(path).await?)),
            None => Err(Error::DatabaseUrl(format!(
                "{url_or_path:?} is an in-memory database: there is nothing to read"
            ))),
        }
        #[cfg(not(feature = "sqlite"))]
        Err(not_built("sqlite"))
    }

    /// The SQLite file `url_or_path` names (as [`AnyStore::connect`] reads it): `None` for
    /// a Postgres URL, an in-memory database or a URL of a scheme abide has no store for
    /// (which [`AnyStore::connect`] refuses).
    pub fn sqlite_file(url_or_path: &str) -> Option<PathBuf> {
        let s = url_or_path.trim();
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return None;
        }
        if foreign_scheme(s).is_some() {
            return None;
        }
        let p = s
            .strip_prefix("sqlite://")
            .or_else(|| s.strip_prefix("sqlite:"))
            .unwrap_or(s);
        let p = p.split('?').next().unwrap_or(p);
        (!p.is_empty() && p != ":memory:").then(|| PathBuf::from(p))
    }

    /// Close the store cleanly: for SQLite checkpoint the write-ahead log into the `.db`
    /// file (`SqliteStore::close`); for Postgres close the pool. Call it once at the end
    /// of a run; other clones fail afterwards.
    ///
    /// # Errors
    /// Database errors from the SQLite checkpoint.
    pub async fn close(&self) -> Result<()> {
        match *self {
            #[cfg(feature = "sqlite")]
            AnyStore::Sqlite(ref s) => s.close().await,
            #[cfg(feature = "postgres")]
            AnyStore::Postgres(ref s) => {
                s.close().await;
                Ok(())
            }
        }
    }
}

/// The error for a database this build has no driver for.
#[cfg(not(all(feature = "sqlite", feature = "postgres")))]
fn not_built(feature: &str) -> Error {
    Error::DatabaseUrl(format!(
        "needs the {feature} store, which this build leaves out (abide-outbox feature \
         `{feature}`)"
    ))
}

/// `impl Store for AnyStore`: each method handed to the backend the value holds.
macro_rules! delegate {
    ($( fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty; )+) => {
        impl Store for AnyStore {
            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    match *self {
                        #[cfg(feature = "sqlite")]
                        AnyStore::Sqlite(ref s) => s.$name($($arg),*).await,
                        #[cfg(feature = "postgres")]
                        AnyStore::Postgres(ref s) => s.$name($($arg),*).await,
                    }
                }
            )+
        }
    };
}

delegate! {
    fn enqueue(&self, items: &[NewItem], now: SystemTime) -> Result<Vec<Enqueued>>;
    fn check_keys(&self, items: &[NewItem]) -> Result<()>;
    fn claim(
        &self,
        provider: &str,
        owner: &str,
        now: SystemTime,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Item>>;
    fn complete(&self, completions: &[Completion], now: SystemTime) -> Result<Vec<Result<State>>>;
    fn mark_sent(&self, sends: &[SendMark]) -> Result<Vec<bool>>;
    fn mark_and_complete(
        &self,
        sends: &[SendMark],
        completions: &[Completion],
        now: SystemTime,
    ) -> Result<(Vec<bool>, Vec<Result<State>>)>;
    fn reclaim_expired(&self, now: SystemTime) -> Result<u64>;
    fn reclaim_all_in_flight(&self, now: SystemTime) -> Result<u64>;
    fn defer_older_than(
        &self,
        provider: &str,
        window_started_before: SystemTime,
        reason: &str,
        now: SystemTime,
    ) -> Result<u64>;
    fn requeue_deferred(&self, filter: &RequeueFilter, now: SystemTime) -> Result<u64>;
    fn requeue_failed(&self, filter: &RequeueFilter, now: SystemTime) -> Result<u64>;
    fn cancel(&self, id: &str, now: SystemTime) -> Result<()>;
    fn reason_counts(&self, state: Option<State>) -> Result<Vec<(State, String, u64)>>;
    fn list(&self, filter: &ListFilter) -> Result<Vec<Item>>;
    fn fail_over(
        &self,
        from: &str,
        to: &str,
        pending_since_before: SystemTime,
        now: SystemTime,
    ) -> Result<u64>;
    fn counts_by_state(&self, provider: Option<&str>) -> Result<Counts>;
    fn oldest_pending_age(&self, now: SystemTime) -> Result<Option<Duration>>;
    fn expired_leases(&self, now: SystemTime) -> Result<u64>;
    fn has_active(&self, providers: &[&str]) -> Result<bool>;
    fn next_due(&self, provider: &str) -> Result<Option<SystemTime>>;
    fn get(&self, id: &str) -> Result<Option<Item>>;
    fn attempts(&self, id: &str) -> Result<Vec<StoredAttempt>>;
    fn remote_counts(&self, provider: Option<&str>) -> Result<Vec<(RemoteCode, u64)>>;
    fn record_receipts(&self, receipts: &[Receipt]) -> Result<()>;
    fn receipt_counts(&self, provider: Option<&str>) -> Result<ReceiptCounts>;
    fn receipt_of(&self, id: &str) -> Result<Option<(ReceiptState, SystemTime)>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_url_of_another_database_is_refused_by_its_scheme_not_taken_for_a_path() {
        for url in [
            "mysql://user@127.0.0.1/db",
            " redis://127.0.0.1 ",
            "MariaDB://x",
        ] {
            assert_eq!(AnyStore::sqlite_file(url), None, "{url}");
            let e = AnyStore::connect(url).await.err().map(|e| e.to_string());
            let e = e.unwrap_or_default();
            assert!(e.contains(":// is not a store abide has"), "{url}: {e}");
            let e = AnyStore::open_read_only(url)
                .await
                .err()
                .map(|e| e.to_string());
            assert!(e.unwrap_or_default().contains("is not a store"), "{url}");
        }
        assert_eq!(
            AnyStore::sqlite_file("sqlite://dir/out.db"),
            Some(PathBuf::from("dir/out.db"))
        );
        assert_eq!(
            AnyStore::sqlite_file("dir/out.db"),
            Some(PathBuf::from("dir/out.db"))
        );
    }
}
