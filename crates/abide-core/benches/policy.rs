//! Decisions per second for the hot paths of abide-core: classification, pacing, budget
//! (helper B) and header parsing (helper A). One `criterion_group!` lists them all.

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{
    Backoff, Classifier, Clock, ManualClock, Observation, Pacer, PacerConfig, RetryBudget,
    RetryBudgetConfig, Verdict, VerdictClass,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use http::{HeaderMap, HeaderValue, StatusCode};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn bench_classify(c: &mut Criterion) {
    let classifier = Classifier::default();
    let now = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let empty = HeaderMap::new();
    let mut throttled = HeaderMap::new();
    throttled.insert("retry-after", HeaderValue::from_static("30"));
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(1));
    g.bench_function("http_200_no_headers", |b| {
        let obs = Observation::Http {
            status: StatusCode::OK,
            headers: &empty,
        };
        b.iter(|| classifier.classify(black_box(&obs), now, &mut rng));
    });
    g.bench_function("http_429_retry_after", |b| {
        let obs = Observation::Http {
            status: StatusCode::TOO_MANY_REQUESTS,
            headers: &throttled,
        };
        b.iter(|| classifier.classify(black_box(&obs), now, &mut rng));
    });
    g.bench_function("smpp_throttled", |b| {
        let obs = Observation::Smpp {
            command_status: 0x58,
        };
        b.iter(|| classifier.classify(black_box(&obs), now, &mut rng));
    });
    g.finish();
}

fn bench_pacer(c: &mut Criterion) {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let pacer = Pacer::new(PacerConfig::default(), t0);
    let ok = Verdict {
        class: VerdictClass::Success,
        reason: "http_200".into(),
        retry_after: None,
        rate_limit: None,
    };
    let mut g = c.benchmark_group("pacer");
    g.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    g.bench_function("reserve", |b| {
        b.iter(|| {
            i += 1;
            pacer.reserve(black_box(t0 + Duration::from_micros(i)))
        });
    });
    g.bench_function("on_verdict_success", |b| {
        b.iter(|| {
            i += 1;
            pacer.on_verdict(black_box(t0 + Duration::from_micros(i)), &ok);
        });
    });
    g.finish();
}

fn bench_budget(c: &mut Criterion) {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let budget = RetryBudget::new(RetryBudgetConfig::default(), t0);
    let backoff = Backoff::default();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut g = c.benchmark_group("budget");
    g.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    g.bench_function("deposit_and_try_withdraw", |b| {
        b.iter(|| {
            i += 1;
            let now = t0 + Duration::from_micros(i);
            budget.deposit(now);
            budget.try_withdraw(black_box(now))
        });
    });
    g.bench_function("backoff_full_jitter", |b| {
        b.iter(|| backoff.delay(black_box(7), None, &mut rng));
    });
    g.finish();
}

criterion_group!(benches, bench_classify, bench_pacer, bench_budget);
criterion_main!(benches);
