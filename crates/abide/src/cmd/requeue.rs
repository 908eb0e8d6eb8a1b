//! `abide requeue`: send DEFERRED (or, with `--failed`, FAILED) items round again, for a
//! person at a terminal.

use std::process::ExitCode;

use abide_core::{Clock, SystemClock};
use abide_outbox::{RequeueFilter, State, Store};

use crate::db;

const LONG_ABOUT: &str = "\
Move DEFERRED items (past their attempt cap or maximum age, waiting for a person) back to
QUEUED with a fresh attempt window, so the next `abide send` or the running `abide serve`
tries them again with the SAME idempotency key. Without --failed only DEFERRED items move:
SUBMITTED and FAILED items are never touched (SUBMITTED ones never are).

--failed moves FAILED items instead. Those were terminal: the provider refused them (e.g.
HTTP 400, a bad number, a suspended account answered with a bare 403), and abide will never
retry them on its own. Only a person decides that the cause is gone (payload fixed, account
restored, a classification override added) and sends them again. See the reasons first:
`abide status` counts them, `abide status --list failed` lists ids.

EXAMPLES
  abide requeue                                   # every deferred item in ./abide.db
  abide requeue --db outbox.db --provider sms     # only those now targeting `sms`
  abide requeue --id 0190f1c2-...  --id 0190f1c3-...
  abide requeue --failed --provider sms           # FAILED items, after fixing the cause

Then run `abide send --config FILE --db outbox.db` (no input needed) to deliver them.

EXIT CODES
  0  at least one item moved, or none was deferred
  1  --id was given but none of those items is DEFERRED (FAILED with --failed), or no
     item in the database targets the --provider given (a typo moves nothing, loudly)
  2  usage error, or the database cannot be opened";

/// Arguments of `abide requeue`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    #[command(flatten)]
    db: crate::args::DbArgs,
    /// Only items currently targeting this provider.
    #[arg(long)]
    provider: Option<String>,
    /// Only this item (repeatable).
    #[arg(long = "id", value_name = "ID")]
    ids: Vec<String>,
    /// Requeue FAILED items instead of DEFERRED ones (a person overrules a terminal verdict).
    #[arg(long)]
    failed: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let store = db::open_existing(&args.db.url).await?;
        let filter = RequeueFilter {
            provider: args.provider.clone(),
            ids: (!args.ids.is_empty()).then(|| args.ids.clone()),
        };
        let (moved, what) = if args.failed {
            (
                store.requeue_failed(&filter, SystemClock.now()).await?,
                "FAILED",
            )
        } else {
            (
                store.requeue_deferred(&filter, SystemClock.now()).await?,
                "DEFERRED",
            )
        };
        // A provider no item targets is most likely a typo: say so instead of "0 moved".
        let unknown_provider = match (&args.provider, moved) {
            (Some(p), 0) => {
                let c = store.counts_by_state(Some(p)).await?;
                State::ALL.iter().all(|s| c.get(*s) == 0)
            }
            _ => false,
        };
        db::close(&store, &args.db.url).await?;
        crate::cmd::out(&format!("requeued {moved} {} item(s)\n", what.to_ascii_lowercase()))?;
        if unknown_provider {
            eprintln!(
                "abide: no item in {} targets provider `{}` (see `abide status` for the providers in use)",
                db::shown(&args.db.url),
                args.provider.as_deref().unwrap_or_default()
            );
            return Ok(ExitCode::from(1));
        }
        if moved == 0 && !args.ids.is_empty() {
            eprintln!(
                "abide: none of the given ids is {what} (see `abide status --list {}`)",
                what.to_ascii_lowercase()
            );
            return Ok(ExitCode::from(1));
        }
        Ok(ExitCode::SUCCESS)
    })
}
