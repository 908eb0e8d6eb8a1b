//! Opening the outbox database for the CLI, and the one-sender-per-SQLite-file lock.
//!
//! `abide send` and `abide serve` on an SQLite file take an exclusive lock on
//! `<db>.lock` (an OS file lock, released by the kernel when the process dies, even by
//! `kill -9`). Holding it proves that no other abide process is sending from this file, so
//! every `IN_FLIGHT` item found at start belongs to a dead process: its lease is cut short
//! and it goes back to `PENDING` at once (attempts + 1, since the request may have been
//! sent; the retry carries the same idempotency key). Without this a restarted sender
//! would wait for the old leases to run out (`--lease`).
//!
//! Postgres is shared by design, so no lock is taken there and dead leases are reclaimed
//! only when they expire.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::time::SystemTime;

use abide_outbox::{AnyStore, Store};
use anyhow::{bail, Context};

/// The database used when `--db` is not given: a file in the current directory.
pub(crate) const DEFAULT_DB: &str = "abide.db";

/// True for a Postgres URL.
pub(crate) fn is_postgres(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// The SQLite file behind `db`, if it names one.
fn sqlite_path(db: &str) -> Option<PathBuf> {
    if is_postgres(db) {
        return None;
    }
    let p = db
        .strip_prefix("sqlite://")
        .or_else(|| db.strip_prefix("sqlite:"))
        .unwrap_or(db);
    let p = p.split('?').next().unwrap_or(p);
    (!p.is_empty() && p != ":memory:").then(|| PathBuf::from(p))
}

/// `db` as it may be shown in errors and reports: a URL's password, and the value of a
/// `password=` query parameter, replaced by `***` (a Postgres URL may carry both), even
/// when the URL does not parse (see [`abide_outbox::echo::redact_url`]).
pub(crate) fn shown(db: &str) -> String {
    abide_outbox::echo::redact_url(db)
}

/// Open (creating if needed) the database for sending.
pub(crate) async fn open(db: &str) -> anyhow::Result<AnyStore> {
    AnyStore::connect(db)
        .await
        .with_context(|| format!("opening the outbox database {}", shown(db)))
}

/// Close the store at the end of a command (`send`, `serve`, `status`, `requeue`): for
/// SQLite this checkpoints the write-ahead log into the `.db` file, so the file alone (a
/// copy, a backup) holds every item. Skipping it loses nothing; the WAL is replayed on
/// the next open.
// The callers are send.rs, serve.rs, status.rs and requeue.rs (another helper's files);
// remove this allow once they call it.
pub(crate) async fn close(store: &AnyStore, db: &str) -> anyhow::Result<()> {
    store
        .close()
        .await
        .with_context(|| format!("closing the outbox database {}", shown(db)))
}

/// Open a database that must already exist (for `status` and `requeue`, which should
/// not create an empty file when the path is mistyped).
pub(crate) async fn open_existing(db: &str) -> anyhow::Result<AnyStore> {
    if let Some(p) = sqlite_path(db) {
        if !p.exists() {
            bail!(
                "no outbox database at {} (give --db; `abide send` creates it)",
                p.display()
            );
        }
    }
    open(db).await
}

/// An exclusive lock on `<db>.lock`; dropped (or the process dies) = released.
#[derive(Debug)]
pub(crate) struct DbLock {
    _file: File,
}

/// Take the sender lock for an SQLite database; `None` for Postgres.
///
/// # Errors
/// Another process holds it, or the lock file cannot be created.
pub(crate) fn lock(db: &str) -> anyhow::Result<Option<DbLock>> {
    let Some(p) = sqlite_path(db) else {
        return Ok(None);
    };
    let mut name = p.clone().into_os_string();
    name.push(".lock");
    let path = PathBuf::from(name);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("creating the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(DbLock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "another abide send or serve is using {} (lock {} is held); \
             wait for it or stop it first",
            p.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// With the lock held: move every `IN_FLIGHT` item (its owner is dead) back to `PENDING`
/// now, through [`Store::reclaim_all_in_flight`] (the state machine still decides).
/// Returns how many. Postgres is shared, so its in-flight items may belong to a live
/// process: they are left to expire.
pub(crate) async fn reclaim_dead_leases(
    store: &AnyStore,
    _lock: &DbLock,
    now: SystemTime,
) -> anyhow::Result<u64> {
    if matches!(store, AnyStore::Postgres(_)) {
        return Ok(0);
    }
    store
        .reclaim_all_in_flight(now)
        .await
        // The first write of a run, whether or not an earlier run left anything: a
        // read-only or full database fails here, so the message names the operation.
        .context(
            "preparing the outbox database for sending (its first write: items an earlier \
             run left IN_FLIGHT go back to PENDING)",
        )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sqlite_paths() {
        assert_eq!(sqlite_path("abide.db"), Some(PathBuf::from("abide.db")));
        assert_eq!(
            sqlite_path("sqlite:///tmp/x.db?mode=rwc"),
            Some(PathBuf::from("/tmp/x.db"))
        );
        assert_eq!(sqlite_path("postgres://u@h/db"), None);
        assert_eq!(sqlite_path("sqlite::memory:"), None);
    }

    #[test]
    fn passwords_in_database_urls_are_never_shown() {
        assert_eq!(
            shown("postgres://abide:s3cret@db:5432/outbox?sslmode=require&password=p2"),
            "postgres://abide:***@db:5432/outbox?sslmode=require&password=***"
        );
        assert_eq!(
            shown("postgres://abide@db/outbox"),
            "postgres://abide@db/outbox"
        );
        assert_eq!(
            shown("postgres://abide:s3cret@db:99999/outbox"),
            "postgres://abide:***@db:99999/outbox"
        );
        assert_eq!(shown("abide.db"), "abide.db");
        assert_eq!(shown("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
    }

    #[test]
    fn second_lock_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("o.db");
        let db = db.to_str().unwrap();
        let first = lock(db).unwrap().unwrap();
        let second = lock(db).unwrap_err().to_string();
        assert!(second.contains("another abide"), "{second}");
        drop(first);
        assert!(lock(db).unwrap().is_some());
    }
}
