//! Opening a database that must already be an outbox, changing nothing: what `abide
//! status` reads through. A file or schema that another application owns, or one that
//! was never an outbox, is refused by name instead of receiving abide's tables.

use sqlx::migrate::Migrator;
use sqlx::{Database, Executor, Pool};

use crate::error::{Error, Result};

/// Check that every migration of `migrator` was applied to the database behind `pool`
/// (`_sqlx_migrations`, the table sqlx's migrator keeps), without applying any. `shown`
/// names the database in the error (a path, or a URL without its password).
///
/// # Errors
/// [`Error::NotAnOutbox`] when the migrations table is missing (never an outbox) or lacks
/// some of this build's migrations (written by an older abide: a sender upgrades it);
/// database errors otherwise.
pub(crate) async fn require_schema<DB>(
    pool: &Pool<DB>,
    migrator: &Migrator,
    shown: &str,
) -> Result<()>
where
    DB: Database,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: sqlx::Type<DB> + for<'r> sqlx::Decode<'r, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    for<'q> <DB as Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
{
    let applied: Vec<i64> =
        match sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(pool)
            .await
        {
            Ok(v) => v,
            Err(sqlx::Error::Database(e)) if is_missing_table(e.message()) => {
                return Err(Error::NotAnOutbox {
                    database: shown.to_owned(),
                    reason: "it holds no abide tables (`abide send` or `abide serve` creates them)"
                        .into(),
                });
            }
            Err(e) => return Err(e.into()),
        };
    let missing = migrator
        .iter()
        .filter(|m| !applied.contains(&m.version))
        .count();
    if missing > 0 {
        return Err(Error::NotAnOutbox {
            database: shown.to_owned(),
            reason: format!(
                "its schema lacks {missing} of this abide's {} migrations (an older abide \
                 wrote it; `abide send` or `abide serve` of this version upgrades it)",
                migrator.iter().count()
            ),
        });
    }
    Ok(())
}

/// SQLite says "no such table", PostgreSQL "relation ... does not exist".
fn is_missing_table(message: &str) -> bool {
    message.contains("no such table") || message.contains("does not exist")
}
