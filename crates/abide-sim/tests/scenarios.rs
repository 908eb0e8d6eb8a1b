//! Each scenario's ordering of policies, pinned with a fixed seed: the shape of the seeds'
//! tables, not their exact numbers. Also: same seed, same numbers.
#![allow(clippy::unwrap_used)]

use abide_sim::{PolicyKind, PolicyResult, Scenario, ScenarioReport};

const SEED: u64 = 42;

fn r(report: &ScenarioReport, p: PolicyKind) -> &PolicyResult {
    report.result(p).unwrap()
}

/// What abide must do everywhere: never blocked, nothing lost or stuck, fewest 429s per
/// logical request among the policies that retry throttles.
fn abide_is_polite(report: &ScenarioReport) {
    let a = r(report, PolicyKind::Abide);
    let name = report.scenario;
    assert!(!a.blocked(), "{name}: abide blocked\n{report}");
    assert_eq!(a.lost, 0, "{name}: abide lost items\n{report}");
    assert_eq!(
        a.unfinished, 0,
        "{name}: abide left items unfinished\n{report}"
    );
    assert!(a.completion.is_some(), "{name}\n{report}");
    assert!(
        a.throttles_per_request() <= 0.02,
        "{name}: abide 429/req {}\n{report}",
        a.throttles_per_request()
    );
}

#[test]
fn limit_appears_matches_seed_002_table() {
    let rep = Scenario::LimitAppears.run(SEED);
    abide_is_polite(&rep);
    let fixed = r(&rep, PolicyKind::FixedRetries);
    // "429s generated per logical request": no retry 1, fixed retries about 6, honouring
    // Retry-After fewer, a proactive limiter (nearly) none.
    assert!((r(&rep, PolicyKind::NoRetry).throttles_per_throttled_request() - 1.0).abs() < 1e-9);
    assert!(fixed.throttles_per_throttled_request() >= 5.0, "{rep}");
    for p in PolicyKind::ALL {
        // Among the seed's clients (full jitter, retrying every 429 as fast, is no better).
        if p != PolicyKind::FixedRetries && p != PolicyKind::FullJitter {
            assert!(
                r(&rep, p).throttles_per_request() < fixed.throttles_per_request(),
                "fixed-retries must be worst, {p} is not better\n{rep}"
            );
        }
        if p != PolicyKind::Abide {
            assert!(
                r(&rep, PolicyKind::Abide).throttles_per_request()
                    < r(&rep, p).throttles_per_request(),
                "abide must be best, {p} is not worse\n{rep}"
            );
        }
    }
    assert!(
        fixed.blocked(),
        "fixed-retries must trip abuse protection\n{rep}"
    );
    assert!(!r(&rep, PolicyKind::HonourRetryAfter).blocked(), "{rep}");
}

#[test]
fn http_date_switch_blocks_the_integer_only_client() {
    let rep = Scenario::HttpDateSwitch.run(SEED);
    abide_is_polite(&rep);
    let int = r(&rep, PolicyKind::IntegerOnly);
    let honour = r(&rep, PolicyKind::HonourRetryAfter);
    assert!(int.blocked(), "integer-only suspended\n{rep}");
    assert!(!honour.blocked(), "reading both forms avoids it\n{rep}");
    assert!(
        int.throttles_per_request() > 10.0 * honour.throttles_per_request(),
        "{rep}"
    );
    assert!(int.lost > 0 && honour.lost == 0, "{rep}");
}

#[test]
fn retry_after_zero_blocks_clients_that_trust_it() {
    let rep = Scenario::RetryAfterZero.run(SEED);
    abide_is_polite(&rep);
    for p in [PolicyKind::HonourRetryAfter, PolicyKind::IntegerOnly] {
        assert!(r(&rep, p).blocked(), "{p} obeys Retry-After: 0\n{rep}");
    }
    let a = r(&rep, PolicyKind::Abide);
    for p in PolicyKind::ALL
        .into_iter()
        .filter(|p| *p != PolicyKind::Abide)
    {
        assert!(
            a.rejections_per_request() <= r(&rep, p).rejections_per_request(),
            "{rep}"
        );
    }
}

#[test]
fn retry_after_huge_puts_unclamped_clients_to_sleep() {
    let rep = Scenario::RetryAfterHuge.run(SEED);
    abide_is_polite(&rep);
    for p in [PolicyKind::HonourRetryAfter, PolicyKind::IntegerOnly] {
        let x = r(&rep, p);
        assert!(
            x.unfinished > 0 && x.completion.is_none(),
            "{p} sleeps a day\n{rep}"
        );
    }
    assert!(r(&rep, PolicyKind::NoRetry).lost > 0, "{rep}");
}

#[test]
fn queue_throttling_three_buckets_deliver_what_two_buckets_lose() {
    let rep = Scenario::QueueThrottling.run(SEED);
    abide_is_polite(&rep);
    let two = r(&rep, PolicyKind::NoRetry);
    let three = r(&rep, PolicyKind::Abide);
    assert!(two.lost > 500, "throttled items written off\n{rep}");
    assert_eq!(
        two.terminal_bad, three.terminal_bad,
        "bad items fail either way\n{rep}"
    );
    assert_eq!(three.delivered, three.logical - three.terminal_bad, "{rep}");
    assert!(three.delivered > two.delivered, "{rep}");
    assert!(three.throttles * 5 < two.throttles, "{rep}");
    for p in [PolicyKind::FixedRetries, PolicyKind::HonourRetryAfter] {
        assert!(three.attempts < r(&rep, p).attempts, "{rep}");
    }
    // Without rate-limit headers the pacer learns the limit from throttles alone: near the
    // limit, throttled rarely (goodput near 95 %, throttled at most 1 %; a pacer that halves
    // on every throttle reaches 59 %).
    assert!(
        three.goodput >= 0.93,
        "abide goodput {}\n{rep}",
        three.goodput
    );
    assert!(three.throttled_fraction() <= 0.01, "{rep}");
}

#[test]
fn limit_changes_abide_converges_after_every_change() {
    let rep = Scenario::LimitChanges.run(SEED);
    abide_is_polite(&rep);
    let a = r(&rep, PolicyKind::Abide);
    assert_eq!(a.converge_secs.len(), 3, "{rep}");
    assert!(a.converge_secs.iter().all(Option::is_some), "{rep}");
    assert!(a.throttled_fraction() <= 0.01, "{rep}");
    for p in PolicyKind::ALL
        .into_iter()
        .filter(|p| *p != PolicyKind::Abide)
    {
        let x = r(&rep, p);
        assert!(
            x.converge_secs[1].is_none(),
            "{p} converged below 5/s?\n{rep}"
        );
        assert!(
            x.throttled_fraction() > 10.0 * a.throttled_fraction(),
            "{rep}"
        );
    }
}

#[test]
fn limit_changes_blind_abide_learns_every_limit_from_throttles() {
    let rep = Scenario::LimitChangesBlind.run(SEED);
    abide_is_polite(&rep);
    let a = r(&rep, PolicyKind::Abide);
    assert!(a.converge_secs.iter().all(Option::is_some), "{rep}");
    assert!(
        a.converge_secs.iter().flatten().all(|s| *s <= 60.0),
        "{rep}"
    );
    assert!(a.throttled_fraction() <= 0.01, "{rep}");
    for p in PolicyKind::ALL
        .into_iter()
        .filter(|p| *p != PolicyKind::Abide)
    {
        assert!(
            r(&rep, p).throttled_fraction() > 10.0 * a.throttled_fraction(),
            "{rep}"
        );
    }
}

#[test]
fn same_seed_same_numbers_other_seed_other_numbers() {
    for s in [Scenario::LimitAppears, Scenario::QueueThrottling] {
        assert_eq!(s.run(7), s.run(7), "{s} is not deterministic");
        assert_ne!(s.run(7), s.run(8), "{s}: the seed changes nothing");
    }
}

/// The loopback politeness bench without rate-limit headers delivered 39-57 % of the limit:
/// each throttle's `Retry-After: 1` paused the host and diluted the accepted rate the pacer
/// learned its ceiling from. Here the policy ordering is not the point (only abide
/// runs: 600/s offered makes the naive policies slow to simulate); abide's steady state is.
#[test]
fn gcra_no_headers_abide_holds_the_limit_from_throttles_alone() {
    let rep = Scenario::GcraNoHeaders.run_policies(&[PolicyKind::Abide], SEED);
    let a = r(&rep, PolicyKind::Abide);
    assert!(!a.blocked() && a.lost == 0, "{rep}");
    assert!(a.throttled_fraction() <= 0.01, "{rep}");
    let limits = [(0, 100, 200.0), (100, 200, 100.0), (200, 300, 300.0)];
    let (mut delivered, mut capacity) = (0.0, 0.0);
    for ((from, to, limit), conv) in limits.iter().zip(&a.converge_secs) {
        let conv = conv.unwrap_or_else(|| panic!("no convergence at {from} s\n{rep}"));
        assert!(conv <= 60.0, "{rep}");
        let steady = &a.series[from + conv as usize..*to];
        delivered += steady.iter().map(|b| f64::from(b.delivered)).sum::<f64>();
        capacity += limit * steady.len() as f64;
    }
    let goodput = delivered / capacity;
    assert!(goodput >= 0.9, "steady goodput {goodput}\n{rep}");
}

#[test]
fn graphql_200_clients_trusting_the_status_count_throttles_as_delivered() {
    let rep = Scenario::Graphql200.run(SEED);
    abide_is_polite(&rep);
    let a = r(&rep, PolicyKind::Abide);
    assert_eq!(a.delivered, a.logical, "abide delivers every item\n{rep}");
    assert_eq!(a.false_delivered, 0, "{rep}");
    let two_buckets = r(&rep, PolicyKind::NoRetry);
    assert!(two_buckets.false_delivered > 0, "{rep}");
    assert_eq!(
        two_buckets.delivered + two_buckets.false_delivered,
        two_buckets.logical,
        "every throttled item counted delivered, none actually sent\n{rep}"
    );
    assert!(rep.to_string().contains("false ok"), "{rep}");
}
