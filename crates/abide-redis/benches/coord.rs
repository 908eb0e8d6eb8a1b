//! Redis coordination cost: how long one exchange with the shared state takes,
//! and how many exchanges a node makes per item it sends.
//!
//! ```text
//! cargo bench -p abide-redis --bench coord                          # defaults below
//! cargo bench -p abide-redis --bench coord -- --calls 20000 --rate 100 --secs 10
//! ```
//!
//! 1. **Exchange.** `--calls` sequential `EVALSHA`s of the very `sync.lua` a
//!    [`RedisCoordination`] runs (heartbeat, publish, take `--slots` send slots and two
//!    retry tokens), timed one by one on one connection: p50, p99, max. A `PING` loop of
//!    the same length gives the bare loopback round trip beside it.
//! 2. **Per delivered item.** `--nodes` [`RedisCoordination`]s share one key with a
//!    `--rate` pacer each and take every slot they are granted for `--secs` seconds, as a
//!    dispatcher's senders do; the server's `EVALSHA` count (`INFO commandstats`) over the
//!    slots taken is the round trips per item. The count is server-wide: another client's
//!    scripts in the same seconds would inflate it (an upper bound).
//!
//! Against the Redis on 127.0.0.1:6379, keys under a fresh `abide-bench:…` prefix (they
//! expire within an hour; the bench deletes those it knows). Absent Redis: prints
//! `SKIPPED:` and exits 0.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use abide_core::{
    Clock, Coordination, Pacer, PacerConfig, Reservation, RetryBudgetConfig, SystemClock,
};
use abide_redis::{CoordinationTarget, RedisCoordination};
use redis::aio::ConnectionManager;
use support::Args;

/// `sync.lua`'s answer (as `abide_redis` `sync::Reply`).
type Reply = (
    i64,
    i64,
    i64,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    Vec<i64>,
    Vec<String>,
);

const URL: &str = "redis://127.0.0.1:6379";
const USAGE: &str = "\
coord: Redis coordination cost per exchange and per delivered item

cargo bench -p abide-redis --bench coord -- [OPTIONS]
  --calls N   timed exchanges (default 10000, at most 1000000)
  --slots N   slots each exchange takes (default 20: 200 ms of 100/s)
  --nodes N   nodes sharing the key in part 2 (default 1, at most 16)
  --rate R    each node's pacer rate in part 2, per second (default 100)
  --secs S    length of part 2, seconds (default 10, at most 120)";

fn main() {
    let args = Args::parse(USAGE);
    support::only_under_cargo_bench(&args, "coord");
    let calls: usize = args.get("calls", 10_000_usize, USAGE).clamp(1, 1_000_000);
    let slots: u32 = args.get("slots", 20_u32, USAGE).clamp(0, 64);
    let nodes: usize = args.get("nodes", 1_usize, USAGE).clamp(1, 16);
    let rate: f64 = args.get("rate", 100.0_f64, USAGE).clamp(1.0, 10_000.0);
    let secs: u64 = args.get("secs", 10_u64, USAGE).clamp(1, 120);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let made = async { ConnectionManager::new(redis::Client::open(URL)?).await };
        let mut conn = match tokio::time::timeout(Duration::from_secs(3), made).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return println!("SKIPPED: coord: no Redis at {URL} ({e})"),
            Err(_) => return println!("SKIPPED: coord: no Redis at {URL} (timed out)"),
        };
        let prefix = format!("abide-bench:{}", uuid::Uuid::new_v4().simple());
        exchange(&mut conn, &prefix, calls, slots).await;
        per_item(&mut conn, &prefix, nodes, rate, secs).await;
        let keys: Vec<String> = [
            "x:state",
            "x:nodes",
            "x:info",
            "sms:state",
            "sms:nodes",
            "sms:info",
        ]
        .iter()
        .map(|k| format!("{prefix}:{k}"))
        .collect();
        let _: i64 = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    });
}

/// Percentiles (nearest rank) of `d`, sorted in place, in µs.
fn summary(d: &mut [Duration]) -> String {
    d.sort_unstable();
    let at = |q: f64| {
        // The rank is in 0..len by the clamp.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((q * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1;
        d[i].as_secs_f64() * 1e6
    };
    format!(
        "p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        at(0.50),
        at(0.99),
        at(1.0)
    )
}

/// Part 1: `calls` timed exchanges, and as many `PING`s.
async fn exchange(conn: &mut ConnectionManager, prefix: &str, calls: usize, slots: u32) {
    let clock = SystemClock;
    let script = redis::Script::new(include_str!("../src/sync.lua"));
    let key = format!("{prefix}:x");
    let mut times = Vec::with_capacity(calls);
    let mut granted = 0_usize;
    // One warm-up call loads the script (EVAL), the rest are EVALSHA as in the node.
    for i in 0..=calls {
        let mut inv = script.prepare_invoke();
        inv.key(format!("{key}:state"))
            .key(format!("{key}:nodes"))
            .key(format!("{key}:info"));
        // ARGV as `sync.rs` fills it; a rate high enough that the horizon never cuts
        // the batch short, so every call does the full work.
        inv.arg("bench-node")
            .arg(2000)
            .arg("100000")
            .arg("1")
            .arg(slots)
            .arg(0)
            .arg("0")
            .arg("")
            .arg("")
            .arg(1)
            .arg(0)
            .arg(2)
            .arg("0.1")
            .arg("1")
            .arg("20")
            .arg("10")
            .arg("")
            .arg("redis share=1.000 rate=100.00")
            .arg(2_000_000)
            .arg(0)
            .arg("100000")
            .arg(0)
            // A cold start (no lost state to charge), no shared slots held, no listing.
            .arg(0)
            .arg(5_000_000)
            .arg(0)
            .arg("0");
        let t = clock.monotonic();
        let reply: Reply = inv.invoke_async(conn).await.expect("sync.lua");
        if i > 0 {
            times.push(clock.monotonic() - t);
            granted += reply.10.len();
        }
    }
    let mut pings = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = clock.monotonic();
        let _: String = redis::cmd("PING").query_async(conn).await.expect("PING");
        pings.push(clock.monotonic() - t);
    }
    println!(
        "coord bench: Redis at {URL}, release={}",
        !cfg!(debug_assertions)
    );
    println!(
        "  exchange (sync.lua, {slots} slots asked, {:.1} granted on average), {calls} calls: {}",
        granted as f64 / calls as f64,
        summary(&mut times)
    );
    println!("  PING round trip, {calls} calls: {}", summary(&mut pings));
}

/// Server-wide `EVALSHA` + `EVAL` calls so far.
async fn script_calls(conn: &mut ConnectionManager) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Part 2: `nodes` coordinations at `rate` each for `secs`, every granted slot taken.
async fn per_item(conn: &mut ConnectionManager, prefix: &str, nodes: usize, rate: f64, secs: u64) {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let budget = RetryBudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec: 1,
        retry_ratio: 0.1,
    };
    let before = script_calls(conn).await;
    let start = clock.monotonic();
    let end = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for n in 0..nodes {
        let target = CoordinationTarget {
            url: URL.into(),
            prefix: prefix.into(),
            node: format!("bench-{n}"),
            expected_nodes: 1,
        };
        let coord = RedisCoordination::start(&target, "sms", rate, 1.0, budget, Arc::clone(&clock))
            .expect("coordination");
        let clock = Arc::clone(&clock);
        tasks.push(tokio::spawn(async move {
            let pacer = Pacer::new(
                PacerConfig {
                    initial_rate: rate,
                    ..PacerConfig::default()
                },
                clock.monotonic(),
            );
            let mut taken = 0_u64;
            // Bounded: every turn sleeps until a slot or a retry instant, and stops at `end`.
            loop {
                let now = clock.monotonic();
                if now >= end {
                    break;
                }
                coord.pull(&pacer, now);
                let wait = match coord.reserve(&pacer, now, None) {
                    Reservation::Slot(at) => {
                        taken += 1;
                        at
                    }
                    Reservation::Retry(at) | Reservation::PastDeadline(at) => at,
                };
                tokio::time::sleep_until(wait.max(now).into()).await;
                coord.push(&pacer, clock.monotonic());
            }
            (taken, coord.status(&pacer, clock.monotonic()).mode)
        }));
    }
    let mut taken = 0;
    let mut modes = Vec::new();
    for t in tasks {
        let (n, mode) = t.await.expect("node");
        taken += n;
        modes.push(mode.as_str().to_owned());
    }
    let elapsed = clock.monotonic() - start;
    let calls = script_calls(conn).await.saturating_sub(before);
    println!(
        "  per item: {nodes} node(s) at {rate}/s each for {:.1} s: {taken} slots taken ({:.1}/s), {calls} script calls on the server = {:.3} round trips per item; modes at end {modes:?}",
        elapsed.as_secs_f64(),
        taken as f64 / elapsed.as_secs_f64(),
        calls as f64 / taken.max(1) as f64
    );
}
