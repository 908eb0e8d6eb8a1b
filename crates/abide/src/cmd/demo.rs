//! `abide demo`: the whole idea in one minute. A quirky fake provider on loopback, a few
//! thousand messages through the durable outbox, and what each side counted.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Config, Dispatcher, DispatcherOptions, NewItem, Request};
use abide_provider::{ProviderConfig, Rate, ScheduleEntry, StatsSnapshot};
use anyhow::Context;

use super::deliver::{deliver, init_logs, Interrupt, Outbox};
use super::demo_phases::{request_at, Timeline, SWITCHES};
use super::progress::{Display, Mode};
use super::report::{InputSummary, RunReport, Snapshot};

const LONG_ABOUT: &str = "\
See the whole idea in about a minute, on this machine only (127.0.0.1):

1. A fake messaging provider starts in-process on a free loopback port, limited to --rate
   messages per second per key (advertised in RateLimit headers), plus a limit it does NOT
   advertise: 6 messages in flight, each taking 60 ms.
2. Its quirks switch on as the run goes (by request count): at 25% Retry-After turns from
   seconds into an HTTP-date; at 45-50% it answers 503 to every second request; at 65-75%
   it throttles with `403 Forbidden` and `Retry-After: 0`, like a misconfigured gateway.
3. --items messages go through the durable outbox (SQLite in a temp dir, or --db) with
   --workers concurrent senders sharing one pacer and one retry budget, started at twice the
   real limit so the pacer has something to learn.
4. The report puts side by side what the provider saw (requests, accepted, duplicates,
   rejections) and what abide decided (delivered, throttled, retried, deferred, failed),
   plus abide's own count of every status the provider answered, and a table of the
   phases: how long each took, what it accepted, and what share of the run it cost
   (its time beyond accepted / --rate), with the rate outside the 503 and 403 phases.

Expected: every message accepted exactly once (duplicates 0), few 429s per message, no
suspension, and an achieved rate below --rate: abide aims at 97% of the advertised limit,
the quirk phases cost pauses, and the unadvertised 6-in-flight limit (6 per 60 ms, at most
100 msg/s, less with loopback overhead) caps any --rate near or above that.

--db keeps the outbox for `abide status`; it must not exist yet (or be empty): the demo's
messages have fixed idempotency keys, so a second run on the same file would send nothing.

EXAMPLES
  cargo run --release -p abide -- demo
  abide demo --items 500 --rate 200          # a quick one
  abide demo --db demo.db && abide status --db demo.db

EXIT CODES
  0  every message delivered   1  some failed or deferred   2  usage error   130  Ctrl-C";

/// Arguments of `abide demo`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = format!("{LONG_ABOUT}\n\n{}", super::demo_smpp::HELP))]
pub(crate) struct Args {
    /// Messages to send.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) items: u32,
    /// The provider's limit, messages per second per key (per bind over SMPP).
    #[arg(long, default_value_t = 75, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) rate: u32,
    /// Concurrent senders (over SMPP: the window of outstanding submit_sm).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: u16,
    /// Keep the outbox in this SQLite file (default: a temp dir, removed afterwards).
    #[arg(long, value_name = "PATH")]
    pub(crate) db: Option<PathBuf>,
    /// Print the final report as JSON (with the provider's stats under `provider_saw`, or
    /// the SMSC's under `smsc_saw`).
    #[arg(long)]
    pub(crate) json: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Seed for retry jitter.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// The provider: an HTTP API, or an SMSC over SMPP 3.4 (see below).
    #[arg(long, value_parser = ["http", "smpp"], default_value = "http")]
    pub(crate) transport: String,
}

/// Name of the variable the demo's provider token is passed in (as in real use).
const TOKEN_ENV: &str = "ABIDE_DEMO_PROVIDER_TOKEN";

fn provider_config(a: &Args) -> anyhow::Result<ProviderConfig> {
    let mut c = ProviderConfig::default();
    c.limits.key_rate = Some(Rate {
        count: a.rate,
        per: Duration::from_secs(1),
    });
    c.limits.key_burst = Some((a.rate / 5).max(1));
    c.limits.account_rate = None;
    c.limits.account_burst = None;
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

fn items(n: u32) -> Vec<NewItem> {
    (0..n)
        .map(|i| {
            let body = serde_json::json!({
                "to": format!("+1555{:07}", i),
                "text": format!("Your code is {:06}", (u64::from(i) * 7919) % 1_000_000),
            });
            NewItem::new("sms", Request::post_json("/v1/messages", body))
                .with_idempotency_key(format!("demo-{i:07}"))
        })
        .collect()
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
    std::env::set_var(TOKEN_ENV, abide_provider::DEMO_KEY);
    std::env::set_var(super::demo_smpp::PASSWORD_ENV, "demo-pw");
    init_logs("error");
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
    let result = if args.transport == "smpp" {
        rt.block_on(super::demo_smpp::demo(&args, &db))
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
    let provider = abide_provider::spawn(pcfg, Arc::clone(&clock), loopback).await?;
    let url = provider.url();
    let db_str = db.to_string_lossy().into_owned();
    if !args.quiet {
        eprintln!(
            "abide demo: provider at {url} ({} msg/s per key, 6 in flight, 60 ms each; quirks at 25/45/65% of requests)\n\
             abide demo: {} messages, {} senders, outbox {db_str}",
            args.rate, args.items, args.workers
        );
    }
    let outbox = Outbox::open(&db_str, clock.now()).await?;
    let opts = DispatcherOptions {
        seed: args.seed,
        ..DispatcherOptions::default()
    };
    let d = Dispatcher::new(
        outbox.store.clone(),
        outbox_config(args, &url)?,
        Arc::clone(&clock),
        opts,
    )?;
    let input = InputSummary::from_enqueued(&d.enqueue(&items(args.items)).await?);
    let mode = if args.quiet { Mode::None } else { Mode::Auto };
    let start = clock.monotonic();
    let mut timeline = Timeline::default();
    let (p, ending) = tokio::select! {
        r = deliver(&d, Display::new(mode), Duration::ZERO, &interrupt) => r?,
        () = timeline.follow(&provider, args.items, clock.as_ref(), start) => {
            unreachable!("follow never returns")
        }
    };
    let saw = provider.stats();
    let total = clock.monotonic().saturating_duration_since(start);
    let phases = timeline.phases(total, saw.accepted, f64::from(args.rate));
    let snap = Snapshot::load(&outbox.store, clock.now()).await?;
    let report = RunReport::new(&p, ending.as_str(), Some(input), snap);
    if args.json {
        let mut v = serde_json::to_value(&report)?;
        let mut seen = serde_json::to_value(&saw)?;
        if let Some(o) = seen.as_object_mut() {
            o.remove("histogram");
        }
        v["provider_saw"] = seen;
        v["phases"] = serde_json::to_value(&phases)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        // The temporary outbox is removed on exit: do not print a path that is gone.
        let shown = match &args.db {
            Some(_) => db_str.as_str(),
            None => "(temporary, removed at exit)",
        };
        print!("{}", report.render_text(shown));
        print!("{}", side_by_side(&saw, &report));
        print!("{}", phases.render());
    }
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
    let mut right: Vec<(String, u64)> = super::report::decided(&r.run)
        .into_iter()
        .map(|(name, n)| (name.replace('_', " "), n))
        .collect();
    for (code, n) in &r.outbox.remote_counts {
        right.push((format!("heard {code}"), *n));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n  {:<30}   {:<30}",
        "what the provider saw", "what abide decided"
    );
    for i in 0..left.len().max(right.len()) {
        let cell = |v: &[(String, u64)]| {
            v.get(i)
                .map_or_else(String::new, |(k, n)| format!("{k:<20}{n:>10}"))
        };
        let _ = writeln!(s, "  {:<30}   {}", cell(&left), cell(&right));
    }
    let per = super::report::ratio(
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
