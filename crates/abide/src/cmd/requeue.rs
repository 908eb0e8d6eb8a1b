//! `abide requeue`: send DEFERRED items round again, for a person at a terminal.

use std::process::ExitCode;

use abide_core::{Clock, SystemClock};
use abide_outbox::{RequeueFilter, Store};

use super::db;

const LONG_ABOUT: &str = "\
Move DEFERRED items (past their attempt cap or maximum age, waiting for a person) back to
QUEUED with a fresh attempt window, so the next `abide send` or the running `abide serve`
tries them again with the SAME idempotency key. Only DEFERRED items move: SUBMITTED and
FAILED items are never touched.

EXAMPLES
  abide requeue                                   # every deferred item in ./abide.db
  abide requeue --db outbox.db --provider sms     # only those now targeting `sms`
  abide requeue --id 0190f1c2-...  --id 0190f1c3-...

Then run `abide send --config FILE --db outbox.db` (no input needed) to deliver them.

EXIT CODES
  0  at least one item moved, or none was deferred
  1  --id was given but none of those items is DEFERRED
  2  usage error, or the database cannot be opened";

/// Arguments of `abide requeue`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    /// Outbox database: an SQLite file path, `sqlite:PATH`, or `postgres://...`.
    #[arg(long, default_value = db::DEFAULT_DB, value_name = "PATH|URL")]
    db: String,
    /// Only items currently targeting this provider.
    #[arg(long)]
    provider: Option<String>,
    /// Only this item (repeatable).
    #[arg(long = "id", value_name = "ID")]
    ids: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let store = db::open_existing(&args.db).await?;
        let filter = RequeueFilter {
            provider: args.provider.clone(),
            ids: (!args.ids.is_empty()).then(|| args.ids.clone()),
        };
        let moved = store.requeue_deferred(&filter, SystemClock.now()).await?;
        println!("requeued {moved} deferred item(s)");
        if moved == 0 && !args.ids.is_empty() {
            eprintln!("abide: none of the given ids is DEFERRED (see `abide status`)");
            return Ok(ExitCode::from(1));
        }
        Ok(ExitCode::SUCCESS)
    })
}
