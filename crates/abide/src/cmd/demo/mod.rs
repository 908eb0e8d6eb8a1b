//! `abide demo`: the whole idea in one minute. A quirky fake provider on loopback, a few
//! thousand messages through the durable outbox, and what each side counted.

mod flags;
pub(crate) mod phases;
pub(crate) mod run;
pub(crate) mod smpp;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{ProviderConfig, ScheduleEntry, StatsSnapshot};
use abide_outbox::Config;
use anyhow::Context;

pub(crate) use self::flags::Args;
use self::flags::Transport;
use crate::cmd::demo::phases::{request_at, Mark, Timeline, SWITCHES};
use crate::cmd::demo::run::{self as demo_run, through_outbox};
use crate::deliver::Interrupt;
use crate::deliver::Said as _;
use crate::report::RunReport;

/// Name of the variable the demo's provider token is passed in (as in real use).
const TOKEN_ENV: &str = "ABIDE_DEMO_PROVIDER_TOKEN";

fn provider_config(a: &Args) -> anyhow::Result<ProviderConfig> {
    let mut c = demo_run::limited(a.rate);
    c.limits.key_concurrency = Some(6);
    c.latency_ms = 60;
    // Quirks by request number, so they land at the same point of any run.
    for sw in &SWITCHES {
        let spec = format!("{}@#{}", sw.spec, request_at(a.items, sw.pct));
        c.schedule.push(spec.parse::<ScheduleEntry>()?);
    }
    // A suspension is what a burst would earn; the demo shows there is none.
    c.abuse.threshold = 200;
    c.abuse.window_secs = 10;
    c.validate()?;
    Ok(c)
}

fn outbox_config(a: &Args, url: &str) -> anyhow::Result<Config> {
    let toml = format!(
        "[[provider]]\nname = \"sms\"\nbase_url = \"{url}\"\ncredentials_env = \"{TOKEN_ENV}\"\n\
         rate_hint = {}\nconcurrency = {}\n[provider.retry]\nmax_attempts = 50\n\
         backoff_base_ms = 500\nbackoff_cap_secs = 10\n\
         [provider.budget]\nmin_per_sec = 5\nretry_ratio = 0.2\n",
        f64::from(a.rate) * 2.0,
        a.workers
    );
    Ok(Config::from_toml_str(&toml)?)
}

/// A second demo on the same outbox would enqueue nothing (same idempotency keys) and
/// deliver nothing, silently: refuse a file that already holds anything.
fn refuse_used_db(p: &std::path::Path) -> anyhow::Result<()> {
    match std::fs::metadata(p) {
        Ok(m) if m.len() > 0 => anyhow::bail!(
            "--db {}: the file already holds an outbox, and a demo run on it would send \
             nothing (its messages are already there, under the same idempotency keys); \
             remove it or name a new file",
            p.display()
        ),
        _ => Ok(()),
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let pcfg = provider_config(&args)?;
    // The token travels the way real credentials do: an environment variable named in
    // the providers config. Set before any thread starts.
    std::env::set_var(TOKEN_ENV, abide_fake::DEMO_KEY);
    std::env::set_var(crate::cmd::demo::smpp::PASSWORD_ENV, "demo-pw");
    args.logs.init("error");
    let (db, temp) = match &args.db {
        Some(p) => {
            refuse_used_db(p)?;
            (p.clone(), None)
        }
        None => {
            let nanos = SystemClock
                .now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .subsec_nanos();
            let dir =
                std::env::temp_dir().join(format!("abide-demo-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            (dir.join("outbox.db"), Some(dir))
        }
    };
    let rt = tokio::runtime::Runtime::new()?;
    let result = if args.transport == Transport::Smpp {
        rt.block_on(crate::cmd::demo::smpp::demo(&args, &db))
    } else {
        rt.block_on(demo(&args, pcfg, &db))
    };
    if let Some(dir) = temp {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

async fn demo(args: &Args, pcfg: ProviderConfig, db: &std::path::Path) -> anyhow::Result<ExitCode> {
    let interrupt = Interrupt::listen()?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let provider = abide_fake::spawn(pcfg, Arc::clone(&clock), loopback).await?;
    let url = provider.url();
    let db_str = db.to_string_lossy().into_owned();
    if !args.quiet {
        eprintln!(
            "abide demo: provider at {url} ({} msg/s per key, 6 in flight, 60 ms each; quirks at 25/45/65% of requests)\n\
             abide demo: {} messages, {} senders, outbox {db_str}",
            args.rate, args.items, args.workers
        );
    }
    let mut timeline = Timeline::default();
    let (report, ending, start) = through_outbox(
        args,
        &db_str,
        outbox_config(args, &url)?,
        &demo_run::items(args.items, "sms", "/v1/messages", "demo-"),
        Duration::ZERO,
        &interrupt,
        &clock,
        |start| timeline.follow(&provider, args.items, clock.as_ref(), start),
    )
    .await?;
    let saw = provider.stats();
    let total = clock.monotonic().saturating_duration_since(start);
    let end = Mark {
        at: total,
        accepted: saw.accepted,
        refused: saw.rejected_by_status.clone(),
    };
    let phases = timeline.phases(&end, f64::from(args.rate));
    let mut seen = serde_json::to_value(&saw)?;
    if let Some(o) = seen.as_object_mut() {
        o.remove("histogram");
    }
    let json = vec![
        ("provider_saw", seen),
        ("phases", serde_json::to_value(&phases)?),
    ];
    let text = format!("{}{}", side_by_side(&saw, &report), phases.render());
    demo_run::print(args, &db_str, &report, json, &text)?;
    provider.shutdown().await?;
    Ok(ending.exit_code(&report.outbox.counts))
}

/// "What the provider saw" next to "what abide decided".
fn side_by_side(saw: &StatsSnapshot, r: &RunReport) -> String {
    let mut left = vec![
        ("requests".to_owned(), saw.requests),
        ("accepted".to_owned(), saw.accepted),
        ("duplicates".to_owned(), saw.duplicates),
        ("suspensions".to_owned(), saw.suspensions),
    ];
    for (status, n) in &saw.rejected_by_status {
        left.push((format!("rejected {status}"), *n));
    }
    for (reason, n) in &saw.rejected_by_reason {
        left.push((format!("  by {reason}"), *n));
    }
    let mut s = demo_run::side_by_side("provider", &left, r, &[]);
    let per = crate::report::ratio(
        saw.rejected_by_status.get(&429).copied().unwrap_or(0),
        r.outbox.items,
    );
    let _ = writeln!(
        s,
        "\n  429s per message {per:.3} (target <= 0.05); achieved {:.1}/s; duplicates {}; suspensions {}",
        r.achieved_rate_per_sec, saw.duplicates, saw.suspensions
    );
    s
}
