//! `abide status`: where the items of an outbox database are, and what the providers said.

use std::process::ExitCode;

use std::fmt::Write as _;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Counts, Item, ListFilter, ReceiptState, State, Store};

use crate::db;
use crate::report::Snapshot;

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
    db: crate::args::DbArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// List the items in this state instead of the summary: id, provider, attempts, reason.
    #[arg(long, value_name = "STATE", value_enum)]
    list: Option<crate::args::StateArg>,
    /// Most items --list prints (newest first), 1 to 10000.
    #[arg(long, default_value_t = 50, value_name = "N", requires = "list",
        value_parser = parse_limit)]
    limit: usize,
    /// Also show how the nodes share each provider's limit through this Redis
    /// (`redis://[:PASSWORD@]HOST:PORT[/DB]`, shown redacted).
    #[arg(long, value_name = "URL", env = "ABIDE_REDIS_URL", hide_env_values = true,
        value_parser = crate::args::parse_redis)]
    redis: Option<String>,
    /// Redis key prefix of the deployment to show (the nodes' `--redis-prefix` or
    /// `[coordination] key_prefix`): only its keys are read.
    #[arg(long, value_name = "PREFIX", env = "ABIDE_REDIS_PREFIX", default_value = "abide",
        value_parser = crate::args::parse_redis_prefix)]
    redis_prefix: String,
}

impl Args {
    /// The prefix of the coordination keys shown (`--redis-prefix`, then `:coord`).
    pub(crate) fn coordination_prefix(&self) -> String {
        abide_redis::coordination_prefix(&self.redis_prefix)
    }
}

/// The coordination part of the summary: the shared view, or why it is missing.
async fn coordination(args: &Args) -> Option<Result<Vec<abide_redis::SharedLimit>, String>> {
    let url = args.redis.as_deref()?;
    Some(
        abide_redis::look(
            url,
            &args.coordination_prefix(),
            std::time::Duration::from_secs(2),
        )
        .await
        .map_err(|e| e.to_string()),
    )
}

/// Items per (state, reason) for the states a person acts on.
async fn reasons<S: Store>(store: &S) -> anyhow::Result<Vec<(State, String, u64)>> {
    let mut out = store.reason_counts(Some(State::Failed)).await?;
    out.extend(store.reason_counts(Some(State::Deferred)).await?);
    Ok(out)
}

fn render_reasons(r: &[(State, String, u64)]) -> String {
    let mut s = String::new();
    if r.is_empty() {
        return s;
    }
    let _ = writeln!(s, "  why (FAILED and DEFERRED items per reason)");
    for (state, reason, n) in r {
        let _ = writeln!(s, "    {:<10} {reason:<28} {n:>7}", state.as_str());
    }
    s
}

fn render_list(
    state: State,
    items: &[Item],
    receipts: &[Option<ReceiptState>],
    limit: usize,
) -> String {
    let mut s = String::new();
    if items.is_empty() {
        let _ = writeln!(s, "no {} items", state.as_str());
        return s;
    }
    // SMPP items: the SMSC's message id and what its receipt said.
    let smpp = items.iter().any(|it| it.message_id.is_some());
    let _ = write!(
        s,
        "{:<38} {:<16} {:>8}  reason",
        "id", "provider", "attempts"
    );
    let _ = writeln!(s, "{}", if smpp { "  message_id  receipt" } else { "" });
    for (it, receipt) in items.iter().zip(receipts) {
        let _ = write!(
            s,
            "{:<38} {:<16} {:>8}  {}",
            it.id,
            it.current_provider,
            it.attempts,
            it.reason.as_deref().unwrap_or("-")
        );
        if smpp {
            let _ = write!(
                s,
                "  {}  {}",
                it.message_id.as_deref().unwrap_or("-"),
                receipt.map_or("-", |r| r.as_str())
            );
        }
        let _ = writeln!(s);
    }
    if items.len() >= limit {
        let _ = writeln!(s, "(first {limit}, newest first; --limit N shows more)");
    }
    s
}

/// `--limit`: 1 to [`ListFilter::MAX_LIMIT`]; a larger one is refused, not quietly cut.
fn parse_limit(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of items"))?;
    if (1..=ListFilter::MAX_LIMIT).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is outside 1 to {}", ListFilter::MAX_LIMIT))
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let store = db::open_read_only(&args.db.url).await?;
        if let Some(list) = args.list {
            let state = State::from(list);
            let limit = args.limit;
            let filter = ListFilter {
                state: Some(state),
                provider: None,
                limit,
            };
            let items = store.list(&filter).await?;
            // Receipts only exist for accepted (SMPP) items.
            let mut receipts = Vec::with_capacity(items.len());
            for it in &items {
                receipts.push(match &it.message_id {
                    Some(_) => store.receipt_of(&it.id).await?.map(|(st, _)| st),
                    None => None,
                });
            }
            if args.json {
                let rows: Vec<serde_json::Value> = items
                    .iter()
                    .zip(&receipts)
                    .map(|(it, receipt)| {
                        serde_json::json!({
                            "id": it.id,
                            "provider": it.current_provider,
                            "original_provider": it.provider,
                            "attempts": it.attempts,
                            "reason": it.reason,
                            "last_provider_code": it.last_provider_code.map(|c| c.to_string()),
                            "message_id": it.message_id,
                            "receipt": receipt.map(|r| r.as_str()),
                        })
                    })
                    .collect();
                let out = serde_json::json!({"state": state.as_str(), "items": rows});
                crate::cmd::out(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
            } else {
                crate::cmd::out(&render_list(state, &items, &receipts, limit))?;
            }
            return Ok(exit_code(&store.counts_by_state(None).await?));
        }
        let snap = Snapshot::load(&store, SystemClock.now()).await?;
        let why = reasons(&store).await?;
        let coord = coordination(&args).await;
        let shown = args.redis.as_deref().map(abide_outbox::echo::redact_url).unwrap_or_default();
        if args.json {
            let mut v = serde_json::to_value(&snap)?;
            if let Some(o) = v.as_object_mut() {
                let rows: Vec<serde_json::Value> = why
                    .iter()
                    .map(|(st, r, n)| serde_json::json!({"state": st.as_str(), "reason": r, "items": n}))
                    .collect();
                o.insert("reasons".to_owned(), rows.into());
                let c = match &coord {
                    None => serde_json::json!({"mode": "local"}),
                    Some(Ok(limits)) => crate::report::coord::shared_value(limits, &shown),
                    Some(Err(e)) => serde_json::json!({"mode": "unreachable", "redis": shown, "error": e}),
                };
                o.insert("coordination".to_owned(), c);
            }
            crate::cmd::out(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
        } else {
            let mut text = snap.render_table(&args.db.url);
            text.push_str(&render_reasons(&why));
            match &coord {
                None => {}
                Some(Ok(limits)) => {
                    text.push_str(&crate::report::coord::render_shared(limits, &shown));
                }
                Some(Err(e)) => text.push_str(&format!("  coordination     unreachable: {e}\n")),
            }
            crate::cmd::out(&text)?;
        }
        Ok(exit_code(&snap.counts))
    })
}

/// The exit status of every form of `status`: 1 when an item waits for a person (FAILED or
/// DEFERRED), else 0. The same rule for the summary and `--list`, so a script can ask
/// "is anything stuck?" with whichever view it prints.
fn exit_code(c: &Counts) -> ExitCode {
    if needs_a_person(c) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn needs_a_person(c: &Counts) -> bool {
    c.failed + c.deferred > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_limit_outside_its_range_is_refused_not_cut() {
        assert_eq!(parse_limit("1"), Ok(1));
        assert_eq!(parse_limit("10000"), Ok(10_000));
        for bad in ["0", "10001", "-3", "ten"] {
            assert!(parse_limit(bad).is_err(), "{bad}");
        }
        assert!(parse_limit("20000").is_err_and(|e| e.contains("outside 1 to 10000")));
    }

    #[test]
    fn only_failed_or_deferred_items_need_a_person() {
        let mut c = Counts::default();
        assert!(!needs_a_person(&c));
        c.queued = 3;
        c.in_flight = 2;
        c.pending = 1;
        c.submitted = 9;
        assert!(!needs_a_person(&c), "waiting work is not stuck work");
        for stuck in [State::Failed, State::Deferred] {
            let mut c = c;
            *c.get_mut(stuck) = 1;
            assert!(needs_a_person(&c), "{stuck:?}");
        }
    }
}
