//! Politeness on real loopback: the outbox against a rate-limited `abide provider` with
//! far more work queued than the limit allows. Every second it records what the outbox
//! did (attempts, throttled, delivered) and what the provider's limit is now (read from
//! its `GET /v1/quota`, which charges nothing), so a limit that changes mid-run (the
//! script restarts the provider with another rate) is noticed without any coordination.
//!
//! ```text
//! cargo bench -p abide-outbox --bench politeness -- --url http://127.0.0.1:18080 --seconds 60
//! cargo bench -p abide-outbox --bench politeness -- --limit 200 --seconds 30   # in-process
//! ```
//! `benches/politeness.sh` at the repository root drives it against the real binary.
//!
//! Per phase of constant limit it reports the time to converge (the first second from
//! which `--window` consecutive seconds each have throttled ≤ 1 % of attempts and
//! deliveries ≥ 85 % of the limit), and from then to the phase's end: 429s per delivered
//! item, goodput as a fraction of the limit, throttled fraction of attempts.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_outbox::{Config, Dispatcher, DispatcherOptions, SqliteStore, Totals};
use support::Args;

const USAGE: &str = "\
politeness: throttles, goodput and convergence against a rate-limited provider

cargo bench -p abide-outbox --bench politeness -- [OPTIONS]
  --url URL          provider base URL (default: start one in-process with --limit)
  --limit N          in-process provider's key rate, per second (default 200)
  --burst N          in-process provider's key burst (default 10)
  --key KEY          API key (default demo-key)
  --seconds N        run time (default 60)
  --items N          items queued at start (default 100000: the queue never drains)
  --concurrency N    senders (default 20)
  --rate-hint N      the outbox's starting pace, per second (default 1000: far above)
  --window N         seconds of good behaviour that count as converged (default 5)
  --headroom H       [provider.pacer] headroom (default: abide's, 0.97)
  --rate-limit-headers on|off
                     off = [provider.pacer] use_rate_limit_headers = false: learn the
                     limit from throttles alone, as against a provider that advertises
                     nothing (default on)
  --csv PATH         also write the per-second series as CSV";

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    second: u64,
    limit: Option<f64>,
    attempts: u64,
    throttled: u64,
    delivered: u64,
}

/// The provider's per-key rate now, requests per second, from `GET /v1/quota`.
async fn current_limit(client: &reqwest::Client, url: &str, key: &str) -> Option<f64> {
    let resp = client
        .get(format!("{url}/v1/quota"))
        .bearer_auth(key)
        .timeout(Duration::from_millis(500))
        .send()
        .await
        .ok()?;
    let v: serde_json::Value = resp.json().await.ok()?;
    v["gates"].as_array()?.iter().find_map(|g| {
        (g["category"] == "key_rate").then(|| {
            let limit = g["limit"].as_f64()?;
            let window = g["window_secs"].as_f64()?.max(1.0);
            Some(limit / window)
        })?
    })
}

fn main() {
    let args = Args::parse(USAGE);
    support::only_under_cargo_bench(&args, "politeness");
    let seconds: u64 = args.get("seconds", 60, USAGE);
    let items: usize = args.get("items", 100_000, USAGE);
    let concurrency: usize = args.get("concurrency", 20, USAGE);
    let rate_hint: f64 = args.get("rate-hint", 1000.0, USAGE);
    let window: usize = args.get("window", 5, USAGE);
    let limit: u32 = args.get("limit", 200, USAGE);
    let burst: u32 = args.get("burst", 10, USAGE);
    let key = args.opt("key").unwrap_or(abide_fake::DEMO_KEY).to_owned();
    let url = args.opt("url").map(str::to_owned);
    let csv = args.opt("csv").map(str::to_owned);
    let headroom: f64 = args.get(
        "headroom",
        abide_core::PacerConfig::default().headroom,
        USAGE,
    );
    let use_headers = match args.opt("rate-limit-headers").unwrap_or("on") {
        "on" => true,
        "off" => false,
        other => panic!("--rate-limit-headers {other:?}: on or off"),
    };

    std::env::set_var("ABIDE_BENCH_TOKEN", &key);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let samples = rt.block_on(async move {
        let mut _local = None;
        let url = match url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => {
                let mut cfg = abide_fake::ProviderConfig::default();
                cfg.limits.key_rate = Some(abide_fake::Rate {
                    count: limit,
                    per: Duration::from_secs(1),
                });
                cfg.limits.key_burst = Some(burst);
                cfg.limits.account_rate = None;
                cfg.limits.key_concurrency = None;
                let p = abide_fake::spawn(
                    cfg,
                    Arc::new(SystemClock),
                    "127.0.0.1:0".parse().unwrap(),
                )
                .await
                .expect("provider");
                let u = p.url();
                _local = Some(p);
                u
            }
        };
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(tmp.path().join("politeness.db"))
            .await
            .expect("store");
        let config = Config::from_toml_str(&format!(
            r#"[[provider]]
            name = "p"
            base_url = "{url}"
            credentials_env = "ABIDE_BENCH_TOKEN"
            rate_hint = {rate_hint:.1}
            concurrency = {concurrency}
            [provider.pacer]
            headroom = {headroom}
            use_rate_limit_headers = {use_headers}"#
        ))
        .expect("config");
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let d = Dispatcher::new(
            store,
            config,
            Arc::clone(&clock),
            DispatcherOptions {
                seed: Some(7),
                ..DispatcherOptions::default()
            },
        )
        .expect("dispatcher");
        // Keys unique per run: a restarted provider forgets keys, a reused one must not
        // see this run's items as repeats of the last run's.
        let run = abide_outbox::model::new_item_id(clock.now());
        let mut from = 0;
        while from < items {
            let n = 5000.min(items - from);
            d.enqueue(&support::items("p", &run, from, n))
                .await
                .expect("enqueue");
            from += n;
        }

        println!("running: {items} items queued, {seconds} s");
        let probe = reqwest::Client::new();
        let runner = {
            let d = d.clone();
            tokio::spawn(async move {
                d.run_until(tokio::time::sleep(Duration::from_secs(seconds)))
                    .await
            })
        };
        let mut samples = Vec::new();
        let mut prev = Totals::default();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        for second in 0..seconds {
            tick.tick().await;
            let t = d.totals();
            let limit = current_limit(&probe, &url, &key).await;
            samples.push(Sample {
                second,
                limit,
                attempts: t.attempts - prev.attempts,
                throttled: t.throttled - prev.throttled,
                delivered: t.delivered - prev.delivered,
            });
            prev = t;
        }
        let progress = runner.await.expect("join").expect("run");
        println!(
            "run totals: attempts {} throttled {} delivered {} retries {} budget denied {} (over {:.1} s)",
            progress.totals.attempts,
            progress.totals.throttled,
            progress.totals.delivered,
            progress.totals.retries_scheduled,
            progress.totals.budget_denied,
            progress.elapsed.as_secs_f64()
        );
        samples
    });
    drop(rt);
    report(&samples, window, csv.as_deref());
}

fn report(samples: &[Sample], window: usize, csv: Option<&str>) {
    println!("second  limit/s  attempts  throttled  delivered");
    for s in samples {
        println!(
            "{:>6}  {:>7}  {:>8}  {:>9}  {:>9}",
            s.second,
            s.limit.map_or("?".into(), |l| format!("{l:.0}")),
            s.attempts,
            s.throttled,
            s.delivered
        );
    }
    if let Some(path) = csv {
        let mut text = String::from("second,limit_per_s,attempts,throttled,delivered\n");
        for s in samples {
            text.push_str(&format!(
                "{},{},{},{},{}\n",
                s.second,
                s.limit.map_or(String::new(), |l| format!("{l:.0}")),
                s.attempts,
                s.throttled,
                s.delivered
            ));
        }
        std::fs::write(path, text).expect("write csv");
    }

    // Phases of one known limit; seconds with no answer (a provider restarting) join the
    // phase they interrupt and are counted like any other second.
    let mut phases: Vec<(usize, usize, f64)> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        match (s.limit, phases.last_mut()) {
            (Some(l), Some(p)) if (p.2 - l).abs() < 0.5 => p.1 = i + 1,
            (Some(l), _) => phases.push((i, i + 1, l)),
            (None, Some(p)) => p.1 = i + 1,
            (None, None) => {}
        }
    }
    let sum = |r: &[Sample], f: fn(&Sample) -> u64| r.iter().map(f).sum::<u64>();
    let all_att = sum(samples, |s| s.attempts);
    let all_thr = sum(samples, |s| s.throttled);
    let all_del = sum(samples, |s| s.delivered);
    println!(
        "whole run: throttled {:.2} % of attempts, {:.3} 429s per delivered item",
        100.0 * all_thr as f64 / all_att.max(1) as f64,
        all_thr as f64 / all_del.max(1) as f64
    );
    for (n, &(start, end, limit)) in phases.iter().enumerate() {
        let span = &samples[start..end];
        let good = |s: &Sample| {
            s.throttled as f64 <= 0.01 * s.attempts as f64 && s.delivered as f64 >= 0.85 * limit
        };
        let conv = (0..span.len().saturating_sub(window - 1))
            .find(|&i| span[i..i + window].iter().all(good));
        let head = format!(
            "phase {n}: limit {limit:.0}/s, seconds {}..{}",
            span[0].second,
            span[span.len() - 1].second + 1
        );
        let Some(c) = conv else {
            let thr = sum(span, |s| s.throttled);
            let att = sum(span, |s| s.attempts);
            let del = sum(span, |s| s.delivered);
            println!(
                "{head}: NOT converged; throttled {:.2} % of attempts, goodput {:.1} % of the limit",
                100.0 * thr as f64 / att.max(1) as f64,
                100.0 * del as f64 / (limit * span.len() as f64)
            );
            println!("RESULT phase={n} limit={limit:.0} converged=no");
            continue;
        };
        let steady = &span[c..];
        let att = sum(steady, |s| s.attempts);
        let thr = sum(steady, |s| s.throttled);
        let del = sum(steady, |s| s.delivered);
        let goodput = del as f64 / (limit * steady.len() as f64);
        println!(
            "{head}: converged after {c} s; then {} s: {:.4} 429s per delivered item, goodput {:.1} % of the limit, throttled {:.2} % of attempts",
            steady.len(),
            thr as f64 / del.max(1) as f64,
            100.0 * goodput,
            100.0 * thr as f64 / att.max(1) as f64
        );
        println!(
            "RESULT phase={n} limit={limit:.0} converge_s={c} steady_s={} throttles_per_delivered={:.4} goodput_pct={:.1} throttled_pct={:.2}",
            steady.len(),
            thr as f64 / del.max(1) as f64,
            100.0 * goodput,
            100.0 * thr as f64 / att.max(1) as f64
        );
    }
}
