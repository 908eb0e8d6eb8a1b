//! Cold start and the search for the limit, in virtual time: senders reserve a
//! slot, wait for it, check `admit`, send, and feed the answer back one round trip later,
//! against a model of a rate-limited host.

use std::collections::VecDeque;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::*;
use crate::ratelimit::{RateLimitInfo, RateLimitSource};
use crate::retry_after::{DelayReason, RetryDelay};
use crate::{Clock, ManualClock};

const MS: Duration = Duration::from_millis(1);

/// The host's limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Algo {
    /// GCRA at `limit`/s with a burst of 10.
    Gcra,
    /// GCRA at `limit`/s with a burst of a whole second's quota (`abide provider`'s
    /// default burst).
    GcraFullBurst,
    /// `limit` requests per 1 s window, windows aligned on whole seconds.
    FixedWindow,
    /// The sliding window counter over 1 s windows (as abide-gate's): the current window's
    /// count plus the previous one's, weighted by how much of it the window still covers.
    SlidingWindow,
}

#[derive(Debug)]
struct Host {
    algo: Algo,
    limit: f64,
    headers: bool,
    epoch: Instant,
    tat: Duration,
    /// (window index, count in it, count in the one before).
    window: (u64, u64, u64),
}

impl Host {
    fn new(algo: Algo, limit: f64, headers: bool, epoch: Instant) -> Self {
        Self {
            algo,
            limit,
            headers,
            epoch,
            tat: Duration::ZERO,
            window: (0, 0, 0),
        }
    }

    /// Answer a request arriving at `now`: (accepted, verdict).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn handle(&mut self, now: Instant) -> (bool, Verdict) {
        let t = now - self.epoch;
        let quota = self.limit.round() as u64;
        let (ok, wait, remaining, reset) = match self.algo {
            Algo::Gcra | Algo::GcraFullBurst => {
                let burst = match self.algo {
                    Algo::Gcra => 10,
                    _ => quota,
                };
                let interval = Duration::from_secs_f64(1.0 / self.limit);
                let allowed = self.tat.saturating_sub(interval * (burst as u32 - 1));
                let ok = t >= allowed;
                if ok {
                    self.tat = self.tat.max(t) + interval;
                }
                let backlog = self.tat.saturating_sub(t).as_secs_f64() * self.limit;
                let left = (burst as f64 - backlog).floor().max(0.0) as u64;
                (
                    ok,
                    allowed.saturating_sub(t),
                    left,
                    self.tat.saturating_sub(t),
                )
            }
            Algo::FixedWindow | Algo::SlidingWindow => {
                let index = t.as_secs();
                if self.window.0 != index {
                    let prev = if index == self.window.0 + 1 {
                        self.window.1
                    } else {
                        0
                    };
                    self.window = (index, 0, prev);
                }
                let into = t - Duration::from_secs(index);
                let reset = Duration::from_secs(index + 1) - t;
                // The previous window's weight: the share of it a 1 s window ending now covers.
                let weight = match self.algo {
                    Algo::SlidingWindow => 1.0 - into.as_secs_f64(),
                    _ => 0.0,
                };
                let used = self.window.2 as f64 * weight + self.window.1 as f64;
                let ok = used + 1.0 <= quota as f64;
                if ok {
                    self.window.1 += 1;
                }
                let wait = if ok || self.algo == Algo::FixedWindow || self.window.1 >= quota {
                    reset
                } else {
                    // Only the previous window's weight blocks: until it has slid far enough.
                    let keep = (quota - self.window.1 - 1) as f64 / self.window.2.max(1) as f64;
                    Duration::from_secs_f64((1.0 - into.as_secs_f64() - keep).max(0.001))
                };
                let left = (quota as f64 - used - f64::from(u8::from(ok)))
                    .floor()
                    .max(0.0);
                (ok, wait, left as u64, reset)
            }
        };
        let ceil = |d: Duration| Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0));
        let rate_limit = self.headers.then(|| RateLimitInfo {
            source: RateLimitSource::Ietf,
            policy: None,
            limit: Some(quota),
            remaining: Some(remaining),
            reset: Some(ceil(reset).max(Duration::from_secs(1))),
            window: Some(Duration::from_secs(1)),
            concurrency: None,
        });
        let retry_after = (!ok).then(|| {
            let delay = ceil(wait).max(Duration::from_secs(1));
            RetryDelay {
                delay,
                reason: DelayReason::Honoured,
                raw: Some(delay.as_secs().to_string()),
                retry_after: Some(delay),
            }
        });
        let class = if ok {
            VerdictClass::Success
        } else {
            VerdictClass::Throttle
        };
        let verdict = Verdict {
            class,
            reason: class.as_str().to_owned(),
            retry_after,
            rate_limit,
            secondary_limit: false,
        };
        (ok, verdict)
    }
}

#[derive(Debug, Default)]
pub(super) struct Run {
    /// When the last item was accepted, from the start.
    pub(super) done: Duration,
    pub(super) delivered: usize,
    pub(super) throttles: usize,
    /// (time from start, pacer rate, accepted over the last 500 ms) after each answer.
    trace: Vec<(Duration, f64, f64)>,
    /// Time of the first throttle, from the start.
    first_throttle: Option<Duration>,
    /// The pacer's ceiling right after the first decrease.
    first_ceiling: Option<f64>,
    /// Each decrease: (time from start, rate before, rate after, ceiling after).
    decreases: Vec<(Duration, f64, f64, Option<f64>)>,
    /// Accepted and throttled answers per whole second from the start.
    pub(super) per_second: Vec<(u32, u32)>,
}

// A few dozen senders of a test harness: their size does not matter.
#[allow(clippy::large_enum_variant)]
enum Sender {
    /// No slot yet: the queue reached past the horizon; ask again at `at`.
    Asking {
        at: Instant,
    },
    Waiting {
        reserved_at: Instant,
        slot: Instant,
    },
    OnTheWire {
        reserved_at: Instant,
        due: Instant,
        accepted: bool,
        verdict: Verdict,
    },
    Done,
}

/// A sender asks for a slot, as a session's delivery does.
fn take(p: &Pacer, now: Instant) -> Sender {
    match p.reserve_within(now, None) {
        Ok(slot) => Sender::Waiting {
            reserved_at: now,
            slot,
        },
        Err(NotYet::AskAgainAt(at) | NotYet::PastDeadline(at)) => Sender::Asking { at },
    }
}

/// `items` through `senders` senders with round trip `rtt` against `host`.
#[allow(clippy::cast_precision_loss)]
pub(super) fn run(
    cfg: PacerConfig,
    algo: Algo,
    headers: bool,
    senders: usize,
    items: usize,
) -> Run {
    run_rtt(cfg, algo, headers, senders, items, 2 * MS)
}

/// [`run`] with round trip `rtt`.
#[allow(clippy::cast_precision_loss)]
fn run_rtt(
    cfg: PacerConfig,
    algo: Algo,
    headers: bool,
    senders: usize,
    items: usize,
    rtt: Duration,
) -> Run {
    run_offset(cfg, algo, headers, senders, items, rtt, Duration::ZERO)
}

/// [`run_rtt`] against a host whose windows began `offset` before the sender started.
#[allow(clippy::cast_precision_loss)]
pub(super) fn run_offset(
    cfg: PacerConfig,
    algo: Algo,
    headers: bool,
    senders: usize,
    items: usize,
    rtt: Duration,
    offset: Duration,
) -> Run {
    let clock = ManualClock::new(UNIX_EPOCH);
    clock.advance(Duration::from_secs(1));
    let t0 = clock.monotonic();
    let mut host = Host::new(algo, 100.0, headers, t0 - offset);
    let p = Pacer::new(cfg, t0);
    let mut left = items;
    let mut out = Run::default();
    let mut accepted_at: VecDeque<Instant> = VecDeque::new();
    let mut ws: Vec<Sender> = Vec::new();
    for _ in 0..senders.min(left) {
        left -= 1;
        ws.push(take(&p, t0));
    }
    while out.delivered < items && clock.monotonic() < t0 + Duration::from_secs(600) {
        let now = clock.monotonic();
        for w in &mut ws {
            match w {
                Sender::Asking { at } if now >= *at => *w = take(&p, now),
                Sender::Waiting { reserved_at, slot } if now >= *slot => {
                    if p.admit(now).is_ok() {
                        let (accepted, verdict) = host.handle(now);
                        *w = Sender::OnTheWire {
                            reserved_at: *reserved_at,
                            due: now + rtt,
                            accepted,
                            verdict,
                        };
                    } else {
                        *w = take(&p, now);
                    }
                }
                Sender::OnTheWire {
                    reserved_at,
                    due,
                    accepted,
                    verdict,
                } if now >= *due => {
                    let before = (p.rate(), p.snapshot(now).decreases);
                    p.on_verdict_for(now, *reserved_at, verdict);
                    let snap = p.snapshot(now);
                    if snap.decreases > before.1 {
                        out.decreases
                            .push((now - t0, before.0, snap.rate, snap.ceiling));
                    }
                    let sec = usize::try_from((now - t0).as_secs()).unwrap_or(usize::MAX);
                    if out.per_second.len() <= sec {
                        out.per_second.resize(sec + 1, (0, 0));
                    }
                    if *accepted {
                        out.per_second[sec].0 += 1;
                    } else {
                        out.per_second[sec].1 += 1;
                    }
                    let mut next = true;
                    if *accepted {
                        out.delivered += 1;
                        out.done = now - t0;
                        accepted_at.push_back(now);
                        next = left > 0;
                        left = left.saturating_sub(1);
                    } else {
                        out.throttles += 1;
                        out.first_throttle.get_or_insert(now - t0);
                    }
                    while accepted_at.front().is_some_and(|a| *a + 600 * MS <= now) {
                        accepted_at.pop_front();
                    }
                    // The pacer counts in 100 ms buckets: the last 500 to 600 ms.
                    let rate_over = |span: Duration| {
                        let n = accepted_at.iter().filter(|a| **a + span > now).count();
                        n as f64 / (now - t0).min(span).as_secs_f64().max(0.1)
                    };
                    let seen = (0..=10)
                        .map(|k| rate_over((500 + 10 * k) * MS))
                        .fold(0.0, f64::max);
                    out.trace.push((now - t0, p.rate(), seen));
                    if out.first_ceiling.is_none() && p.snapshot(now).decreases > 0 {
                        out.first_ceiling = Some(p.ceiling().unwrap_or(0.0));
                    }
                    *w = if next { take(&p, now) } else { Sender::Done };
                }
                _ => {}
            }
        }
        clock.advance(MS);
    }
    out
}

#[allow(clippy::cast_precision_loss)]
pub(super) fn efficiency(r: &Run) -> f64 {
    r.delivered as f64 / (r.done.as_secs_f64() * 100.0)
}

/// Not a test of speed: prints what the harness saw, for tuning (`--nocapture`).
#[test]
fn cold_start_report() {
    for headers in [true, false] {
        for algo in [Algo::Gcra, Algo::FixedWindow] {
            let r = run(cold(40), algo, headers, 40, 3000);
            println!(
                "{algo:?} headers={headers}: done {:?} eff {:.3} throttles {} first {:?} ceiling {:?}",
                r.done, efficiency(&r), r.throttles, r.first_throttle, r.first_ceiling
            );
            assert_eq!(r.delivered, 3000);
        }
    }
}

/// Not a test of speed: the search against every limiter model, cold (1/s per sender) and
/// from the in-process default of 10/s, at 2 ms and 20 ms round trips (`--nocapture`).
#[test]
fn search_matrix_report() {
    let algos = [
        Algo::Gcra,
        Algo::GcraFullBurst,
        Algo::FixedWindow,
        Algo::SlidingWindow,
    ];
    for algo in algos {
        for (start, rtt) in [(40.0, 2 * MS), (10.0, 20 * MS)] {
            let cfg = PacerConfig {
                initial_rate: start,
                ..PacerConfig::default()
            };
            let r = run_rtt(cfg, algo, false, 40, 3000, rtt);
            println!(
                "{algo:?} start {start} rtt {rtt:?}: done {:.1}s eff {:.3} 429s {} first {:?} ceiling {:?}",
                r.done.as_secs_f64(), efficiency(&r), r.throttles, r.first_throttle,
                r.first_ceiling.map(|c| c.round())
            );
            assert_eq!(r.delivered, 3000);
        }
    }
}

pub(super) fn cold(senders: usize) -> PacerConfig {
    PacerConfig {
        initial_rate: PacerConfig::cold_start_rate(senders),
        ..PacerConfig::default()
    }
}

#[test]
fn the_first_rate_limit_policy_sets_the_target_rate_at_once() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let p = Pacer::new(cold(40), t0);
    let mut host = Host::new(Algo::FixedWindow, 100.0, true, t0);
    // 40 senders each take a slot: a second of them at the cold-start pace.
    let mut slots: Vec<Instant> = (0..40).map(|_| p.reserve(t0)).collect();
    assert!(slots[39] - t0 > Duration::from_millis(900));
    let (_, mut v) = host.handle(slots[0]);
    // A rate without a count of what is left: even spacing (`quota_tests` spends a count).
    if let Some(rl) = v.rate_limit.as_mut() {
        rl.remaining = None;
    }
    clock.advance(2 * MS);
    let now = clock.monotonic();
    p.on_verdict_for(now, t0, &v);
    assert_eq!(p.target(), Some(97.0));
    assert!((p.rate() - 97.0).abs() < 1e-9, "rate {}", p.rate());
    // From that answer on the queue as a whole runs at 97/s, not after the old one drains.
    slots.extend((0..300).map(|_| p.reserve(now)));
    let in_first_second = slots
        .iter()
        .filter(|s| **s < t0 + Duration::from_secs(1))
        .count();
    assert!(
        (95..=98).contains(&in_first_second),
        "{in_first_second} slots in the first second"
    );
    let in_next_two = slots
        .iter()
        .filter(|s| (t0 + Duration::from_secs(1)..t0 + Duration::from_secs(3)).contains(*s))
        .count();
    assert!(
        (193..=195).contains(&in_next_two),
        "{in_next_two} slots in the next two seconds"
    );
}

#[test]
fn the_same_policy_again_keeps_a_ceiling_learned_below_it() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let p = Pacer::new(cold(40), t0);
    let mut host = Host::new(Algo::FixedWindow, 100.0, true, t0);
    let (_, v) = host.handle(t0);
    p.on_verdict(t0, &v);
    // The server throttles below what it advertised: a ceiling is learned under 97/s.
    for _ in 0..300 {
        clock.advance(10 * MS);
        p.on_verdict(
            clock.monotonic(),
            &Verdict {
                class: VerdictClass::Success,
                ..v.clone()
            },
        );
    }
    let throttle = Verdict {
        class: VerdictClass::Throttle,
        ..v.clone()
    };
    clock.advance(10 * MS);
    p.on_verdict(clock.monotonic(), &throttle);
    let after = p.rate();
    assert!(after < 97.0, "{after}");
    clock.advance(10 * MS);
    p.on_verdict(
        clock.monotonic(),
        &Verdict {
            class: VerdictClass::Success,
            ..v
        },
    );
    assert!(
        p.rate() <= after + 1.0,
        "{} jumped back from {after}",
        p.rate()
    );
}

#[test]
fn without_headers_the_search_finds_the_limit_within_five_seconds() {
    for algo in [Algo::Gcra, Algo::FixedWindow] {
        let r = run(cold(40), algo, false, 40, 3000);
        let first = r.first_throttle.expect("the search reaches the limit");
        assert!(
            first <= Duration::from_secs(5),
            "{algo:?}: first throttle at {first:?}"
        );
        let c = r.first_ceiling.unwrap();
        assert!((90.0..=110.0).contains(&c), "{algo:?}: ceiling {c}");
    }
}

#[test]
fn the_search_never_climbs_above_one_and_a_quarter_times_what_was_accepted() {
    for (algo, senders) in [(Algo::Gcra, 40), (Algo::FixedWindow, 40), (Algo::Gcra, 4)] {
        let r = run(cold(senders), algo, false, senders, 3000);
        let first = r.first_throttle.unwrap_or(Duration::MAX);
        let mut last = cold(senders).initial_rate;
        let mut climbs = 0;
        // Until the first throttle (the search); after it the pacer leaves paused time out
        // of "accepted" and this count does not. 2 % for the pacer's 100 ms buckets.
        for &(t, rate, accepted) in r.trace.iter().filter(|e| e.0 < first) {
            if t >= Duration::from_millis(600) && rate > last + 1e-9 {
                climbs += 1;
                assert!(
                    rate <= 1.25 * 1.02 * accepted,
                    "{algo:?}/{senders}: climbed to {rate} at {t:?} on {accepted}/s accepted"
                );
            }
            last = rate;
        }
        assert!(climbs > 10, "{algo:?}/{senders}: {climbs} climbs");
    }
}

#[test]
fn a_first_target_below_the_start_makes_the_old_slots_echoes() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let start = PacerConfig {
        initial_rate: 150.0,
        ..PacerConfig::default()
    };
    let p = Pacer::new(start, t0);
    // 24 senders take a slot each at 150/s: 160 ms of slots.
    let slots: Vec<Instant> = (0..24).map(|_| p.reserve(t0)).collect();
    assert!(slots[23] - t0 >= Duration::from_millis(150));
    let mut host = Host::new(Algo::FixedWindow, 75.0, true, t0);
    let (_, v) = host.handle(t0);
    clock.advance(60 * MS);
    p.on_verdict_for(clock.monotonic(), t0, &v);
    assert!((p.rate() - 72.75).abs() < 1e-9, "{}", p.rate());
    // A throttle (say, an unadvertised concurrency cap) for a slot reserved at 150/s is an
    // echo of the start, not evidence against the target: no decrease, no ceiling.
    let throttle = Verdict {
        class: VerdictClass::Throttle,
        ..v
    };
    clock.advance(10 * MS);
    p.on_verdict_for(clock.monotonic(), t0, &throttle);
    assert_eq!(p.snapshot(clock.monotonic()).decreases, 0);
    assert_eq!(p.ceiling(), None);
    assert!((p.rate() - 72.75).abs() < 1e-9, "{}", p.rate());
    // The queue handed out at 150/s was re-costed at the target: the next free slot lies
    // beyond it by twice what was left of it (at most twice, as after a decrease).
    let next = p.reserve(clock.monotonic());
    assert!(next - t0 >= Duration::from_millis(250), "{:?}", next - t0);
}

/// Not a test of speed: the cold start against every limiter model with its windows (or
/// its schedule) begun 0, 250, 500 and 750 ms before the sender, at 2 and 7 ms round
/// trips: the spread one alignment hides (`--nocapture`).
#[test]
fn search_spread_report() {
    let algos = [
        Algo::Gcra,
        Algo::GcraFullBurst,
        Algo::FixedWindow,
        Algo::SlidingWindow,
    ];
    for algo in algos {
        let mut effs = Vec::new();
        let mut throttles = 0;
        for offset in [0, 250, 500, 750] {
            for rtt in [2, 7] {
                let r = run_offset(
                    cold(40),
                    algo,
                    false,
                    40,
                    3000,
                    Duration::from_millis(rtt),
                    Duration::from_millis(offset),
                );
                assert_eq!(r.delivered, 3000);
                effs.push(efficiency(&r));
                throttles += r.throttles;
            }
        }
        let min = effs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = effs.iter().copied().fold(0.0, f64::max);
        #[allow(clippy::cast_precision_loss)]
        let mean = effs.iter().sum::<f64>() / effs.len() as f64;
        println!(
            "{algo:?}: eff mean {mean:.3} min {min:.3} max {max:.3}, 429s {throttles} in 8 runs"
        );
    }
}

/// Not a test of speed: where the time goes against the window limiters, blind (decreases
/// with the rate before and after and the ceiling; accepted/throttled per second).
#[test]
fn search_trace_report() {
    for algo in [Algo::GcraFullBurst, Algo::FixedWindow, Algo::SlidingWindow] {
        for offset in [0, 250, 500, 750] {
            let r = run_offset(
                cold(40),
                algo,
                false,
                40,
                3000,
                2 * MS,
                Duration::from_millis(offset),
            );
            println!(
                "{algo:?} offset {offset}: done {:.2}s eff {:.3} 429s {}",
                r.done.as_secs_f64(),
                efficiency(&r),
                r.throttles
            );
            for (t, a, b, c) in &r.decreases {
                println!(
                    "   cut at {:.3}s: {a:.1} -> {b:.1}, ceiling {c:?}",
                    t.as_secs_f64()
                );
            }
            let s: Vec<String> = r
                .per_second
                .iter()
                .map(|(a, t)| {
                    if *t > 0 {
                        format!("{a}/{t}")
                    } else {
                        a.to_string()
                    }
                })
                .collect();
            println!("   per s: {}", s.join(" "));
        }
    }
}
