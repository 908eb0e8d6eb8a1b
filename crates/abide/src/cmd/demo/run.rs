//! What the HTTP and SMPP demos share: the run through the outbox (open, enqueue, deliver,
//! report) and the printed report, with what the fake remote saw beside what abide
//! decided.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use abide_core::Clock;
use abide_fake::{ProviderConfig, Rate};
use abide_outbox::{Config, Dispatcher, DispatcherOptions, NewItem, Request};

use super::flags::Args;
use crate::deliver::{deliver, Ending, Feed, Interrupt, Outbox, Said as _};
use crate::report::progress::{Display, Mode};
use crate::report::{InputSummary, RunReport, Snapshot};

/// One row of the side-by-side table: a name and a count.
pub(crate) type Row = (String, u64);

/// `n` one-time-code SMS for `provider` at `path`, keyed `{key_prefix}{i:07}` (fixed
/// keys: a second run on the same outbox sends nothing).
pub(crate) fn items(n: u32, provider: &str, path: &str, key_prefix: &str) -> Vec<NewItem> {
    (0..n)
        .map(|i| {
            let body = serde_json::json!({
                "to": format!("+1555{:07}", i),
                "text": format!("Your code is {:06}", (u64::from(i) * 7919) % 1_000_000),
            });
            NewItem::new(provider, Request::post_json(path, body))
                .with_idempotency_key(format!("{key_prefix}{i:07}"))
        })
        .collect()
}

/// A fake remote limited to `rate` per second per key (burst a fifth of it), with no
/// account limit.
pub(crate) fn limited(rate: u32) -> ProviderConfig {
    let mut c = ProviderConfig::default();
    c.limits.key_rate = Some(Rate {
        count: rate,
        per: Duration::from_secs(1),
    });
    c.limits.key_burst = Some((rate / 5).max(1));
    c.limits.account_rate = None;
    c.limits.account_burst = None;
    c
}

/// Enqueue `items` into the outbox at `db` and deliver them to the providers of `cfg`
/// (waiting up to `receipt_wait` for SMPP receipts), while the future `beside` makes from
/// the instant delivery begins runs alongside (it never ends: the HTTP demo's phase
/// timeline); then say goodbye to the providers and build the report. Returns the report,
/// why the run ended, and when delivery began.
///
/// # Errors
/// The outbox cannot be opened or written, the dispatcher cannot be built.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn through_outbox<F>(
    args: &Args,
    db: &str,
    cfg: Config,
    items: &[NewItem],
    receipt_wait: Duration,
    interrupt: &Interrupt,
    clock: &Arc<dyn Clock>,
    beside: impl FnOnce(Instant) -> F,
) -> anyhow::Result<(RunReport, Ending, Instant)>
where
    F: Future<Output = ()>,
{
    let outbox = Outbox::open(db, clock.now()).await?;
    let opts = DispatcherOptions {
        seed: args.seed,
        ..DispatcherOptions::default()
    };
    let d = Dispatcher::new(outbox.store.clone(), cfg, Arc::clone(clock), opts)?;
    let input = InputSummary::from_enqueued(&d.enqueue(items).await?);
    let mode = if args.quiet { Mode::None } else { Mode::Auto };
    let start = clock.monotonic();
    let (p, ending) = tokio::select! {
        r = deliver(&d, Display::new(mode), receipt_wait, interrupt, Feed::complete()) => r?,
        () = beside(start) => unreachable!("`beside` never ends"),
    };
    d.close().await;
    let snap = Snapshot::load(&outbox.store, clock.now()).await?;
    let report = RunReport::new(&p, ending.outcome(), Some(input), snap);
    Ok((report, ending, start))
}

/// Print `report`: as JSON with `json_extra` added at the top level (what the remote saw
/// and the like), or as text followed by `text_extra`. The outbox is named `db`, or as
/// temporary when the demo removes it at exit.
///
/// # Errors
/// Serialising to JSON failed.
pub(crate) fn print(
    args: &Args,
    db: &str,
    report: &RunReport,
    json_extra: Vec<(&str, serde_json::Value)>,
    text_extra: &str,
) -> anyhow::Result<()> {
    if args.json {
        let mut v = serde_json::to_value(report)?;
        for (k, x) in json_extra {
            v[k] = x;
        }
        crate::cmd::out(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else {
        // The temporary outbox is removed on exit: do not print a path that is gone.
        let shown = match &args.db {
            Some(_) => db,
            None => "(temporary, removed at exit)",
        };
        crate::cmd::out(&format!("{}{text_extra}", report.render_text(shown)))?;
    }
    Ok(())
}

/// Two columns: `left` under "what the {remote} saw", and under "what abide decided"
/// its decisions, every remote code it heard, then `right_extra`.
pub(crate) fn side_by_side(
    remote: &str,
    left: &[Row],
    r: &RunReport,
    right_extra: &[Row],
) -> String {
    let mut right: Vec<Row> = crate::report::decided(&r.run)
        .into_iter()
        .map(|(name, n)| (name.replace('_', " "), n))
        .collect();
    for (code, n) in &r.outbox.remote_counts {
        right.push((format!("heard {code}"), *n));
    }
    right.extend_from_slice(right_extra);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n  {:<30}   {:<30}",
        format!("what the {remote} saw"),
        "what abide decided"
    );
    for i in 0..left.len().max(right.len()) {
        let cell = |v: &[Row]| {
            v.get(i)
                .map_or_else(String::new, |(k, n)| format!("{k:<20}{n:>10}"))
        };
        let _ = writeln!(s, "  {:<30}   {}", cell(left), cell(&right));
    }
    s
}
