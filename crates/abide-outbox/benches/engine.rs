//! Engine speed: items per second delivered end to end (claimed from SQLite, sent over
//! loopback HTTP, accepted, result committed) against an unlimited in-process
//! `abide-fake`, CPU time per delivered item, and peak RSS while the dispatcher runs.
//!
//! ```text
//! cargo bench -p abide-outbox --bench engine                       # 20,000 items
//! cargo bench -p abide-outbox --bench engine -- --queued 1000000 --deliver 20000
//! cargo bench -p abide-outbox --bench engine -- --transport scripted --items 100000
//! ```
//!
//! `--transport scripted` answers every request `202` in memory (abide_outbox's
//! `ScriptedTransport`): what is left is the outbox itself (claims, the session's
//! decisions, completions, SQLite).
//!
//! The provider runs on its own thread with its own single-threaded runtime, so its CPU
//! time can be measured (`/proc/thread-self/schedstat`) and subtracted from the process
//! total: "outbox CPU" is everything else (dispatcher, sqlx's SQLite threads, reqwest).
//! Peak RSS is reset (`/proc/self/clear_refs`) after enqueueing, so it covers the run
//! only, and is sampled every 100 ms as well.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{ProviderConfig as FakeConfig, StatsSnapshot};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, Response, ScriptedTransport, SqliteStore,
    StaticCredentials, Store, Transport,
};
use support::{mib, Args};

const USAGE: &str = "\
engine: items/s end to end on SQLite against an unlimited loopback provider

cargo bench -p abide-outbox --bench engine -- [OPTIONS]
  --items N          items to enqueue and deliver (default 20000; sets --queued and --deliver)
  --queued N         items in the queue when the dispatcher starts (default --items)
  --deliver N        stop once N deliveries are committed (default --items, at most --queued)
  --concurrency N    senders (default 32)
  --claim-batch N    items per claim (default 256, the dispatcher default)
  --workers N        tokio worker threads of the outbox runtime (default 2)
  --enqueue-batch N  items per enqueue transaction (default 5000)
  --transport T      http (loopback provider, default) or scripted (in memory, no network)
  --db PATH          SQLite file (default: a fresh temporary directory)
  --pragma K=V[,K=V] SQLite pragmas on top of the store's own (e.g. wal_autocheckpoint=10000)";

struct ProviderThread {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<(StatsSnapshot, Duration)>,
}

/// An unlimited provider: no rate, burst or concurrency limit, no latency.
fn start_provider() -> ProviderThread {
    let mut cfg = FakeConfig::default();
    cfg.limits.key_rate = None;
    cfg.limits.key_burst = None;
    cfg.limits.account_rate = None;
    cfg.limits.account_burst = None;
    cfg.limits.key_concurrency = None;
    cfg.limits.account_concurrency = None;
    cfg.latency_ms = 0;
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let join = std::thread::Builder::new()
        .name("provider".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("provider runtime");
            rt.block_on(async move {
                let p =
                    abide_fake::spawn(cfg, Arc::new(SystemClock), "127.0.0.1:0".parse().unwrap())
                        .await
                        .expect("provider starts");
                url_tx.send(p.url()).unwrap();
                let _ = stop_rx.await;
                // Read before the runtime (and its open connections) is dropped.
                (p.stats(), support::thread_cpu())
            })
        })
        .expect("provider thread");
    let url = url_rx.recv().expect("provider url");
    ProviderThread { url, stop, join }
}

fn main() {
    let args = Args::parse(USAGE);
    support::only_under_cargo_bench(&args, "engine");
    let n_items: usize = args.get("items", 20_000, USAGE);
    let queued: usize = args.get("queued", n_items, USAGE);
    let deliver: usize = args.get("deliver", n_items, USAGE).min(queued);
    let concurrency: usize = args.get("concurrency", 32, USAGE);
    let claim_batch: usize = args.get(
        "claim-batch",
        DispatcherOptions::default().claim_batch,
        USAGE,
    );
    let workers: usize = args.get("workers", 2, USAGE);
    let enqueue_batch: usize = args.get("enqueue-batch", 5000, USAGE);
    let db = args.opt("db").map(std::path::PathBuf::from);
    let pragmas: Vec<(String, String)> = args
        .opt("pragma")
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
            None => {
                eprintln!("--pragma {p}: expected NAME=VALUE\n\n{USAGE}");
                std::process::exit(2);
            }
        })
        .collect();
    let scripted = match args.opt("transport") {
        None | Some("http") => false,
        Some("scripted") => true,
        Some(other) => {
            eprintln!("--transport {other}: expected http or scripted\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let provider = start_provider();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = db.unwrap_or_else(|| tmp.path().join("bench.db"));

    let config = Config::from_toml_str(&format!(
        r#"[[provider]]
        name = "fake"
        base_url = "{}"
        credentials_env = "ABIDE_BENCH_TOKEN"
        rate_hint = 1000000.0
        concurrency = {concurrency}"#,
        provider.url
    ))
    .expect("config");

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let report = rt.block_on(async {
        let mut sqlite = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        for (k, v) in &pragmas {
            sqlite = sqlite.pragma(k.clone(), v.clone());
        }
        let store = SqliteStore::with_options(sqlite).await.expect("store");
        let creds = StaticCredentials::new().with("ABIDE_BENCH_TOKEN", abide_fake::DEMO_KEY);
        let opts = DispatcherOptions {
            claim_batch,
            seed: Some(1),
            credentials: Some(Arc::new(creds)),
            ..DispatcherOptions::default()
        };
        let noop: Arc<dyn Transport> =
            Arc::new(ScriptedTransport::new(Arc::clone(&clock), |_, _| {
                Response::status(202)
            }));
        let d = if scripted {
            Dispatcher::with_transports(store, config, Arc::clone(&clock), opts, |_| {
                Arc::clone(&noop)
            })
        } else {
            Dispatcher::new(store, config, Arc::clone(&clock), opts)
        }
        .expect("dispatcher");

        let t = clock.monotonic();
        let mut from = 0;
        while from < queued {
            let n = enqueue_batch.min(queued - from);
            d.enqueue(&support::items("fake", "bench", from, n))
                .await
                .expect("enqueue");
            from += n;
        }
        let enqueue_time = clock.monotonic() - t;

        support::reset_peak_rss();
        let rss_start = support::status_kb("VmRSS");
        let rss_max = Arc::new(AtomicU64::new(rss_start));
        let sampler = {
            let rss_max = Arc::clone(&rss_max);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    rss_max.fetch_max(support::status_kb("VmRSS"), Ordering::Relaxed);
                }
            })
        };
        let cpu0 = support::process_cpu();
        let threads0 = support::cpu_by_thread_name();
        let t0 = clock.monotonic();
        let done_at = Arc::new(std::sync::Mutex::new(None));
        let stop = {
            let (d, clock, done_at) = (d.clone(), Arc::clone(&clock), Arc::clone(&done_at));
            async move {
                while d.totals().delivered < deliver as u64 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                // The peak while delivering, before shutdown's final progress snapshot
                // (whose counting queries read through the whole queue).
                *done_at.lock().unwrap() = Some((clock.monotonic(), support::status_kb("VmHWM")));
            }
        };
        let progress = d.run_until(stop).await.expect("run");
        let (stopped, rss_peak) = done_at.lock().unwrap().expect("stopped");
        let elapsed = stopped - t0;
        let cpu = support::process_cpu().saturating_sub(cpu0);
        let mut threads = support::cpu_by_thread_name();
        for (name, t) in threads.iter_mut() {
            *t = t.saturating_sub(threads0.get(name).copied().unwrap_or_default());
        }
        sampler.abort();
        let rss_peak_end = support::status_kb("VmHWM");
        let counts = d.store().counts_by_state(None).await.expect("counts");
        (
            enqueue_time,
            elapsed,
            cpu,
            rss_start,
            rss_max.load(Ordering::Relaxed),
            rss_peak,
            rss_peak_end,
            progress,
            counts,
            threads,
        )
    });
    let (
        enqueue_time,
        elapsed,
        cpu,
        rss_start,
        rss_sampled,
        rss_peak,
        rss_peak_end,
        progress,
        counts,
        threads,
    ) = report;
    drop(rt);
    let _ = provider.stop.send(());
    let (stats, provider_cpu) = provider.join.join().expect("provider thread");

    let delivered = progress.totals.delivered;
    let per_item = |d: Duration| d.as_secs_f64() * 1e6 / delivered.max(1) as f64;
    let outbox_cpu = cpu.saturating_sub(provider_cpu);
    println!(
        "engine bench: SQLite, {}, release={}",
        if scripted {
            "scripted in-memory transport (no network)"
        } else {
            "unlimited loopback provider"
        },
        !cfg!(debug_assertions)
    );
    println!(
        "  queued {queued} (enqueued in {:.2} s, {:.0} items/s), concurrency {concurrency}, claim batch {claim_batch}, workers {workers}",
        enqueue_time.as_secs_f64(),
        queued as f64 / enqueue_time.as_secs_f64()
    );
    println!(
        "  delivered {delivered} (target {deliver}) in {:.3} s = {:.0} items/s end to end",
        elapsed.as_secs_f64(),
        deliver as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  attempts {} throttled {} | provider accepted {} duplicates {} rejected {}",
        progress.totals.attempts,
        progress.totals.throttled,
        stats.accepted,
        stats.duplicates,
        stats.rejected
    );
    println!(
        "  CPU per delivered item: process {:.1} us, provider thread {:.1} us, outbox {:.1} us",
        per_item(cpu),
        per_item(provider_cpu),
        per_item(outbox_cpu)
    );
    let split: Vec<String> = threads
        .iter()
        .filter(|(_, t)| !t.is_zero())
        .map(|(name, t)| format!("{name} {:.1} us", per_item(*t)))
        .collect();
    println!(
        "  CPU per delivered item by thread name (10 ms ticks): {}",
        split.join(", ")
    );
    println!(
        "  RSS: at start of run {:.1} MiB, peak while delivering {:.1} MiB (VmHWM), peak including shutdown {:.1} MiB, max sampled {:.1} MiB",
        mib(rss_start),
        mib(rss_peak),
        mib(rss_peak_end),
        mib(rss_sampled)
    );
    println!("  store counts after run: {counts:?}");
    println!(
        "RESULT transport={} queued={queued} deliver={deliver} delivered={delivered} secs={:.3} items_per_s={:.0} cpu_us_per_item={:.1} outbox_cpu_us_per_item={:.1} rss_start_mib={:.1} rss_peak_mib={:.1}",
        if scripted { "scripted" } else { "http" },
        elapsed.as_secs_f64(),
        deliver as f64 / elapsed.as_secs_f64(),
        per_item(cpu),
        per_item(outbox_cpu),
        mib(rss_start),
        mib(rss_peak)
    );
    let duplicates = if scripted {
        progress.totals.attempts.saturating_sub(delivered)
    } else {
        stats.duplicates
    };
    if duplicates != 0 || (queued == deliver && counts.submitted != deliver as u64) {
        eprintln!("FAILED: duplicates or missing deliveries");
        std::process::exit(1);
    }
}
