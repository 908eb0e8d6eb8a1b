//! Per-request cost of the middleware when nothing throttles: `GET /healthz` on a loopback
//! `abide provider`, plain reqwest vs reqwest with abide-reqwest. The abide policy's pacer
//! is opened to 1,000,000/s so that only the middleware's own work (host lookup, session
//! poll and answer, classification, header copies) is measured, not a pace.
//!
//! ```text
//! cargo bench -p abide-reqwest --bench overhead
//! ```

#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::Arc;

use abide_core::{Clock, SystemClock};
use abide_fake::{spawn, ProviderConfig};
use abide_reqwest::{AbideMiddleware, Policy};
use criterion::{criterion_group, criterion_main, Criterion};

fn overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let p = rt
        .block_on(spawn(
            ProviderConfig::default(),
            clock,
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    let url = format!("{}/healthz", p.url());
    let plain = reqwest::Client::new();
    let policy = Policy::builder()
        .with_initial_rate(1_000_000.0)
        .with_max_rate(1_000_000.0)
        .build()
        .unwrap();
    let abide = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(AbideMiddleware::new(policy))
        .build();
    let mut g = c.benchmark_group("get_healthz");
    g.bench_function("plain reqwest", |b| {
        b.to_async(&rt).iter(|| async {
            let r = plain.get(&url).send().await.unwrap();
            assert!(r.status().is_success());
        })
    });
    g.bench_function("abide-reqwest", |b| {
        b.to_async(&rt).iter(|| async {
            let r = abide.get(&url).send().await.unwrap();
            assert!(r.status().is_success());
        })
    });
    g.finish();
    drop(p);
}

criterion_group!(benches, overhead);
criterion_main!(benches);
