//! PostgreSQL claim/complete throughput with 1, 2 and 3 nodes on one database (issue 15).
//!
//! ```text
//! cargo bench -p abide-outbox --bench pg_nodes                        # N = 1, 2, 3; 3 runs each
//! cargo bench -p abide-outbox --bench pg_nodes -- --items 20000 --runs 5 --nodes 3
//! ```
//!
//! Each run enqueues `--items` items in a fresh schema of `test` on 127.0.0.1:5432, then
//! starts N dispatchers, each with its own connection pool and lease owner (as N
//! `abide send` processes would be, but in one process on one 2-worker tokio runtime),
//! with the scripted transport answering `202` in memory: what is measured is claims
//! (`FOR UPDATE SKIP LOCKED`), the session's decisions and completions. Items/s from the
//! dispatchers' start until every item is delivered; the schema is dropped after. Absent
//! PostgreSQL: prints `SKIPPED:` and exits 0.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, PostgresStore, Response, ScriptedTransport, Transport,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Executor;
use support::Args;

const URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const USAGE: &str = "\
pg_nodes: claim/complete items/s with 1..N dispatchers on one PostgreSQL

cargo bench -p abide-outbox --bench pg_nodes -- [OPTIONS]
  --items N        items per run (default 10000)
  --runs N         runs per node count (default 3)
  --nodes N        largest node count (default 3, at most 8)
  --concurrency N  senders per node (default 32)";

fn main() {
    let args = Args::parse(USAGE);
    support::only_under_cargo_bench(&args, "pg_nodes");
    let items: usize = args.get("items", 10_000_usize, USAGE).clamp(1, 1_000_000);
    let runs: usize = args.get("runs", 3_usize, USAGE).clamp(1, 50);
    let max_nodes: usize = args.get("nodes", 3_usize, USAGE).clamp(1, 8);
    let concurrency: usize = args.get("concurrency", 32_usize, USAGE).clamp(1, 1024);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let admin = match PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(3))
            .connect(URL)
            .await
        {
            Ok(p) => p,
            Err(e) => return println!("SKIPPED: pg_nodes: PostgreSQL at {URL} unreachable: {e}"),
        };
        println!(
            "pg_nodes bench: PostgreSQL at {URL}, scripted transport, {items} items per run, {concurrency} senders per node, release={}",
            !cfg!(debug_assertions)
        );
        for nodes in 1..=max_nodes {
            let mut rates = Vec::new();
            for _ in 0..runs {
                let schema = format!("abide_bench_{}", uuid::Uuid::new_v4().simple());
                admin
                    .execute(format!("CREATE SCHEMA {schema}").as_str())
                    .await
                    .expect("create schema");
                let rate = run(&schema, nodes, items, concurrency).await;
                admin
                    .execute(format!("DROP SCHEMA {schema} CASCADE").as_str())
                    .await
                    .expect("drop schema");
                rates.push(rate);
            }
            let shown: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
            let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rates.iter().copied().fold(0.0, f64::max);
            println!(
                "RESULT nodes={nodes} items_per_s=[{}] min={lo:.0} max={hi:.0}",
                shown.join(", ")
            );
        }
    });
}

/// One run: `items` enqueued, then `nodes` dispatchers until all are delivered; items/s.
async fn run(schema: &str, nodes: usize, items: usize, concurrency: usize) -> f64 {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let config = Config::from_toml_str(&format!(
        r#"[[provider]]
        name = "fake"
        base_url = "http://127.0.0.1:9"
        rate_hint = 1000000.0
        concurrency = {concurrency}"#
    ))
    .expect("config");
    let noop: Arc<dyn Transport> = Arc::new(ScriptedTransport::new(Arc::clone(&clock), |_, _| {
        Response::status(202)
    }));
    let mut ds = Vec::new();
    for n in 0..nodes {
        let opts = PgConnectOptions::from_str(URL)
            .unwrap()
            .options([("search_path", schema)])
            .application_name(schema);
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect_with(opts)
            .await
            .expect("pool");
        let store = PostgresStore::from_pool(pool).await.expect("store");
        let opts = DispatcherOptions {
            seed: Some(n as u64 + 1),
            owner: Some(format!("bench-node-{n}")),
            ..DispatcherOptions::default()
        };
        let noop = Arc::clone(&noop);
        let d =
            Dispatcher::with_transports(store, config.clone(), Arc::clone(&clock), opts, |_| {
                Arc::clone(&noop)
            })
            .expect("dispatcher");
        ds.push(d);
    }
    let mut from = 0;
    while from < items {
        let n = 5000.min(items - from);
        ds[0]
            .enqueue(&support::items("fake", "bench", from, n))
            .await
            .expect("enqueue");
        from += n;
    }
    let all = Arc::new(ds.clone());
    let t0 = clock.monotonic();
    let mut tasks = Vec::new();
    for d in ds {
        let all = Arc::clone(&all);
        tasks.push(tokio::spawn(async move {
            // Stops once every node together has delivered every item (polled every 2 ms).
            let stop = async move {
                while all.iter().map(|d| d.totals().delivered).sum::<u64>() < items as u64 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            };
            d.run_until(stop).await.expect("run")
        }));
    }
    let mut attempts = 0;
    let mut delivered = 0;
    for t in tasks {
        let p = t.await.expect("node");
        attempts += p.totals.attempts;
        delivered += p.totals.delivered;
    }
    let elapsed = clock.monotonic() - t0;
    let rate = items as f64 / elapsed.as_secs_f64();
    println!(
        "  nodes={nodes}: {delivered} delivered ({attempts} attempts) in {:.3} s = {rate:.0} items/s",
        elapsed.as_secs_f64()
    );
    if delivered != items as u64 || attempts != delivered {
        eprintln!("FAILED: {delivered} delivered, {attempts} attempts, {items} items");
        std::process::exit(1);
    }
    rate
}
