//! The flags of `abide status` and its long help.

use abide_outbox::ListFilter;

const LONG_ABOUT: &str = "\
Show the items of an outbox database: counts per state, the age of the oldest item still
waiting (QUEUED or PENDING, measured from its enqueue or last requeue), and every attempt
counted by what the remote side said (HTTP status or SMPP command_status), separately from
what abide decided. IN_FLIGHT items whose lease has run out are counted apart
(`N in flight, M of them with an expired lease`; `in_flight_expired` in --json): a run
that stopped (crash, kill) left them, nothing is sending them, and the next `abide send` on
the database, or a running `abide serve`, reclaims them. FAILED and DEFERRED items are
also counted per reason (e.g. http_400, attempt_cap). SMPP delivery receipts are counted
per state (delivered, undeliverable, expired, rejected, unknown) with those naming no item
(unmatched); a receipt never changes an item's state. --list STATE prints items (newest
first: id, provider, attempts, reason, and for SMPP items the SMSC's message_id and
receipt), so `abide requeue --id ID` has ids to use.

With --redis (or ABIDE_REDIS_URL), also how the nodes share each provider's limit, read
from that Redis: per provider key the shared learned rate and ceiling, the shared pause
(until when, set by which node) and every node alive by its heartbeat (id, last seen, its
mode, its share of the slots, its rate). Each node's own mode (redis or fallback since when)
is in its /v1/stats. An unreachable Redis is reported and the rest still shown.

Reads only; safe while `abide send` or `abide serve` runs on the same database.

EXAMPLES
  abide status                       # ./abide.db
  abide status --db /var/lib/abide/outbox.db --json | jq .counts
  abide status --db postgres://abide@db.internal/abide
  abide status --list failed --limit 20      # ids and reasons of failed items
  abide status --list deferred --json | jq -r '.items[].id'
  ABIDE_REDIS_URL=redis://127.0.0.1:6379 abide status --db postgres://localhost/abide

EXIT CODES
The exit status describes the outbox, whatever is printed (summary, --json or --list):
  0  no item is FAILED or DEFERRED
  1  some items are FAILED or DEFERRED: they wait for a person (`abide requeue`);
     `abide status --list failed` exits 1 when it lists any, and so does `--list queued`
     while failed items exist elsewhere
  2  usage error, or the database cannot be opened or read";

/// Arguments of `abide status`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_ABOUT)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) db: crate::args::DbArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// List the items in this state instead of the summary: id, provider, attempts, reason.
    #[arg(long, value_name = "STATE", value_enum)]
    pub(crate) list: Option<crate::args::StateArg>,
    /// Most items --list prints (newest first), 1 to 10000.
    #[arg(long, default_value_t = 50, value_name = "N", requires = "list",
        value_parser = parse_limit)]
    pub(crate) limit: usize,
    /// Also show how the nodes share each provider's limit through this Redis
    /// (`redis://[:PASSWORD@]HOST:PORT[/DB]`, shown redacted).
    #[arg(long, value_name = "URL", env = "ABIDE_REDIS_URL", hide_env_values = true,
        value_parser = crate::args::parse_redis)]
    pub(crate) redis: Option<String>,
    /// Redis key prefix of the deployment to show (the nodes' `--redis-prefix` or
    /// `[coordination] key_prefix`): only its keys are read.
    #[arg(long, value_name = "PREFIX", env = "ABIDE_REDIS_PREFIX", default_value = "abide",
        value_parser = crate::args::parse_redis_prefix)]
    pub(crate) redis_prefix: String,
}

impl Args {
    /// The prefix of the coordination keys shown (`--redis-prefix`, then `:coord`).
    pub(crate) fn coordination_prefix(&self) -> String {
        abide_redis::coordination_prefix(&self.redis_prefix)
    }
}

/// `--limit`: 1 to [`ListFilter::MAX_LIMIT`]; a larger one is refused, not quietly cut.
pub(super) fn parse_limit(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of items"))?;
    if (1..=ListFilter::MAX_LIMIT).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is outside 1 to {}", ListFilter::MAX_LIMIT))
    }
}
