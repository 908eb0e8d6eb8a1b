//! Throttles at random against a limit, in virtual time: 40 senders, each throttled item
//! waiting its own `Retry-After` before it asks for a slot again.

use std::time::{Duration, Instant, UNIX_EPOCH};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::retry_after::{DelayReason, RetryDelay};
use crate::{Clock, ManualClock};

const MS: Duration = Duration::from_millis(1);
const SECS: fn(u64) -> Duration = Duration::from_secs;

/// A GCRA at `limit`/s (burst 10) that also refuses `noise` of all requests at random, or
/// every `every`-th request it would accept; every refusal carries `Retry-After: 1`, or no
/// delay at all without `delay` (SMPP's `0x58`).
struct Host {
    limit: f64,
    noise: f64,
    every: Option<u64>,
    delay: bool,
    seen: u64,
    tat: Duration,
    epoch: Instant,
    rng: ChaCha8Rng,
}

impl Host {
    fn handle(&mut self, now: Instant) -> Verdict {
        let t = now - self.epoch;
        let interval = Duration::from_secs_f64(1.0 / self.limit);
        let ok = t >= self.tat.saturating_sub(interval * 9);
        if ok {
            self.tat = self.tat.max(t) + interval;
        }
        let ok = ok && !self.rng.random_bool(self.noise);
        let ok = ok && {
            self.seen += 1;
            self.every.is_none_or(|n| !self.seen.is_multiple_of(n))
        };
        let class = if ok {
            VerdictClass::Success
        } else {
            VerdictClass::Throttle
        };
        Verdict {
            class,
            reason: class.as_str().to_owned(),
            retry_after: (!ok && self.delay).then(|| RetryDelay {
                delay: SECS(1),
                reason: DelayReason::Honoured,
                raw: Some("1".to_owned()),
                retry_after: Some(SECS(1)),
            }),
            rate_limit: None,
            secondary_limit: false,
        }
    }
}

// A few dozen senders of a test harness: their size does not matter.
#[allow(clippy::large_enum_variant)]
enum Sender {
    Asking(Instant),
    Waiting {
        reserved_at: Instant,
        slot: Instant,
    },
    OnTheWire {
        reserved_at: Instant,
        due: Instant,
        verdict: Verdict,
    },
}

/// Per whole second: (pacer rate at its end, accepted, throttled).
type Trace = Vec<(f64, u32, u32)>;

/// 40 senders with endless work for `secs` seconds, the pacer starting at `start`/s.
fn run(limit: f64, noise: f64, start: f64, secs: u64) -> Trace {
    run_with(limit, noise, None, 42, start, secs)
}

/// [`run`] with the host's refusals also every `every`-th request, and its random stream
/// seeded with `seed`.
fn run_with(limit: f64, noise: f64, every: Option<u64>, seed: u64, start: f64, secs: u64) -> Trace {
    Run {
        limit,
        noise,
        every,
        seed,
        start,
        secs,
        senders: 40,
        delay: true,
    }
    .trace()
}

/// One run of the harness.
#[derive(Debug, Clone, Copy)]
struct Run {
    limit: f64,
    noise: f64,
    every: Option<u64>,
    seed: u64,
    start: f64,
    secs: u64,
    senders: usize,
    /// Refusals carry `Retry-After: 1` (else none; the item still waits 1 s).
    delay: bool,
}

impl Run {
    /// As `benches/noise.sh` runs `abide send`: 16 senders from the cold-start rate, over
    /// HTTP (`delay`: `429` with `Retry-After: 1`) or SMPP (`0x58`, no delay).
    fn bench(seed: u64, delay: bool, secs: u64) -> Self {
        Self {
            limit: 100.0,
            noise: 0.05,
            every: None,
            seed,
            start: PacerConfig::cold_start_rate(16),
            secs,
            senders: 16,
            delay,
        }
    }

    /// Per whole second of the run: the pacer's rate at its end, accepted, throttled.
    fn trace(self) -> Trace {
        let Self {
            limit,
            noise,
            every,
            seed,
            start,
            secs,
            senders,
            delay,
        } = self;
        let clock = ManualClock::new(UNIX_EPOCH);
        let t0 = clock.monotonic();
        let cfg = PacerConfig {
            initial_rate: start,
            ..PacerConfig::default()
        };
        let p = Pacer::new(cfg, t0);
        let mut host = Host {
            limit,
            noise,
            every,
            delay,
            seen: 0,
            tat: Duration::ZERO,
            epoch: t0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        let take = |now: Instant| match p.reserve_within(now, None) {
            Ok(slot) => Sender::Waiting {
                reserved_at: now,
                slot,
            },
            Err(NotYet::AskAgainAt(at) | NotYet::PastDeadline(at)) => Sender::Asking(at),
        };
        let mut ws: Vec<Sender> = (0..senders).map(|_| take(t0)).collect();
        let mut trace: Trace = vec![(0.0, 0, 0); usize::try_from(secs).unwrap()];
        while clock.monotonic() < t0 + SECS(secs) {
            let now = clock.monotonic();
            let sec = usize::try_from((now - t0).as_secs()).unwrap();
            for w in &mut ws {
                match w {
                    Sender::Asking(at) if now >= *at => *w = take(now),
                    Sender::Waiting { reserved_at, slot } if now >= *slot => {
                        *w = if p.admit(now).is_ok() {
                            Sender::OnTheWire {
                                reserved_at: *reserved_at,
                                due: now + 2 * MS,
                                verdict: host.handle(now),
                            }
                        } else {
                            take(now)
                        };
                    }
                    Sender::OnTheWire {
                        reserved_at,
                        due,
                        verdict,
                    } if now >= *due => {
                        p.on_verdict_for(now, *reserved_at, verdict);
                        *w = if verdict.class == VerdictClass::Success {
                            trace[sec].1 += 1;
                            take(now)
                        } else {
                            // The item waits its own Retry-After, then asks again.
                            trace[sec].2 += 1;
                            Sender::Asking(now + SECS(1))
                        };
                    }
                    _ => {}
                }
            }
            trace[sec].0 = p.rate();
            clock.advance(MS);
        }
        trace
    }
}

#[allow(clippy::cast_precision_loss)]
fn accepted_per_sec(t: &[(f64, u32, u32)]) -> f64 {
    t.iter().map(|s| f64::from(s.1)).sum::<f64>() / t.len() as f64
}

#[test]
fn throttles_at_random_do_not_decay_the_rate() {
    // 100/s accepted by the limit, 5 % of it refused whatever the rate: 95/s to be had.
    let t = run(100.0, 0.05, 100.0, 600);
    let fair = 95.0;
    let lowest = t.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let end = accepted_per_sec(&t[540..]);
    eprintln!(
        "lowest rate {lowest:.1}/s, accepted over the last minute {end:.1}/s, \
         per 30 s: {:?}",
        t.chunks(30)
            .map(accepted_per_sec)
            .map(f64::round)
            .collect::<Vec<_>>()
    );
    assert!(lowest >= fair / 2.0, "the rate fell to {lowest}/s");
    assert!(end >= 0.8 * fair, "{end}/s accepted over the last minute");
    assert!(t[599].0 >= 0.8 * fair, "ends at {}/s", t[599].0);
}

#[test]
fn a_hard_limit_is_still_found_and_held() {
    // 50/s, no noise, the pacer starting at four times that.
    let t = run(50.0, 0.0, 200.0, 600);
    let after = &t[30..];
    // The ceiling is what the host accepted, which a GCRA's burst lets read a little high:
    // "at the limit" is within 2 % of it. Probes go above now and then; the rate lives
    // at or below it.
    let above = after.iter().filter(|s| s.0 > 51.0).count();
    let throttled: u32 = after.iter().map(|s| s.2).sum();
    let accepted: u32 = after.iter().map(|s| s.1).sum();
    eprintln!(
        "rate at 30 s {:.1}/s, at the end {:.1}/s, seconds above 51/s {above}, \
         throttled {throttled} of {}",
        t[30].0,
        t[599].0,
        throttled + accepted
    );
    assert!(
        t[30].0 <= 51.0 && t[599].0 <= 51.0,
        "{} {}",
        t[30].0,
        t[599].0
    );
    assert!(above * 10 < after.len(), "{above} s above 51/s");
    // Not taken for noise: throttles stay rare (each pauses the host).
    assert!(
        f64::from(throttled) < 0.002 * f64::from(throttled + accepted),
        "{throttled} throttled"
    );
    assert!(accepted_per_sec(after) >= 0.9 * 50.0);
}

/// Prints what the harness saw over other seeds and against every 20th request refused,
/// for tuning (`--nocapture`); asserts only that the last minute is not starved.
#[test]
fn seeds_report() {
    for seed in 1..=6 {
        let t = run_with(100.0, 0.05, None, seed, 100.0, 600);
        let lowest = t.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
        eprintln!(
            "seed {seed}: lowest rate {lowest:.1}/s, accepted over the last minute {:.1}/s",
            accepted_per_sec(&t[540..])
        );
    }
    // No limit in reach, every 20th request refused.
    let t = run_with(1000.0, 0.0, Some(20), 1, 100.0, 600);
    let lowest = t.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let end = accepted_per_sec(&t[540..]);
    eprintln!("every 20th: lowest rate {lowest:.1}/s, accepted over the last minute {end:.1}/s");
    assert!(end >= 95.0, "{end}/s");
}

#[test]
fn a_cold_start_into_random_throttles_tells_them_from_the_limit() {
    // As `benches/noise.sh` runs it: 16 senders from the cold-start rate, no rate-limit
    // headers, a 100/s GCRA refusing 5 % more at random; over HTTP (`429` with
    // `Retry-After: 1`) and SMPP (`0x58`, no delay). Before the trial, each random throttle
    // paused the host and cut the rate: 0.02-0.6 of what was to be had over the first
    // minute at these seeds.
    let fair = 95.0;
    for delay in [true, false] {
        for seed in 1..=6 {
            let t = Run::bench(seed, delay, 60).trace();
            let minute = accepted_per_sec(&t) / fair;
            let end = accepted_per_sec(&t[40..]) / fair;
            eprintln!("delay {delay} seed {seed}: {minute:.3} over the minute, {end:.3} over its last 20 s");
            assert!(
                minute >= 0.7,
                "delay {delay} seed {seed}: {minute:.3} over the minute"
            );
            assert!(
                end >= 0.8,
                "delay {delay} seed {seed}: {end:.3} over the last 20 s"
            );
        }
    }
}
