//! Instructions per three-gate decision, counted by callgrind (deterministic, unlike wall
//! clock on a shared machine). Runs `N` decisions (first argument, default 100,000) over
//! 1,000 keys after a warm-up that has seen every key; run it twice with different `N` and
//! divide the difference of the totals by the difference of `N`:
//!
//! ```text
//! cargo bench -p abide-gate --bench instructions --no-run
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/instructions-* 100000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/instructions-* 200000
//! ```

#![allow(missing_docs)]

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};

use abide_gate::{Gate, GateSet, RateQuota, Scope};

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let rate = RateQuota::per_second(NonZeroU32::new(2_000_000).unwrap_or(NonZeroU32::MIN));
    let g = GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate))
        .with_gate(Gate::rate("account", "account_rate", Scope::Account, rate))
        .with_gate(Gate::concurrency(
            "conc",
            "concurrency",
            Scope::Key,
            NonZeroU32::new(4).unwrap_or(NonZeroU32::MIN),
            Duration::from_secs(30),
        ))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("k{i}"), format!("a{}", i % 10)))
        .collect();
    let t0 = ManualClock::new(UNIX_EPOCH).monotonic();
    let mut admitted = 0u64;
    for i in 0..(1000 + n) {
        let (k, a) = &keys[i as usize % keys.len()];
        if let Ok(adm) = g.check(k, Some(a), t0 + Duration::from_micros(i)) {
            for l in adm.leases() {
                g.release(l);
            }
            admitted += 1;
        }
    }
    black_box(admitted);
    assert_eq!(admitted, 1000 + n);
}
