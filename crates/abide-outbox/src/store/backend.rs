//! What differs between the two SQL backends, as one sealed trait on sqlx's database
//! types (the way sqlx's own drivers mirror `sqlx::Database`): the claim statement, how
//! generated statements write parameters, and how a write transaction begins. Everything
//! else is written once, generic over the backend ([`super::SqlStore`]).

use sqlx::Database;
#[cfg(feature = "postgres")]
use sqlx::Postgres;
#[cfg(feature = "sqlite")]
use sqlx::Sqlite;

use super::sql::Placeholders;
#[cfg(feature = "postgres")]
use super::sql::CLAIM_POSTGRES;
#[cfg(feature = "sqlite")]
use super::sql::{CLAIMED_SQLITE, CLAIM_MOVE_SQLITE, CLAIM_SQLITE};

mod sealed {
    pub trait Sealed {}
    #[cfg(feature = "sqlite")]
    impl Sealed for sqlx::Sqlite {}
    #[cfg(feature = "postgres")]
    impl Sealed for sqlx::Postgres {}
}

/// A SQL database the outbox can live in: `Sqlite` or `Postgres`. Sealed.
pub trait SqlBackend: Database + sealed::Sealed {
    /// The claim statement: `UPDATE … RETURNING` of the claimed items; with
    /// [`SqlBackend::CLAIMED`], the `SELECT` of the rows to claim.
    #[doc(hidden)]
    const CLAIM: &'static str;
    /// A claim in three statements where returned rows are dear (SQLite through sqlx):
    /// the `UPDATE` of the rows [`SqlBackend::CLAIM`] picked, and the read of the claimed
    /// items as rows of JSON on a reading connection ([`super::sql::CLAIMED_SQLITE`]).
    #[doc(hidden)]
    const CLAIMED: Option<(&'static str, &'static str)>;
    /// How generated batch statements write bind parameters.
    #[doc(hidden)]
    const PLACEHOLDERS: Placeholders;
    /// The statement opening a write transaction (`None`: the driver's `BEGIN`).
    #[doc(hidden)]
    const BEGIN_WRITE: Option<&'static str>;
    /// Appended to a `SELECT` inside a write transaction whose rows the transaction is
    /// about to update, so that no other writer changes them in between (empty where the
    /// write transaction already excludes every other writer).
    #[doc(hidden)]
    const LOCK_ROWS: &'static str;
    /// Appended to an `INSERT … SELECT` joining `items` inside a write transaction that
    /// updates those item rows next (empty where no other writer can come between).
    #[doc(hidden)]
    const LOCK_JOINED_ITEMS: &'static str;
    /// Whether one query may hold several statements with their parameters (SQLite
    /// through sqlx; Postgres' extended protocol takes one statement per query).
    #[doc(hidden)]
    const MULTI_STATEMENT: bool;

    /// Rows an `INSERT`, `UPDATE` or `DELETE` touched (sqlx has no trait method for it).
    #[doc(hidden)]
    fn rows_affected(result: &Self::QueryResult) -> u64;
}

#[cfg(feature = "sqlite")]
impl SqlBackend for Sqlite {
    const CLAIM: &'static str = CLAIM_SQLITE;
    const CLAIMED: Option<(&'static str, &'static str)> = Some((CLAIM_MOVE_SQLITE, CLAIMED_SQLITE));
    const PLACEHOLDERS: Placeholders = Placeholders::Anonymous;
    // IMMEDIATE takes the write lock up front (waiting up to the busy timeout) instead of
    // failing with SQLITE_BUSY when a read lock cannot be upgraded.
    const BEGIN_WRITE: Option<&'static str> = Some("BEGIN IMMEDIATE");
    // BEGIN IMMEDIATE already holds the one write lock.
    const LOCK_ROWS: &'static str = "";
    const LOCK_JOINED_ITEMS: &'static str = "";
    const MULTI_STATEMENT: bool = true;

    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}

#[cfg(feature = "postgres")]
impl SqlBackend for Postgres {
    const CLAIM: &'static str = CLAIM_POSTGRES;
    // Postgres sends rows as they are, without a copy per value: RETURNING is cheap there.
    const CLAIMED: Option<(&'static str, &'static str)> = None;
    const PLACEHOLDERS: Placeholders = Placeholders::Numbered;
    const BEGIN_WRITE: Option<&'static str> = None;
    const LOCK_ROWS: &'static str = " FOR UPDATE";
    const LOCK_JOINED_ITEMS: &'static str = " FOR UPDATE OF items";
    const MULTI_STATEMENT: bool = false;

    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}
