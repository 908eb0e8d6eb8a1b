//! `abide status`: where the items of an outbox database are, and what the providers said.

mod flags;
pub(crate) use self::flags::Args;

use std::process::ExitCode;

use std::fmt::Write as _;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Counts, Item, ListFilter, ReceiptState, State, Store};

use crate::db;
use crate::report::Snapshot;

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
    use super::flags::parse_limit;
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
