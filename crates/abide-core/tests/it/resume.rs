//! After a provider suspends the key and lets it go again, the pacer comes back to the
//! provider's rate, in virtual time: 20 senders reserve a slot, wait for it, check
//! `admit`, send (arriving 0-3 ms later, as on a busy loopback) and feed the answer back,
//! against a model of `abide provider` (GCRA 200/s, burst 2, IETF `RateLimit` fields with
//! the reset in whole seconds, at least 1) that answers a suspended key `403` (a throttle,
//! as the operator configured) with or without `Retry-After`.

use std::time::{Duration, Instant, UNIX_EPOCH};

use abide_core::{
    Clock, DelayReason, ManualClock, NotYet, Pacer, PacerConfig, RateLimitInfo, RateLimitSource,
    RetryDelay, Verdict, VerdictClass,
};

const MS: Duration = Duration::from_millis(1);
const LIMIT: f64 = 200.0;
const BURST: f64 = 2.0;

fn ceil_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(Duration::from_secs(1))
}

struct Host {
    epoch: Instant,
    /// The suspension lasts until here (from the epoch); `Retry-After` with it or not.
    suspended: (Duration, Duration),
    retry_after: bool,
    tat: Duration,
}

impl Host {
    fn handle(&mut self, now: Instant) -> (bool, Verdict) {
        let t = now - self.epoch;
        let throttle = |delay: Option<Duration>, rate_limit| Verdict {
            class: VerdictClass::Throttle,
            reason: "throttle".into(),
            retry_after: delay.map(|d| RetryDelay {
                delay: d,
                reason: DelayReason::Honoured,
                raw: Some(d.as_secs().to_string()),
                retry_after: Some(d),
            }),
            rate_limit,
            secondary_limit: false,
        };
        if t >= self.suspended.0 && t < self.suspended.1 {
            let left = ceil_secs(self.suspended.1 - t);
            return (false, throttle(self.retry_after.then_some(left), None));
        }
        let interval = Duration::from_secs_f64(1.0 / LIMIT);
        let allowed = self.tat.saturating_sub(interval.mul_f64(BURST - 1.0));
        let ok = t >= allowed;
        if ok {
            self.tat = self.tat.max(t) + interval;
        }
        let backlog = self.tat.saturating_sub(t).as_secs_f64() * LIMIT;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let remaining = (BURST - backlog).floor().max(0.0) as u64;
        let rl = RateLimitInfo {
            source: RateLimitSource::Ietf,
            policy: None,
            limit: Some(200),
            remaining: Some(remaining),
            reset: Some(ceil_secs(self.tat.saturating_sub(t))),
            window: Some(Duration::from_secs(1)),
            concurrency: None,
        };
        if ok {
            let v = Verdict {
                class: VerdictClass::Success,
                reason: "success".into(),
                retry_after: None,
                rate_limit: Some(rl),
                secondary_limit: false,
            };
            (true, v)
        } else {
            (false, throttle(Some(ceil_secs(allowed - t)), Some(rl)))
        }
    }
}

enum Sender {
    Asking(Instant),
    Waiting {
        reserved_at: Instant,
        slot: Instant,
    },
    Wire {
        reserved_at: Instant,
        arrives: Instant,
        due: Instant,
    },
}

/// Accepted per whole second from the epoch, and the pacer's rate/ceiling at each second.
struct Run {
    accepted: Vec<u64>,
    rate: Vec<(f64, Option<f64>)>,
}

fn run(suspend_from: Duration, suspend_for: Duration, retry_after: bool, secs: u64) -> Run {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let cfg = PacerConfig {
        initial_rate: LIMIT,
        ..PacerConfig::default()
    };
    let p = Pacer::new(cfg, t0);
    let mut host = Host {
        epoch: t0,
        suspended: (suspend_from, suspend_from + suspend_for),
        retry_after,
        tat: Duration::ZERO,
    };
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut jitter = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        Duration::from_micros((seed >> 33) % 3000)
    };
    let mut senders: Vec<Sender> = (0..20).map(|_| Sender::Asking(t0)).collect();
    let mut out = Run {
        accepted: vec![0; usize::try_from(secs).unwrap()],
        rate: Vec::new(),
    };
    let step = Duration::from_micros(250);
    let end = t0 + Duration::from_secs(secs);
    while clock.monotonic() < end {
        let now = clock.monotonic();
        if (now - t0).subsec_nanos() == 0 {
            out.rate.push((p.rate(), p.ceiling()));
        }
        for s in &mut senders {
            loop {
                match *s {
                    Sender::Asking(at) if now >= at => {
                        *s = match p.reserve_within(now, None) {
                            Ok(slot) => Sender::Waiting {
                                reserved_at: now,
                                slot,
                            },
                            Err(NotYet::AskAgainAt(a) | NotYet::PastDeadline(a)) => {
                                Sender::Asking(a)
                            }
                        };
                    }
                    Sender::Waiting { reserved_at, slot } if now >= slot => {
                        *s = if p.admit(now).is_ok() {
                            let arrives = now + jitter();
                            Sender::Wire {
                                reserved_at,
                                arrives,
                                due: arrives + MS,
                            }
                        } else {
                            Sender::Asking(now)
                        };
                    }
                    Sender::Wire {
                        reserved_at, due, ..
                    } if now >= due => {
                        let Sender::Wire { arrives, .. } = *s else {
                            unreachable!()
                        };
                        let (ok, v) = host.handle(arrives);
                        if ok {
                            let sec = usize::try_from((arrives - t0).as_secs()).unwrap();
                            if let Some(n) = out.accepted.get_mut(sec) {
                                *n += 1;
                            }
                        }
                        p.on_verdict_for(now, reserved_at, &v);
                        *s = Sender::Asking(now);
                    }
                    _ => break,
                }
            }
        }
        clock.advance(step);
    }
    out
}

/// Accepted per second on average over `[from, from + secs)`, in seconds from the epoch.
#[allow(clippy::cast_precision_loss)]
fn per_sec(r: &Run, from: u64, secs: u64) -> f64 {
    let a = usize::try_from(from).unwrap();
    let b = usize::try_from(from + secs).unwrap();
    r.accepted[a..b].iter().sum::<u64>() as f64 / secs as f64
}

/// A suspension of `n` seconds from 10 s, then 30 s more: abide delivers as much in the 20 s
/// after it as in the 5 s before, at well over half the limit (it delivered 2-4/s in both,
/// the host paused a whole second for each `r=0;t=1`: two requests within 5 ms).
fn comes_back(retry_after: bool, n: u64) {
    let from = 10;
    let r = run(
        Duration::from_secs(from),
        Duration::from_secs(n),
        retry_after,
        from + n + 30,
    );
    let before = per_sec(&r, 5, 5);
    // Without `Retry-After` abide cannot know when the suspension ends: it tries again
    // after its own pause, which has doubled meanwhile (32 s after 60 s).
    let after = per_sec(&r, from + n, 20);
    let ctx = format!(
        "Retry-After {retry_after}, {n} s: {before}/s before, {after}/s after; per second \
         {:?}; rate, ceiling per second {:?}",
        r.accepted, r.rate
    );
    assert!(before >= 0.6 * LIMIT, "{ctx}");
    assert!(
        per_sec(&r, from, n) < 1e-9,
        "accepted while suspended: {ctx}"
    );
    let want = if retry_after { 0.9 } else { 0.5 };
    assert!(after >= want * before, "{ctx}");
    // The pace was not learned from the refusals: back where it was before them.
    let s = usize::try_from(from + n + 10).unwrap();
    let at = usize::try_from(from - 1).unwrap();
    assert!(r.rate[s].0 >= 0.9 * r.rate[at].0, "{ctx}");
}

#[test]
fn after_a_suspension_with_retry_after_the_pace_comes_back() {
    comes_back(true, 3);
    comes_back(true, 60);
}

#[test]
fn after_a_suspension_without_retry_after_the_pace_comes_back() {
    comes_back(false, 3);
    comes_back(false, 60);
}

/// `r=0;t=1` under a 200/s policy: on a success the next request's share of the window
/// (a token bucket's next token), on a throttle the whole reset.
#[test]
fn an_exhausted_success_pauses_one_interval_a_throttle_until_the_reset() {
    let clock = ManualClock::new(UNIX_EPOCH);
    let t0 = clock.monotonic();
    let rl = RateLimitInfo {
        source: RateLimitSource::Ietf,
        policy: None,
        limit: Some(200),
        remaining: Some(0),
        reset: Some(Duration::from_secs(1)),
        window: Some(Duration::from_secs(1)),
        concurrency: None,
    };
    let p = Pacer::new(PacerConfig::default(), t0);
    let ok = Verdict {
        class: VerdictClass::Success,
        reason: "success".into(),
        retry_after: None,
        rate_limit: Some(rl.clone()),
        secondary_limit: false,
    };
    p.on_verdict_for(t0, t0, &ok);
    assert_eq!(p.paused_until(t0), Some(t0 + 5 * MS));
    let refused = Verdict {
        class: VerdictClass::Throttle,
        ..ok
    };
    let t1 = t0 + 10 * MS;
    p.on_verdict_for(t1, t1, &refused);
    assert_eq!(p.paused_until(t1), Some(t1 + Duration::from_secs(1)));
}
