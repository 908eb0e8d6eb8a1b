//! One sender per SQLite file, and what that lets a sender do at start.
//!
//! A process that sends from an SQLite outbox takes an exclusive OS lock on `<db>.lock`
//! ([`SenderLock::acquire`]), released by the kernel when the process dies, even by
//! `kill -9`. Holding it proves that no other process is sending from this file, so every
//! `IN_FLIGHT` item found at start belongs to a dead process: its lease is cut short and
//! it goes back to `PENDING` at once ([`SenderLock::reclaim_dead_leases`]; charged the
//! requests the dead process marked as sent, none if it never sent it, and the retry
//! carries the same idempotency key). Without this a restarted sender would wait for the
//! old leases to run out.
//!
//! Postgres is shared by design: no lock is taken there, and dead leases are reclaimed
//! only when they expire ([`crate::Store::reclaim_expired`]).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::store::{AnyStore, Store};

/// An exclusive lock on `<db>.lock`, held until dropped (or the process dies).
#[derive(Debug)]
pub struct SenderLock {
    _file: File,
    path: PathBuf,
}

impl SenderLock {
    /// Take the sender lock for the SQLite file `url_or_path` names (as given to
    /// [`AnyStore::connect`]); `None` for Postgres or an in-memory database, which need
    /// none. Creates the lock file if needed; never waits.
    ///
    /// # Errors
    /// [`Error::Locked`] when another process holds it, [`Error::LockFile`] when the lock
    /// file cannot be created or locked.
    pub fn acquire(url_or_path: &str) -> Result<Option<Self>> {
        let Some(db) = AnyStore::sqlite_file(url_or_path) else {
            return Ok(None);
        };
        // Said as what it is, not as a lock file that cannot be created.
        if let Some(dir) = db
            .parent()
            .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
        {
            return Err(Error::DatabaseUrl(format!(
                "{}: the directory {} does not exist (create it, or give another --db)",
                db.display(),
                dir.display()
            )));
        }
        let path = lock_path(&db);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| Error::LockFile {
                path: path.clone(),
                source,
            })?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Self { _file: file, path })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
                database: db,
                lock: path,
            }),
            Err(std::fs::TryLockError::Error(source)) => Err(Error::LockFile { path, source }),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// With the lock held, move every `IN_FLIGHT` item (its owner is dead) back to
    /// `PENDING` at `now`, through [`Store::reclaim_all_in_flight`] (the state machine
    /// still decides). Returns how many.
    ///
    /// # Errors
    /// Database errors.
    pub async fn reclaim_dead_leases<S: Store>(&self, store: &S, now: SystemTime) -> Result<u64> {
        store.reclaim_all_in_flight(now).await
    }
}

/// `<db>.lock` beside the file `db` resolves to. Symlinks (to the file, or a directory on
/// the way) are followed, so every spelling of one database takes one lock: otherwise a
/// second sender reaching the file through a link would take the running sender's
/// `IN_FLIGHT` items for a dead run's and send them again. A file not created yet is
/// resolved through its directory; a path that cannot be resolved is used as given. (Hard
/// links are distinct paths to one file and are not detected.)
fn lock_path(db: &Path) -> PathBuf {
    let resolved = std::fs::canonicalize(db)
        .ok()
        .or_else(|| {
            let name = db.file_name()?;
            let dir = db
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            std::fs::canonicalize(dir).ok().map(|d| d.join(name))
        })
        .unwrap_or_else(|| db.to_path_buf());
    let mut name = resolved.into_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

/// An outbox database opened for sending ([`open_for_sending`]).
#[derive(Debug)]
pub struct SendingStore {
    /// The store.
    pub store: AnyStore,
    /// Items a dead run left `IN_FLIGHT`, moved back to `PENDING` at open.
    pub reclaimed: u64,
    /// The sender lock (SQLite), held as long as this value lives.
    pub lock: Option<SenderLock>,
}

/// Open (creating if needed) `url_or_path` for sending, with the rules of this module:
/// take the sender lock first (SQLite), then connect, then reclaim what a dead sender left
/// `IN_FLIGHT` (only under the lock).
///
/// # Errors
/// As [`SenderLock::acquire`] and [`AnyStore::connect`], or
/// [`Error::PrepareForSending`] when the reclaim (the run's first write) fails.
pub async fn open_for_sending(url_or_path: &str, now: SystemTime) -> Result<SendingStore> {
    let lock = SenderLock::acquire(url_or_path)?;
    let store = AnyStore::connect(url_or_path).await?;
    let reclaimed = match &lock {
        Some(lock) => lock
            .reclaim_dead_leases(&store, now)
            .await
            .map_err(|e| Error::PrepareForSending(Box::new(e)))?,
        None => 0,
    };
    Ok(SendingStore {
        store,
        reclaimed,
        lock,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("o.db");
        let db = db.to_str().unwrap();
        let first = SenderLock::acquire(db).unwrap().unwrap();
        assert!(first.path().ends_with("o.db.lock"));
        let second = SenderLock::acquire(&format!("sqlite://{db}")).unwrap_err();
        assert!(matches!(second, Error::Locked { .. }), "{second}");
        assert!(second.to_string().contains("another"), "{second}");
        drop(first);
        assert!(SenderLock::acquire(db).unwrap().is_some());
    }

    /// Two spellings of one file share one lock: a symlink to the outbox (or a path through
    /// a symlinked directory) must not let a second sender in, or it would take the live
    /// run's `IN_FLIGHT` items for a dead run's and send them again.
    #[cfg(unix)]
    #[test]
    fn a_symlink_to_the_database_takes_the_same_lock() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("o.db");
        std::fs::write(&db, b"").unwrap();
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&db, &link).unwrap();
        let linked_dir = dir.path().join("d");
        std::os::unix::fs::symlink(dir.path(), &linked_dir).unwrap();
        let first = SenderLock::acquire(db.to_str().unwrap()).unwrap().unwrap();
        for other in [link, linked_dir.join("o.db")] {
            let second = SenderLock::acquire(other.to_str().unwrap()).unwrap_err();
            assert!(
                matches!(second, Error::Locked { .. }),
                "{other:?}: {second}"
            );
        }
        drop(first);
        // A database not created yet: its directory is resolved, so the same holds.
        let fresh = dir.path().join("new.db");
        let _first = SenderLock::acquire(fresh.to_str().unwrap())
            .unwrap()
            .unwrap();
        let via_link = linked_dir.join("new.db");
        let second = SenderLock::acquire(via_link.to_str().unwrap()).unwrap_err();
        assert!(matches!(second, Error::Locked { .. }), "{second}");
    }

    #[test]
    fn postgres_and_memory_take_no_lock() {
        assert!(SenderLock::acquire("postgres://u@h/db").unwrap().is_none());
        assert!(SenderLock::acquire("sqlite::memory:").unwrap().is_none());
    }

    #[tokio::test]
    async fn a_restart_under_the_lock_reclaims_the_dead_run_at_once() {
        use crate::model::{NewItem, Request};
        use std::time::{Duration, UNIX_EPOCH};
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("o.db");
        let db = db.to_str().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        {
            let run = open_for_sending(db, t0).await.unwrap();
            assert_eq!(run.reclaimed, 0);
            let item = NewItem::new("p", Request::post_json("/m", serde_json::json!({})));
            run.store.enqueue(&[item], t0).await.unwrap();
            let lease = Duration::from_secs(3600);
            assert_eq!(
                run.store
                    .claim("p", "dead", t0, lease, 1)
                    .await
                    .unwrap()
                    .len(),
                1
            );
            // The process dies: its lock goes, its lease (an hour) stays.
            run.store.close().await.unwrap();
        }
        let later = t0 + Duration::from_secs(1);
        let run = open_for_sending(db, later).await.unwrap();
        assert_eq!(run.reclaimed, 1, "reclaimed long before the lease ran out");
        let got = run
            .store
            .claim("p", "alive", later, Duration::from_secs(60), 1)
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].lease_reclaimed());
        assert!(matches!(
            open_for_sending(db, later).await,
            Err(Error::Locked { .. })
        ));
    }
}
