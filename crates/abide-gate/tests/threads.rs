//! The gate under threads: callers have their own locked entries in a lock-free map, a
//! decision asks every gate before it charges any, and idle entries are swept while others
//! decide. None of that may let more through than the quotas allow.
//! Time is virtual (`ManualClock`); every loop is bounded.

#![allow(clippy::unwrap_used)]

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_gate::{Gate, GateSet, RateQuota, Scope};

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn t0() -> Instant {
    ManualClock::new(UNIX_EPOCH).monotonic()
}

/// `n` per `secs` seconds with `burst` back to back.
fn rate(n: u32, secs: u64, burst: u32) -> RateQuota {
    RateQuota::new(nz(n), Duration::from_secs(secs))
        .unwrap()
        .with_burst(nz(burst))
}

fn remaining(g: &GateSet, key: &str, account: Option<&str>, now: Instant) -> Vec<u32> {
    g.quota(key, account, now)
        .iter()
        .map(|s| s.remaining)
        .collect()
}

#[test]
fn threads_on_one_key_at_one_instant_admit_exactly_the_burst() {
    let g = GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate(10, 1, 50)))
        .with_gate(Gate::rate(
            "account",
            "account_rate",
            Scope::Account,
            rate(1000, 1, 1000),
        ))
        .build()
        .unwrap();
    let now = t0();
    let admitted = AtomicU32::new(0);
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                start.wait();
                for _ in 0..200 {
                    if g.check("k", Some("acme"), now).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(admitted.into_inner(), 50, "800 tries, burst 50");
    // The account was charged once per admission, not per try.
    assert_eq!(remaining(&g, "k", Some("acme"), now), vec![0, 950]);
}

#[test]
fn threads_on_one_key_over_virtual_time_stay_within_quota_plus_burst() {
    // 100/s, burst 10: over instants spanning 2 s, at most 2 s × 100 + 10 admitted, whatever
    // order the threads' instants arrive in (GCRA's TAT only moves forward).
    let g = GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate(100, 1, 10)))
        .build()
        .unwrap();
    let base = t0();
    let admitted = AtomicU32::new(0);
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (g, admitted, start) = (&g, &admitted, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..2000u64 {
                    // Each thread walks the same 2 s in 1 ms steps, offset by a quarter.
                    let at = base + Duration::from_micros(i * 1000 + t * 250);
                    if g.check("k", None, at).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let n = admitted.into_inner();
    // The instants span [0, 1999.75 ms]: (1.99975 s × 100/s) + 10 = 209.
    assert!(n <= 209, "admitted {n}");
    // And the gate is no stingier than one thread would be (200 fresh intervals + burst).
    assert!(n >= 200, "admitted {n}");
}

#[test]
fn a_refusal_by_the_account_leaves_the_key_gates_uncharged() {
    let g = GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate(5, 10, 5)))
        .with_gate(Gate::concurrency(
            "conc",
            "concurrency",
            Scope::Key,
            nz(3),
            Duration::from_secs(30),
        ))
        .with_gate(Gate::rate(
            "account",
            "account_rate",
            Scope::Account,
            rate(1, 10, 1),
        ))
        .build()
        .unwrap();
    let now = t0();
    let first = g.check_traced("k", Some("acme"), Some("A"), now).unwrap();
    let before = remaining(&g, "k", Some("acme"), now);
    assert_eq!(before, vec![4, 2, 0]);
    // The account refuses: the key's rate gate and its slots (a new one for B, a second
    // ticket on A's) are not charged.
    for trace in ["B", "A"] {
        let no = g
            .check_traced("k", Some("acme"), Some(trace), now)
            .unwrap_err();
        assert_eq!(no.category(), "account_rate");
        assert_eq!(remaining(&g, "k", Some("acme"), now), before, "{trace}");
    }
    // A's slot holds only the first ticket: releasing it frees the slot.
    assert!(g.release(&first.leases()[0]));
    assert_eq!(remaining(&g, "k", Some("acme"), now), vec![4, 3, 0]);
}

#[test]
fn threads_of_one_account_never_hold_more_slots_or_spend_more_than_it_has() {
    // Four keys of one account, each thread its own key: the account's 6 slots and its
    // burst of 40 bound them all together; a refusal by either scope charges neither.
    let g = GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate(1, 100, 15)))
        .with_gate(Gate::concurrency(
            "conc",
            "concurrency",
            Scope::Key,
            nz(2),
            Duration::from_secs(30),
        ))
        .with_gate(Gate::rate(
            "account",
            "account_rate",
            Scope::Account,
            rate(1, 100, 40),
        ))
        .with_gate(Gate::concurrency(
            "account-conc",
            "account_concurrency",
            Scope::Account,
            nz(6),
            Duration::from_secs(30),
        ))
        .build()
        .unwrap();
    let now = t0();
    let admitted = AtomicU32::new(0);
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (g, admitted, start) = (&g, &admitted, &start);
            s.spawn(move || {
                let key = format!("k{t}");
                let mut held = Vec::new();
                start.wait();
                for i in 0..300 {
                    if let Ok(a) = g.check(&key, Some("acme"), now) {
                        admitted.fetch_add(1, Ordering::Relaxed);
                        held.push(a.leases().to_vec());
                    }
                    // Give back the oldest reservation every third try.
                    if i % 3 == 2 && !held.is_empty() {
                        for l in held.remove(0) {
                            assert!(g.release(&l));
                        }
                    }
                }
                for ls in held {
                    for l in ls {
                        assert!(g.release(&l));
                    }
                }
            });
        }
    });
    let n = admitted.into_inner();
    assert!(n <= 40, "account burst 40, admitted {n}");
    assert!(n >= 15, "one key alone gets its 15, admitted {n}");
    // Everything was released: every slot is free again, and the account spent exactly
    // what was admitted (refused tries charged no key).
    let keys_spent: u32 = (0..4)
        .map(|t| 15 - remaining(&g, &format!("k{t}"), Some("acme"), now)[0])
        .sum();
    let r = remaining(&g, "k0", Some("acme"), now);
    assert_eq!((r[1], r[3]), (2, 6), "{r:?}");
    assert_eq!(40 - r[2], n);
    assert_eq!(keys_spent, n);
}

#[test]
fn sweeping_forgets_idle_callers_and_keeps_busy_ones_while_threads_decide() {
    // The hot key's quota comes back only after 1,000 s, so it is never idle here; the
    // creator walks forward 2 s per new caller, so every earlier caller is idle by then and
    // sweeps (from 4,096 entries on) forget them while the deciders run.
    let g = GateSet::builder()
        .with_gate(Gate::rate("key", "key_rate", Scope::Key, rate(1, 1000, 30)))
        .build()
        .unwrap();
    let base = t0();
    let admitted = AtomicU32::new(0);
    let start = Barrier::new(3);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                start.wait();
                for _ in 0..3000 {
                    if g.check("hot", None, base).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        s.spawn(|| {
            start.wait();
            for i in 0..10_000u64 {
                let at = base + Duration::from_secs(2 * i);
                assert!(g.check(&format!("c{i}"), None, at).is_ok());
            }
        });
    });
    assert_eq!(
        admitted.into_inner(),
        30,
        "the hot key's state survived every sweep"
    );
    // Sweeps ran: far fewer than 10,001 callers are tracked.
    let debug = format!("{g:?}");
    let tracked: usize = debug
        .split("key_entries: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(tracked < 9000, "{debug}");
    assert!(g.check("hot", None, base).is_err());
}

#[test]
fn an_admission_reports_every_gate_in_the_sets_order_as_the_quota_endpoint_does() {
    // A decision visits the key's gates, then the account's, and leaves GCRA's units to be
    // computed from the reset when shown: what it reports must still be the set's order and
    // the quota endpoint's numbers, for every algorithm, refusals in between.
    for a in abide_gate::Algorithm::ALL {
        let g = GateSet::builder()
            .with_gate(Gate::rate(
                "account",
                "account_rate",
                Scope::Account,
                rate(7, 3, 4),
            ))
            .with_gate(Gate::rate(
                "key",
                "key_rate",
                Scope::Key,
                rate(5, 2, 3).with_algorithm(a),
            ))
            .with_gate(Gate::concurrency(
                "conc",
                "concurrency",
                Scope::Key,
                nz(3),
                Duration::from_secs(30),
            ))
            .build()
            .unwrap();
        let mut now = t0();
        let (mut admitted, mut refused) = (0, 0);
        for _ in 0..40 {
            match g.check("k", Some("acme"), now) {
                Ok(adm) => {
                    admitted += 1;
                    let shown = adm.statuses();
                    let quota = g.quota("k", Some("acme"), now);
                    let names: Vec<_> = shown.iter().map(|s| s.name.as_str()).collect();
                    assert_eq!(names, ["account", "key", "conc"], "{a}");
                    for (s, q) in shown.iter().zip(&quota) {
                        assert_eq!((s.remaining, s.reset), (q.remaining, q.reset), "{a} {s:?}");
                    }
                    for l in adm.leases() {
                        assert!(g.release(l));
                    }
                }
                Err(_) => refused += 1,
            }
            now += Duration::from_millis(90);
        }
        assert!(
            admitted > 5 && refused > 5,
            "{a}: {admitted} admitted, {refused} refused"
        );
    }
}
