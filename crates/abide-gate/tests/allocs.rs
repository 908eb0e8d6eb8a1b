//! An admitted decision for a caller already seen allocates nothing: counted with a
//! counting global allocator. The allocator counts every thread, so this is a
//! `harness = false` binary: no test runner threads allocate while it counts.

#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::num::NonZeroU32;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_gate::{Algorithm, Gate, GateSet, RateQuota, Scope};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn main() {
    admitting_a_known_caller_allocates_nothing();
    println!("test admitting_a_known_caller_allocates_nothing ... ok");
}

fn admitting_a_known_caller_allocates_nothing() {
    let rate = RateQuota::per_second(nz(1000));
    for algorithm in Algorithm::ALL {
        let gates = GateSet::builder()
            .with_gate(Gate::rate(
                "key",
                "key_rate",
                Scope::Key,
                rate.with_algorithm(algorithm),
            ))
            .with_gate(Gate::rate("account", "account_rate", Scope::Account, rate))
            .with_gate(Gate::concurrency(
                "conc",
                "concurrency",
                Scope::Key,
                nz(4),
                Duration::from_secs(30),
            ))
            .with_gate(Gate::concurrency(
                "account-conc",
                "account_concurrency",
                Scope::Account,
                nz(8),
                Duration::from_secs(30),
            ))
            .build()
            .unwrap();
        let c = ManualClock::new(UNIX_EPOCH);
        let keys = ["k1", "k2", "k3"];
        let traces = ["idem-1", "idem-2"];
        // First sight of each caller and trace may allocate (entries, slot lists).
        for k in keys {
            for t in traces {
                let a = gates
                    .check_traced(k, Some("acme"), Some(t), c.monotonic())
                    .unwrap();
                for l in a.leases() {
                    gates.release(l);
                }
            }
        }
        let region = Region::new(GLOBAL);
        let mut admitted = 0;
        for i in 0..3000 {
            c.advance(Duration::from_millis(1));
            let k = keys[i % keys.len()];
            let a = if i % 2 == 0 {
                gates.check(k, Some("acme"), c.monotonic())
            } else {
                gates.check_traced(k, Some("acme"), Some(traces[i % 4 / 2]), c.monotonic())
            };
            let a = a.unwrap();
            assert_eq!(a.leases().len(), 2);
            for l in a.leases() {
                assert!(gates.release(l));
            }
            admitted += 1;
        }
        let s = region.change();
        assert_eq!(admitted, 3000);
        assert_eq!(
            (s.allocations, s.reallocations),
            (0, 0),
            "{algorithm}: {s:?}"
        );
    }
}
