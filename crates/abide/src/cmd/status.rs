//! `abide status`: where the items of an outbox database are, and what the providers said.

use std::process::ExitCode;

use abide_core::{Clock, SystemClock};

use super::db;
use super::report::Snapshot;

const LONG_ABOUT: &str = "\
Show the items of an outbox database: counts per state, the age of the oldest item still
waiting (QUEUED or PENDING, measured from its enqueue or last requeue), and every attempt
counted by what the remote side said (HTTP status or SMPP command_status), separately from
what abide decided.

Reads only; safe while `abide send` or `abide serve` runs on the same database.

EXAMPLES
  abide status                       # ./abide.db
  abide status --db /var/lib/abide/outbox.db --json | jq .counts
  abide status --db postgres://abide@db.internal/abide

EXIT CODES
  0  nothing FAILED or DEFERRED
  1  some items are FAILED or DEFERRED (see `abide requeue` for deferred ones)
  2  usage error, or the database cannot be opened";

/// Arguments of `abide status`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    /// Outbox database: an SQLite file path, `sqlite:PATH`, or `postgres://...`.
    #[arg(long, default_value = db::DEFAULT_DB, value_name = "PATH|URL")]
    db: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let store = db::open_existing(&args.db).await?;
        let snap = Snapshot::load(&store, SystemClock.now()).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&snap)?);
        } else {
            print!("{}", snap.render_table(&args.db));
        }
        let c = &snap.counts;
        Ok(if c.failed + c.deferred > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    })
}
