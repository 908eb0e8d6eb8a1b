//! The session's decisions in virtual time: every rule the outbox and the simulator rely on.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, StatusCode};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::classify::{Observation, TransportFailure, VerdictClass};
use crate::clock::{Clock, ManualClock};
use crate::pacer::PacerConfig;
use crate::retry_after::DelayReason;

struct Rig {
    clock: ManualClock,
    session: Session,
    rng: ChaCha8Rng,
}

impl Rig {
    fn new(cfg: SessionConfig) -> Self {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000));
        Self {
            session: Session::new(cfg, clock.monotonic()),
            clock,
            rng: ChaCha8Rng::seed_from_u64(3),
        }
    }

    /// A session whose pacer starts at 1,000/s: slots never hold a test up.
    fn fast() -> Self {
        Self::new(SessionConfig {
            pacer: PacerConfig {
                initial_rate: 1000.0,
                ..PacerConfig::default()
            },
            ..SessionConfig::default()
        })
    }

    fn mono(&self) -> Instant {
        self.clock.monotonic()
    }

    fn wall(&self) -> SystemTime {
        self.clock.now()
    }

    fn poll(&mut self, d: &mut Delivery) -> Step {
        let (m, w) = (self.mono(), self.wall());
        d.poll(&self.session, m, w, &mut self.rng)
    }

    /// Poll, waiting out every `WaitUntil`, until the delivery sends or hands back.
    fn until_sent(&mut self, d: &mut Delivery) -> Step {
        for _ in 0..100 {
            match self.poll(d) {
                Step::WaitUntil(at) => self.clock.advance(at - self.mono()),
                other => return other,
            }
        }
        panic!("no decision after 100 waits");
    }

    fn answer(&mut self, d: &mut Delivery, status: u16, headers: &[(&str, &str)]) -> Answer {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let obs = Observation::Http {
            status: StatusCode::from_u16(status).unwrap(),
            headers: &map,
            body: b"",
        };
        let (m, w) = (self.mono(), self.wall());
        d.on_answer(&self.session, m, w, &obs, &mut self.rng)
    }

    fn fail(&mut self, d: &mut Delivery) -> Answer {
        let obs = Observation::Transport(TransportFailure::Connect);
        let (m, w) = (self.mono(), self.wall());
        d.on_answer(&self.session, m, w, &obs, &mut self.rng)
    }

    fn retry_of(&self, window_attempts: u32) -> ItemContext {
        ItemContext {
            window_attempts,
            window_start: self.wall(),
            role: BudgetRole::Retry,
            send_by: None,
        }
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn a_throttle_pauses_the_host_and_a_long_pause_hands_items_back() {
    let mut r = Rig::new(SessionConfig::default());
    let mut d = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut d), Step::Send);
    let a = r.answer(&mut d, 429, &[("retry-after", "30")]);
    assert_eq!(a.verdict.class, VerdictClass::Throttle);
    assert_eq!(a.decision, Decision::Retry { after: secs(30) });
    assert_eq!(a.delay.unwrap().reason, DelayReason::Honoured);
    // Every other item now waits for the host, without being held through the pause.
    let mut other = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(
        r.poll(&mut other),
        Step::HandBack {
            after: secs(30),
            reason: HandBackReason::ProviderPaused
        }
    );
    // Within `hold_through_pause` of the end, a delivery waits instead, and sends at the end
    // of the pause, not before.
    r.clock.advance(secs(29));
    let end = r.mono() + secs(1);
    let mut late = r.session.delivery(ItemContext::first(r.wall()));
    assert!(matches!(r.poll(&mut late), Step::WaitUntil(_)));
    assert_eq!(r.until_sent(&mut late), Step::Send);
    assert_eq!(r.mono(), end);
}

#[test]
fn a_delivery_takes_no_slot_beyond_the_horizon_and_the_rate_of_then_applies() {
    let cfg = SessionConfig {
        pacer: PacerConfig {
            initial_rate: 10.0,
            ..PacerConfig::default()
        },
        ..SessionConfig::default()
    };
    let mut r = Rig::new(cfg);
    let t0 = r.mono();
    // 40 deliveries at 10/s: those whose slot lies within the horizon (two send intervals,
    // 200 ms) take one; the rest wait without one (a queue of 4 s of slots would hold them
    // at 10/s whatever comes next).
    let mut ds: Vec<Delivery> = (0..40)
        .map(|_| r.session.delivery(ItemContext::first(r.wall())))
        .collect();
    let steps: Vec<Step> = ds.iter_mut().map(|d| r.poll(d)).collect();
    let holding = r.session.pacer().slot_counts().total();
    assert_eq!(holding, 3, "{steps:?}");
    for s in &steps[3..] {
        assert_eq!(*s, Step::WaitUntil(t0 + Duration::from_millis(100)));
    }
    // The rate doubles before they ask again: the queue runs at the new rate at once.
    let ok = crate::classify::Verdict {
        class: VerdictClass::Success,
        reason: String::new(),
        retry_after: None,
        rate_limit: None,
        secondary_limit: false,
    };
    for _ in 0..2 {
        r.clock.advance(Duration::from_millis(100));
        let now = r.mono();
        r.session.pacer().on_verdict_for(now, t0, &ok);
    }
    let rate = r.session.pacer().rate();
    assert!(rate > 10.0, "{rate}");
    let gap = Duration::from_secs_f64(1.0 / rate);
    let first = t0 + Duration::from_millis(300);
    assert_eq!(r.poll(&mut ds[3]), Step::WaitUntil(first));
    let second = match r.poll(&mut ds[4]) {
        Step::WaitUntil(at) => at,
        other => panic!("{other:?}"),
    };
    assert!(second - first <= gap, "{:?} at {rate}/s", second - first);
}

#[test]
fn retry_after_zero_is_floored_and_a_day_is_capped() {
    let mut r = Rig::new(SessionConfig::default());
    // A capped delay is the cap less up to a tenth of it (jitter against a herd).
    for (value, least, most, reason) in [
        ("0", secs(1), secs(1), DelayReason::Floored),
        ("86400", secs(540), secs(600), DelayReason::Capped),
    ] {
        let mut d = r.session.delivery(ItemContext::first(r.wall()));
        assert_eq!(r.until_sent(&mut d), Step::Send);
        let a = r.answer(&mut d, 403, &[("retry-after", value)]);
        assert_eq!(a.verdict.class, VerdictClass::Throttle, "{value}");
        let Decision::Retry { after } = a.decision else {
            panic!("{value}: {:?}", a.decision);
        };
        assert!(after >= least && after <= most, "{value}: {after:?}");
        assert_eq!(a.delay.unwrap().reason, reason);
        r.clock.advance(most);
    }
}

#[test]
fn a_garbage_retry_after_waits_long_with_jitter() {
    let mut r = Rig::new(SessionConfig::default());
    let mut d = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut d), Step::Send);
    let a = r.answer(&mut d, 429, &[("retry-after", "soon-ish")]);
    let delay = a.delay.unwrap();
    assert_eq!(delay.reason, DelayReason::Unparseable);
    assert!(
        delay.delay >= secs(300) && delay.delay <= secs(360),
        "{delay:?}"
    );
    assert_eq!(delay.raw.as_deref(), Some("soon-ish"));
}

#[test]
fn a_refused_retry_waits_instead_of_being_dropped() {
    let cfg = SessionConfig {
        budget: crate::RetryBudgetConfig {
            min_per_sec: 0,
            retry_ratio: 0.0,
            ..Default::default()
        },
        ..SessionConfig::default()
    };
    let mut r = Rig::new(cfg);
    let mut d = r.session.delivery(r.retry_of(1));
    match r.until_sent(&mut d) {
        Step::HandBack {
            after,
            reason: HandBackReason::RetryBudgetExhausted,
        } => assert!(after >= secs(5), "{after:?}"),
        other => panic!("{other:?}"),
    }
    // A first attempt still goes: it earns budget rather than spending it.
    let mut first = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut first), Step::Send);
}

#[test]
fn a_successful_retry_is_refunded() {
    let cfg = SessionConfig {
        budget: crate::RetryBudgetConfig {
            min_per_sec: 0,
            retry_ratio: 1.0,
            ..Default::default()
        },
        ..SessionConfig::default()
    };
    let mut r = Rig::new(cfg);
    let mut first = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut first), Step::Send);
    r.answer(&mut first, 202, &[]);
    // One first attempt allows one retry; succeeding gives it back, so a second is allowed.
    for _ in 0..2 {
        let mut d = r.session.delivery(r.retry_of(1));
        assert_eq!(r.until_sent(&mut d), Step::Send);
        assert_eq!(r.answer(&mut d, 202, &[]).decision, Decision::Delivered);
    }
    let snap = r.session.budget().snapshot(r.mono());
    assert_eq!(snap.retries, 0);
}

#[test]
fn an_item_past_its_send_by_goes_back_unsent() {
    let mut r = Rig::new(SessionConfig::default());
    let ctx = ItemContext {
        send_by: Some(r.wall()),
        ..ItemContext::first(r.wall())
    };
    let mut d = r.session.delivery(ctx);
    assert_eq!(
        r.until_sent(&mut d),
        Step::HandBack {
            after: Duration::ZERO,
            reason: HandBackReason::LeaseNearExpiry
        }
    );
    assert_eq!(d.sends(), 0);
}

#[test]
fn credentials_are_refreshed_once_then_the_item_is_deferred() {
    let mut r = Rig::new(SessionConfig::default());
    let mut d = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut d), Step::Send);
    assert_eq!(r.answer(&mut d, 401, &[]).decision, Decision::Resend);
    assert_eq!(r.until_sent(&mut d), Step::Send);
    let a = r.answer(&mut d, 401, &[]);
    assert_eq!(
        a.decision,
        Decision::Deferred(DeferReason::CredentialsRejected {
            last: "http_401".into()
        })
    );
    assert_eq!(d.sends(), 2);
}

#[test]
fn the_attempt_cap_counts_this_delivery_s_requests() {
    let mut r = Rig::new(SessionConfig::default());
    let mut d = r.session.delivery(r.retry_of(11));
    assert_eq!(r.until_sent(&mut d), Step::Send);
    let a = r.answer(&mut d, 503, &[]);
    assert!(
        matches!(&a.decision, Decision::Deferred(DeferReason::AttemptCap { cap: 12, last }) if last == "http_503"),
        "{a:?}"
    );
}

#[test]
fn connection_failures_pause_the_host_with_backoff_once_per_round() {
    let cfg = SessionConfig {
        pacer: PacerConfig {
            initial_rate: 100.0,
            ..PacerConfig::default()
        },
        ..SessionConfig::default()
    };
    let mut r = Rig::new(cfg);
    // Forty requests already on the wire when the host goes down.
    let mut wire: Vec<Delivery> = (0..40)
        .map(|_| {
            let mut d = r.session.delivery(ItemContext::first(r.wall()));
            assert_eq!(r.until_sent(&mut d), Step::Send);
            d
        })
        .collect();
    let began: Vec<bool> = wire.iter_mut().map(|d| r.fail(d).outage_began).collect();
    assert_eq!(
        began.iter().filter(|b| **b).count(),
        1,
        "warn once per episode"
    );
    assert_eq!(
        r.session.outage_streak(),
        1,
        "old requests do not grow the pause"
    );
    let left = r.session.pacer().paused_until(r.mono()).unwrap() - r.mono();
    assert_eq!(left, secs(1));
    // The next request, sent after the pause, fails too: the pause doubles.
    r.clock.advance(left);
    let mut d = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut d), Step::Send);
    assert!(!r.fail(&mut d).outage_began);
    let left = r.session.pacer().paused_until(r.mono()).unwrap() - r.mono();
    assert_eq!(left, secs(2));
    // Any answer ends the episode.
    r.clock.advance(left);
    let mut d = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut d), Step::Send);
    r.answer(&mut d, 202, &[]);
    assert_eq!(r.session.outage_streak(), 0);
}

/// A connection never made is no attempt: an item one attempt short of its cap is refused
/// a connection again and again and is never deferred for it, waits at least the host's
/// outage pause each time, and its sends are not counted. A failure after the request went
/// out still is an attempt and reaches the cap.
#[test]
fn refused_connections_do_not_count_toward_the_attempt_cap() {
    let cfg = SessionConfig {
        retry: RetryConfig {
            max_attempts: 3,
            ..RetryConfig::default()
        },
        ..SessionConfig::default()
    };
    let mut r = Rig::new(cfg);
    for refused in 1..=5u32 {
        let mut d = r.session.delivery(r.retry_of(2));
        assert_eq!(r.until_sent(&mut d), Step::Send);
        assert_eq!(d.sends(), 1);
        let a = r.fail(&mut d);
        assert!(!a.sent);
        assert_eq!(d.sends(), 0, "refusal {refused} was counted");
        let Decision::Retry { after } = a.decision else {
            panic!("refusal {refused}: {:?}", a.decision)
        };
        let pause = r.session.pacer().paused_until(r.mono()).unwrap() - r.mono();
        assert!(
            after >= pause,
            "{after:?} before the outage pause {pause:?}"
        );
        r.clock.advance(after);
    }
    assert_eq!(r.session.outage_streak(), 5, "the outage still backs off");
    // Sent, then no answer: an attempt, the third, and the cap.
    let mut d = r.session.delivery(r.retry_of(2));
    assert_eq!(r.until_sent(&mut d), Step::Send);
    let obs = Observation::Transport(TransportFailure::AfterSend { replay_safe: true });
    let (m, w) = (r.mono(), r.wall());
    let a = d.on_answer(&r.session, m, w, &obs, &mut r.rng);
    assert!(a.sent);
    assert!(
        matches!(a.decision, Decision::Deferred(_)),
        "{:?}",
        a.decision
    );
}

/// A refused connection is no attempt, but the message still ages: past its maximum age it
/// is parked for a person (deferred, never lost) rather than waiting on a host that stays
/// down for ever.
#[test]
fn refused_connections_defer_an_item_past_its_maximum_age() {
    let cfg = SessionConfig {
        retry: RetryConfig {
            max_age: secs(60),
            ..RetryConfig::default()
        },
        ..SessionConfig::default()
    };
    let mut r = Rig::new(cfg);
    let mut item = r.retry_of(0);
    item.window_start = r.wall() - secs(30);
    let mut d = r.session.delivery(item);
    assert_eq!(r.until_sent(&mut d), Step::Send);
    let a = r.fail(&mut d);
    assert!(!a.sent);
    assert!(
        matches!(a.decision, Decision::Retry { .. }),
        "{:?}",
        a.decision
    );
    let Decision::Retry { after } = a.decision else {
        unreachable!()
    };
    r.clock.advance(after.max(secs(31)));
    let mut d = r.session.delivery(item);
    assert_eq!(r.until_sent(&mut d), Step::Send);
    let a = r.fail(&mut d);
    assert!(!a.sent);
    assert!(
        matches!(a.decision, Decision::Deferred(DeferReason::MaxAge { .. })),
        "{:?}",
        a.decision
    );
}

#[test]
fn a_slot_voided_by_a_new_pause_is_reserved_again_after_it() {
    let mut r = Rig::new(SessionConfig {
        pacer: PacerConfig {
            initial_rate: 1.0,
            ..PacerConfig::default()
        },
        ..SessionConfig::default()
    });
    // Use the first slot, so the next one lies a second ahead.
    let mut first = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut first), Step::Send);
    let mut d = r.session.delivery(ItemContext::first(r.wall()));
    let Step::WaitUntil(at) = r.poll(&mut d) else {
        panic!("expected a wait")
    };
    // While it waits, a throttle pauses the host for 2 s (within the hold).
    r.answer(&mut first, 429, &[("retry-after", "2")]);
    r.clock.advance(at - r.mono());
    match r.poll(&mut d) {
        Step::WaitUntil(again) => assert!(again >= r.mono() + secs(1), "{again:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_slot_beyond_send_by_hands_the_item_back_at_once() {
    let mut r = Rig::new(SessionConfig {
        pacer: PacerConfig {
            initial_rate: 1.0,
            ..PacerConfig::default()
        },
        ..SessionConfig::default()
    });
    let mut first = r.session.delivery(ItemContext::first(r.wall()));
    assert_eq!(r.until_sent(&mut first), Step::Send);
    // The next slot is 1 s away, but this item must be sent within 0.5 s.
    let ctx = ItemContext {
        send_by: Some(r.wall() + Duration::from_millis(500)),
        ..ItemContext::first(r.wall())
    };
    let mut d = r.session.delivery(ctx);
    assert_eq!(
        r.poll(&mut d),
        Step::HandBack {
            after: secs(1),
            reason: HandBackReason::LeaseNearExpiry
        }
    );
    // The slot it could not use was not taken: handing back item after item leaves the
    // next slot where it was (taking them pushed the queue ahead of every sender for ever).
    for _ in 0..100 {
        let mut d = r.session.delivery(ctx);
        assert!(matches!(r.poll(&mut d), Step::HandBack { .. }));
    }
    assert_eq!(r.session.pacer().next_slot(r.mono()), r.mono() + secs(1));
}

mod in_flight;
mod refusal;
