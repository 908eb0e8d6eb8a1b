//! 2,000 logical requests from 40 tokio tasks against `abide provider` at 100/s (burst 10,
//! 20 ms latency): abide-reqwest vs reqwest-retry vs plain reqwest, one after another in
//! one run, each against a fresh provider.
//!
//! ```text
//! cargo bench -p abide-reqwest --bench throughput -- [--runs 3] [--requests 2000]
//!     [--tasks 40] [--limit 100] [--abide-only] [--initial-rate N]
//! ```
//! Per client: 429s per logical request, delivered ÷ (time × limit), requests lost
//! (logical requests that did not end in a 2xx), provider requests per logical request.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{spawn, ProviderConfig, DEMO_KEY};
use abide_reqwest::{AbideMiddleware, Policy};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::policies::ExponentialBackoff;
use reqwest_retry::RetryTransientMiddleware;

#[derive(Clone, Copy)]
enum Kind {
    Abide,
    AbideNoHeaders,
    ReqwestRetry,
    Plain,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Abide => "abide-reqwest",
            Kind::AbideNoHeaders => "abide, no RL hdr",
            Kind::ReqwestRetry => "reqwest-retry",
            Kind::Plain => "plain reqwest",
        }
    }

    fn client(self, initial_rate: Option<f64>) -> ClientWithMiddleware {
        let b = ClientBuilder::new(reqwest::Client::new());
        let mut policy = Policy::builder();
        if let Some(r) = initial_rate {
            policy = policy.with_initial_rate(r);
        }
        match self {
            Kind::Abide => b
                .with(AbideMiddleware::new(policy.build().unwrap()))
                .build(),
            // Rate-limit headers ignored: the pace is learned from 429s alone.
            Kind::AbideNoHeaders => {
                let p = policy.with_rate_limit_headers(false).build();
                b.with(AbideMiddleware::new(p.unwrap())).build()
            }
            // Its documented default set-up: exponential backoff, 3 retries.
            Kind::ReqwestRetry => b
                .with(RetryTransientMiddleware::new_with_policy(
                    ExponentialBackoff::builder().build_with_max_retries(3),
                ))
                .build(),
            Kind::Plain => b.build(),
        }
    }
}

struct Outcome {
    secs: f64,
    delivered: usize,
    throttled: u64,
    requests: u64,
}

async fn run(kind: Kind, n: usize, tasks: usize, limit: u32, initial: Option<f64>) -> Outcome {
    let toml = format!(
        "latency_ms = 20\n[limits]\nkey_rate = \"{limit}/s\"\nkey_burst = 10\n\
         account_rate = \"100000/s\"\nkey_concurrency = 10000\n"
    );
    let cfg = ProviderConfig::from_toml_str(&toml).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let p = spawn(cfg, Arc::clone(&clock), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let url = format!("{}/v1/messages", p.url());
    let client = kind.client(initial);
    let next = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let t0 = clock.monotonic();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (client, url, next, delivered) = (
            client.clone(),
            url.clone(),
            Arc::clone(&next),
            Arc::clone(&delivered),
        );
        handles.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n {
                let r = client
                    .post(&url)
                    .bearer_auth(DEMO_KEY)
                    .header("content-type", "application/json")
                    .body(r#"{"to":"+15550100","text":"hi"}"#)
                    .send()
                    .await;
                if r.is_ok_and(|r| r.status().is_success()) {
                    delivered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let secs = (clock.monotonic() - t0).as_secs_f64();
    let s = p.stats();
    p.shutdown().await.unwrap();
    Outcome {
        secs,
        delivered: delivered.load(Ordering::Relaxed),
        throttled: s.rejected_by_status.get(&429).copied().unwrap_or(0),
        requests: s.requests,
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect(name))
}

#[tokio::main]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let (runs, n, tasks) = (
        arg("--runs", 3),
        arg("--requests", 2000),
        arg("--tasks", 40),
    );
    let limit = arg("--limit", 100) as u32;
    // abide's starting pace (default: the policy's, 10/s).
    let initial = match arg("--initial-rate", 0) {
        0 => None,
        r => Some(r as f64),
    };
    println!("{n} logical requests, {tasks} tasks, provider {limit}/s burst 10, 20 ms latency");
    println!(
        "{:<16} {:>3} {:>8} {:>10} {:>12} {:>6} {:>11}",
        "client", "run", "time s", "429/req", "of limit", "lost", "sent/req"
    );
    for run_no in 1..=runs {
        let kinds: &[Kind] = if std::env::args().any(|a| a == "--abide-only") {
            &[Kind::Abide, Kind::AbideNoHeaders]
        } else {
            &[
                Kind::Abide,
                Kind::AbideNoHeaders,
                Kind::ReqwestRetry,
                Kind::Plain,
            ]
        };
        for &kind in kinds {
            let o = run(kind, n, tasks, limit, initial).await;
            println!(
                "{:<16} {:>3} {:>8.1} {:>10.4} {:>12.3} {:>6} {:>11.3}",
                kind.name(),
                run_no,
                o.secs,
                o.throttled as f64 / n as f64,
                o.delivered as f64 / (o.secs * f64::from(limit)),
                n - o.delivered,
                o.requests as f64 / n as f64,
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
