//! Decisions per second for the hot paths of abide-core: classification, pacing, budget
//! (helper B) and header parsing (helper A). One `criterion_group!` lists them all.

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{
    parse_rate_limit, Backoff, Classifier, Clock, ManualClock, Observation, Pacer, PacerConfig,
    RetryAfterPolicy, RetryBudget, RetryBudgetConfig, Verdict, VerdictClass,
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
            body: b"",
        };
        b.iter(|| classifier.classify(black_box(&obs), now, &mut rng));
    });
    g.bench_function("http_429_retry_after", |b| {
        let obs = Observation::Http {
            status: StatusCode::TOO_MANY_REQUESTS,
            headers: &throttled,
            body: b"",
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
        secondary_limit: false,
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

fn bench_parse_retry_after(c: &mut Criterion) {
    let policy = RetryAfterPolicy::default();
    let now = UNIX_EPOCH + Duration::from_secs(1_781_510_400);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut g = c.benchmark_group("parse_retry_after");
    g.throughput(Throughput::Elements(1));
    for (name, value) in [
        ("delay_seconds", &b"120"[..]),
        ("imf_fixdate", b"Mon, 15 Jun 2026 08:02:31 GMT"),
        ("rfc850", b"Monday, 15-Jun-26 08:02:31 GMT"),
        ("asctime", b"Mon Jun 15 08:02:31 2026"),
        ("garbage", b"soon"),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| policy.decide([black_box(value)], now, &mut rng));
        });
    }
    g.finish();
}

fn bench_parse_rate_limit(c: &mut Criterion) {
    let now = UNIX_EPOCH + Duration::from_secs(1_781_510_400);
    let mut ietf = HeaderMap::new();
    ietf.insert(
        "ratelimit-policy",
        HeaderValue::from_static(r#""burst";q=100;w=60, "daily";q=1000;w=86400"#),
    );
    ietf.insert(
        "ratelimit",
        HeaderValue::from_static(r#""burst";r=40;t=10, "daily";r=0;t=3600"#),
    );
    let mut x = HeaderMap::new();
    x.insert("x-ratelimit-limit", HeaderValue::from_static("5000"));
    x.insert("x-ratelimit-remaining", HeaderValue::from_static("4999"));
    x.insert("x-ratelimit-reset", HeaderValue::from_static("1781510460"));
    let mut g = c.benchmark_group("parse_rate_limit");
    g.throughput(Throughput::Elements(1));
    g.bench_function("ietf_two_policies", |b| {
        b.iter(|| parse_rate_limit(black_box(&ietf), now));
    });
    g.bench_function("x_ratelimit_epoch", |b| {
        b.iter(|| parse_rate_limit(black_box(&x), now));
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_classify,
    bench_pacer,
    bench_budget,
    bench_parse_retry_after,
    bench_parse_rate_limit
);
criterion_main!(benches);
