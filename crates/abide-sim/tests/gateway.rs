//! The gateway scenarios: what a gateway's answers do to a population of clients.

#![allow(clippy::unwrap_used)]

use abide_sim::gateway::{Cell, Comparison};
use abide_sim::PolicyKind;

fn cells(c: &Comparison, p: PolicyKind) -> [Cell; 3] {
    let (_, cells) = c.rows.iter().find(|(q, _)| *q == p).unwrap();
    [cells[0], cells[1], cells[2]]
}

#[test]
fn an_honest_reset_stops_the_storm_of_the_clients_that_read_it() {
    let c = Comparison::run(&PolicyKind::ALL, 42);
    println!("{c}");
    // Clients that read Retry-After: without it they guess and hammer; with each gate's own
    // reset, rounded up, they wait for the window (the seed's 1,050 -> 7 shape).
    for p in [
        PolicyKind::HonourRetryAfter,
        PolicyKind::IntegerOnly,
        PolicyKind::Abide,
    ] {
        let [bare, reset, _] = cells(&c, p);
        assert!(bare.peak_429s >= 5 * reset.peak_429s.max(1), "{p}\n{c}");
    }
    // Holding requests until their slot, with room for as many as the callers have in
    // flight (40 workers, 50 places), refuses nobody: every policy does at least as well.
    for p in PolicyKind::ALL {
        let [_, reset, delay] = cells(&c, p);
        assert!(reset.peak_429s >= delay.peak_429s, "{p}\n{c}");
    }
    // Clients that ignore Retry-After are not helped by it: the same 429s either way.
    for p in [
        PolicyKind::NoRetry,
        PolicyKind::FixedRetries,
        PolicyKind::FullJitter,
    ] {
        let [bare, reset, _] = cells(&c, p);
        assert_eq!(bare.peak_429s, reset.peak_429s, "{p}\n{c}");
    }
    // The population as a whole: bare > honest reset >= delay.
    let [bare, reset, delay] = c.population_peak_429s()[..] else {
        panic!("three gateways: {c}");
    };
    assert!(
        bare > reset && reset >= delay && bare >= 10 * delay.max(1),
        "{c}"
    );
}

#[test]
fn a_delaying_gateway_adds_at_most_its_bound_to_an_accepted_request() {
    let c = Comparison::run(&[PolicyKind::NoRetry, PolicyKind::Abide], 7);
    for (p, cells) in &c.rows {
        // 5 s held at most, plus a round trip of at most 1.4 x 50 ms.
        let p99 = cells[2].p99_accepted_secs.unwrap();
        assert!(p99 <= 5.0 + 0.07 + 1e-9, "{p}: {p99}\n{c}");
        assert!(
            cells[1].p99_accepted_secs.unwrap() <= 0.07 + 1e-9,
            "{p}\n{c}"
        );
    }
}
