//! Opening the outbox database for the CLI, with passwords kept out of messages.
//!
//! The rules of sending from a database (one sender per SQLite file, the start-up reclaim
//! of a dead run's leases) live in `abide_outbox::lock`; `send` and `serve` reach them
//! through [`open_for_sending`], which only says them for the command line.

use std::time::SystemTime;

use abide_outbox::{AnyStore, SendingStore};
use anyhow::{bail, Context};

/// The database used when `--db` is not given: a file in the current directory.
pub(crate) const DEFAULT_DB: &str = "abide.db";

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
pub(crate) async fn close(store: &AnyStore, db: &str) -> anyhow::Result<()> {
    store
        .close()
        .await
        .with_context(|| format!("closing the outbox database {}", shown(db)))
}

/// Open a database that must already exist (for `status` and `requeue`, which should
/// not create an empty file when the path is mistyped).
pub(crate) async fn open_existing(db: &str) -> anyhow::Result<AnyStore> {
    require_existing(db, "`abide send` creates it")?;
    open(db).await
}

/// Open the outbox at `db` for reading only ([`AnyStore::open_read_only`]): a missing
/// SQLite file, an empty schema or another application's database is refused by name and
/// left unchanged.
///
/// # Errors
/// The file does not exist; the database cannot be reached or holds no outbox.
pub(crate) async fn open_read_only(db: &str) -> anyhow::Result<AnyStore> {
    require_existing(db, "`abide send` creates it")?;
    AnyStore::open_read_only(db)
        .await
        .with_context(|| format!("opening the outbox database {} to read it", shown(db)))
}

/// Refuse an SQLite `db` file that does not exist (a mistyped `--db`), saying `hint`.
/// Other URLs pass: their server says whether the database exists.
///
/// # Errors
/// The SQLite file named by `db` does not exist.
pub(crate) fn require_existing(db: &str, hint: &str) -> anyhow::Result<()> {
    if let Some(p) = AnyStore::sqlite_file(db) {
        if !p.exists() {
            bail!("no outbox database at {} (give --db; {hint})", p.display());
        }
    }
    Ok(())
}

/// Open (creating if needed) the database for sending, by the rules of
/// `abide_outbox::lock` ([`abide_outbox::open_for_sending`]: the sender lock first
/// (SQLite; held as long as the returned value lives), then the store, then the reclaim
/// of what a dead sender left `IN_FLIGHT`); a failure to connect names the database.
///
/// # Errors
/// Another sender holds the lock; the database cannot be opened or written.
pub(crate) async fn open_for_sending(db: &str, now: SystemTime) -> anyhow::Result<SendingStore> {
    use abide_outbox::Error;
    abide_outbox::open_for_sending(db, now)
        .await
        .map_err(|e| match e {
            Error::Locked { .. } | Error::LockFile { .. } | Error::PrepareForSending(_) => {
                anyhow::Error::new(e)
            }
            e => {
                anyhow::Error::new(e).context(format!("opening the outbox database {}", shown(db)))
            }
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sqlite_paths() {
        use std::path::PathBuf;
        let file = AnyStore::sqlite_file;
        assert_eq!(file("abide.db"), Some(PathBuf::from("abide.db")));
        assert_eq!(
            file("sqlite:///tmp/x.db?mode=rwc"),
            Some(PathBuf::from("/tmp/x.db"))
        );
        assert_eq!(file("postgres://u@h/db"), None);
        assert_eq!(file("sqlite::memory:"), None);
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

    #[tokio::test]
    async fn a_second_sender_on_one_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("o.db");
        let db = db.to_str().unwrap();
        let first = open_for_sending(db, SystemTime::UNIX_EPOCH).await.unwrap();
        let second = open_for_sending(db, SystemTime::UNIX_EPOCH)
            .await
            .unwrap_err();
        assert!(
            format!("{second:#}").contains("another abide"),
            "{second:#}"
        );
        drop(first);
    }
}
