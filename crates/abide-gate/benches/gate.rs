//! In-process gate decisions, side by side with `governor` in the same run.
//!
//! `cargo bench -p abide-gate --bench gate` (see BENCHMARKS.md). Before criterion runs, the
//! bench counts heap allocations per admitted decision with a counting global allocator
//! (`stats_alloc`, so the bench needs no `unsafe`) and prints them.
//!
//! The gate is handed `now` (as the server hands it the injected clock's reading); governor
//! reads its own clock inside `check`. Instants advance 1 µs per decision so the rate
//! arithmetic runs for real while every decision admits.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::alloc::System;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_gate::{Gate, GateSet, RateQuota, Scope};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use governor::{Quota, RateLimiter};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

/// Key rate, account rate and key concurrency: the provider's default shape, with limits
/// high enough that every benchmarked decision admits.
fn three_gates() -> GateSet {
    let rate = RateQuota::per_second(nz(2_000_000));
    GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate))
        .with_gate(Gate::rate("account", "account_rate", Scope::Account, rate))
        .with_gate(Gate::concurrency(
            "conc",
            "concurrency",
            Scope::Key,
            nz(4),
            Duration::from_secs(30),
        ))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn one_gate() -> GateSet {
    let rate = RateQuota::per_second(nz(2_000_000));
    GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn base() -> Instant {
    ManualClock::new(UNIX_EPOCH).monotonic()
}

/// One decision: check, then give the lease back (the request is over). True if admitted.
fn decide(g: &GateSet, key: &str, account: &str, now: Instant) -> bool {
    match g.check(key, Some(account), now) {
        Ok(a) => {
            for l in a.leases() {
                g.release(l);
            }
            true
        }
        Err(_) => false,
    }
}

fn keys(prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("{prefix}k{i}"), format!("{prefix}a{}", i % 10)))
        .collect()
}

/// Allocations per admitted three-gate decision, after each caller's first sight.
fn count_allocations() {
    let g = three_gates();
    let ks = keys("", 1000);
    let t0 = base();
    for (i, (k, a)) in ks.iter().enumerate() {
        assert!(decide(&g, k, a, t0 + Duration::from_micros(i as u64)));
    }
    let n = 100_000u64;
    let region = Region::new(GLOBAL);
    let mut admitted = 0u64;
    for i in 0..n {
        let (k, a) = &ks[i as usize % ks.len()];
        admitted += u64::from(decide(&g, k, a, t0 + Duration::from_micros(1000 + i)));
    }
    let s = region.change();
    println!(
        "allocations: {} in {n} three-gate decisions ({admitted} admitted), {} bytes",
        s.allocations + s.reallocations,
        s.bytes_allocated
    );
    let region = Region::new(GLOBAL);
    let a = g.check(&ks[0].0, Some(&ks[0].1), t0 + Duration::from_secs(1));
    let headers = a.as_ref().map(|a| a.headers().len()).unwrap_or_default();
    drop(a);
    println!(
        "allocations: {} for one admit with its RateLimit headers formatted ({headers} fields)",
        region.change().allocations
    );
}

fn single_thread(c: &mut Criterion) {
    count_allocations();
    let mut grp = c.benchmark_group("decision");
    let t0 = base();

    let g = three_gates();
    let mut i = 0u64;
    grp.bench_function("abide/three_gates/1_key", |b| {
        b.iter(|| {
            i += 1;
            black_box(decide(&g, "k", "a", t0 + Duration::from_micros(i)))
        })
    });
    let ks = keys("", 1000);
    grp.bench_function("abide/three_gates/1000_keys", |b| {
        b.iter(|| {
            i += 1;
            let (k, a) = &ks[i as usize % 1000];
            black_box(decide(&g, k, a, t0 + Duration::from_micros(i)))
        })
    });
    grp.bench_function("abide/three_gates/1_key/admit_with_headers", |b| {
        b.iter(|| {
            i += 1;
            let a = g.check("k", Some("a"), t0 + Duration::from_micros(i));
            let h = a.as_ref().ok().map(|a| a.headers());
            if let Ok(a) = &a {
                for l in a.leases() {
                    g.release(l);
                }
            }
            black_box(h)
        })
    });
    let tight = GateSet::builder()
        .with_gate(Gate::rate(
            "key",
            "key_rate",
            Scope::Key,
            RateQuota::per_second(nz(1)),
        ))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = tight.check("k", None, t0);
    grp.bench_function("abide/refusal_with_headers", |b| {
        b.iter(|| {
            let r = tight.check("k", None, t0);
            black_box(r.err().map(|r| r.headers()))
        })
    });

    let g1 = one_gate();
    grp.bench_function("abide/one_gate/1_key", |b| {
        b.iter(|| {
            i += 1;
            black_box(g1.check("k", None, t0 + Duration::from_micros(i)).is_ok())
        })
    });
    grp.bench_function("abide/one_gate/1000_keys", |b| {
        b.iter(|| {
            i += 1;
            let k = &ks[i as usize % 1000].0;
            black_box(g1.check(k, None, t0 + Duration::from_micros(i)).is_ok())
        })
    });

    let quota = Quota::per_second(nz(2_000_000));
    let direct = RateLimiter::direct(quota);
    grp.bench_function("governor/direct/1_key", |b| {
        b.iter(|| black_box(direct.check().is_ok()))
    });
    let keyed = RateLimiter::keyed(quota);
    grp.bench_function("governor/keyed/1000_keys", |b| {
        b.iter(|| {
            i += 1;
            black_box(keyed.check_key(&ks[i as usize % 1000].0).is_ok())
        })
    });
    let accounts = RateLimiter::keyed(quota);
    grp.bench_function("governor/keyed_key_and_account/1000_keys", |b| {
        b.iter(|| {
            i += 1;
            let (k, a) = &ks[i as usize % 1000];
            black_box(keyed.check_key(k).is_ok() && accounts.check_key(a).is_ok())
        })
    });
    grp.finish();
}

/// `threads` threads deciding for their own callers on one shared set; one criterion
/// "element" is one decision, so the reported throughput is decisions per second.
fn run_threads<F>(threads: usize, iters: u64, f: F) -> Duration
where
    F: Fn(usize, u64) + Sync,
{
    let start = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    let clock = abide_core::SystemClock;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (start, done, f) = (&start, &done, &f);
            s.spawn(move || {
                start.wait();
                for i in 0..iters {
                    f(t, i);
                }
                done.wait();
            });
        }
        start.wait();
        let t0 = clock.monotonic();
        done.wait();
        clock.monotonic() - t0
    })
}

/// CPU time per decision on each thread, one thread alone and two at once (1000 keys each).
/// On a machine shared with other builds, wall-clock throughput of two threads says as much
/// about the scheduler as about the gate; what contention costs shows as CPU per decision
/// rising when a second thread decides on the same set.
fn cpu_per_decision() {
    let t0 = base();
    for n in [1usize, 2] {
        let g = three_gates();
        let ks: Vec<_> = (0..n).map(|t| keys(&format!("t{t}-"), 1000)).collect();
        let iters = 2_000_000u64;
        let start = Barrier::new(n);
        let per: Vec<f64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|t| {
                    let (g, ks, start) = (&g, &ks, &start);
                    s.spawn(move || {
                        start.wait();
                        let cpu = cpu_time::ThreadTime::now();
                        for i in 0..iters {
                            let (k, a) = &ks[t][i as usize % 1000];
                            black_box(decide(g, k, a, t0 + Duration::from_micros(i)));
                        }
                        cpu.elapsed().as_nanos() as f64 / iters as f64
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(f64::NAN))
                .collect()
        });
        let per: Vec<String> = per.iter().map(|ns| format!("{ns:.0} ns")).collect();
        println!(
            "cpu per three-gate decision, {n} thread(s) at once: {}",
            per.join(", ")
        );
    }
}

fn threads(c: &mut Criterion) {
    cpu_per_decision();
    let mut grp = c.benchmark_group("threads");
    let t0 = base();
    // Instants keep moving forward across criterion's calls (each call's `i` starts at 0):
    // replaying earlier instants after a long warm-up call put every key's GCRA schedule a
    // second ahead of `now`, so the decisions measured were refusals (and their allocations).
    let refused = AtomicU64::new(0);
    for n in [1usize, 2] {
        grp.throughput(Throughput::Elements(n as u64));
        let g = Arc::new(three_gates());
        let clock = AtomicU64::new(0);
        let ks: Vec<_> = (0..n).map(|t| keys(&format!("t{t}-"), 1000)).collect();
        let decide_at = |k: &str, a: &str, us: u64| {
            if !decide(&g, k, a, t0 + Duration::from_micros(us)) {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        };
        grp.bench_with_input(
            BenchmarkId::new("abide/three_gates/1000_keys_per_thread", n),
            &n,
            |b, &n| {
                b.iter_custom(|iters| {
                    let from = clock.fetch_add(iters, Ordering::Relaxed);
                    run_threads(n, iters, |t, i| {
                        let (k, a) = &ks[t][i as usize % 1000];
                        decide_at(k, a, from + i);
                    })
                })
            },
        );
        grp.bench_with_input(
            BenchmarkId::new("abide/three_gates/1_key_per_thread", n),
            &n,
            |b, &n| {
                b.iter_custom(|iters| {
                    let from = clock.fetch_add(iters, Ordering::Relaxed);
                    run_threads(n, iters, |t, i| {
                        let (k, a) = &ks[t][0];
                        decide_at(k, a, from + i);
                    })
                })
            },
        );
        let keyed = RateLimiter::keyed(Quota::per_second(nz(2_000_000)));
        grp.bench_with_input(
            BenchmarkId::new("governor/keyed/1000_keys_per_thread", n),
            &n,
            |b, &n| {
                b.iter_custom(|iters| {
                    run_threads(n, iters, |t, i| {
                        black_box(keyed.check_key(&ks[t][i as usize % 1000].0).is_ok());
                    })
                })
            },
        );
    }
    grp.finish();
    println!(
        "refused in the threads benches: {} (every measured decision should admit)",
        refused.into_inner()
    );
}

criterion_group!(benches, single_thread, threads);
criterion_main!(benches);
