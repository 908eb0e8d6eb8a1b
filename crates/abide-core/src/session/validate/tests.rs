//! Every setting outside its range is refused with its path; every configuration inside
//! the ranges makes a session that decides without panicking or overflowing.

use crate::classify::VerdictClass;
use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, StatusCode};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::super::limits::{self, Limits};
use super::super::{Decision, ItemContext, Session, Step};
use super::*;
use crate::classify::{Observation, TransportFailure};
use crate::clock::{Clock, ManualClock};

fn refused(cfg: &SessionConfig) -> SettingError {
    cfg.validate().expect_err("refused")
}

#[test]
fn the_defaults_are_valid() {
    assert_eq!(SessionConfig::default().validate(), Ok(()));
}

/// The values issue reports named as accepted although no run needs them.
#[test]
fn values_no_run_needs_are_refused_naming_the_setting() {
    let mut c = SessionConfig::default();
    c.retry.backoff.cap = Duration::from_secs(1 << 63);
    assert_eq!(refused(&c).setting(), "retry.backoff.cap");

    let mut c = SessionConfig::default();
    c.budget.retry_ratio = 1e9;
    let e = refused(&c);
    assert_eq!(
        e.to_string(),
        "budget.retry_ratio: 1000000000 is outside 0..=1000"
    );

    let mut c = SessionConfig::default();
    c.classify.http.insert(999, VerdictClass::Retry);
    let e = refused(&c);
    assert_eq!(e.setting(), "classify.http.999");
    assert!(e.to_string().contains("100-599"), "{e}");

    let mut c = SessionConfig::default();
    c.classify.http.insert(200, VerdictClass::Terminal);
    assert_eq!(refused(&c).setting(), "classify.http.200");
    // A non-success answer may be called a success (a 409 that means "already there").
    let mut c = SessionConfig::default();
    c.classify.http.insert(409, VerdictClass::Success);
    c.classify.http.insert(204, VerdictClass::Success);
    assert_eq!(c.validate(), Ok(()));

    let mut c = SessionConfig::default();
    c.classify.smpp.insert(0, VerdictClass::Throttle);
    assert_eq!(refused(&c).setting(), "classify.smpp.0x0");
    let mut c = SessionConfig::default();
    c.classify.smpp.insert(0x58, VerdictClass::Retry);
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn a_bound_set_by_another_setting_is_named_in_the_range() {
    let mut c = SessionConfig::default();
    c.retry.backoff.base = Duration::from_secs(2);
    c.retry.backoff.cap = Duration::from_secs(1);
    let e = refused(&c);
    assert_eq!(
        e.to_string(),
        "retry.backoff.cap: 1s is outside retry.backoff.base (2s)..=86400s"
    );
    let mut c = SessionConfig::default();
    c.pacer.throttle_pause = Duration::from_secs(5);
    c.pacer.max_throttle_pause = Duration::from_secs(2);
    assert_eq!(refused(&c).setting(), "pacer.max_throttle_pause");
    let mut c = SessionConfig::default();
    c.pacer.min_rate = 50.0;
    c.pacer.max_rate = 10.0;
    assert_eq!(refused(&c).setting(), "pacer.max_rate");
    let mut c = SessionConfig::default();
    c.retry_after.floor = Duration::from_secs(30);
    c.retry_after.cap = Duration::from_secs(10);
    assert_eq!(refused(&c).setting(), "retry_after.cap");
    let c = SessionConfig {
        outage_pause: Duration::from_secs(60),
        max_outage_pause: Duration::from_secs(30),
        ..SessionConfig::default()
    };
    assert_eq!(refused(&c).setting(), "max_outage_pause");
}

#[test]
fn nan_and_infinities_are_outside_every_range() {
    for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut c = SessionConfig::default();
        c.pacer.headroom = v;
        let e = refused(&c);
        assert_eq!(e.setting(), "pacer.headroom");
        assert!(e.to_string().contains(&v.to_string()), "{e}");
    }
}

#[test]
fn the_ranges_lie_within_the_clamps() {
    // A validated value is used as written: the pacer's sanitising leaves it alone.
    let p = crate::pacer::PacerConfig {
        initial_rate: limits::PACER_INITIAL_RATE.max,
        min_rate: limits::PACER_MIN_RATE.min,
        max_rate: limits::PACER_MAX_RATE.max,
        burst: limits::PACER_BURST.max,
        decrease_factor: limits::PACER_DECREASE_FACTOR.min,
        increase_per_sec: limits::PACER_INCREASE_PER_SEC.max,
        throttle_threshold: limits::PACER_THROTTLE_THRESHOLD.max,
        window: limits::PACER_WINDOW.min,
        headroom: limits::PACER_HEADROOM.min,
        recovery: limits::PACER_RECOVERY.max,
        throttle_pause: limits::PACER_THROTTLE_PAUSE.min,
        max_throttle_pause: limits::PACER_MAX_THROTTLE_PAUSE.max,
    };
    assert_eq!(p.sanitized(), p);
    let p = crate::pacer::PacerConfig {
        min_rate: limits::PACER_MIN_RATE.max,
        max_rate: limits::PACER_MAX_RATE.max,
        initial_rate: limits::PACER_INITIAL_RATE.max,
        decrease_factor: limits::PACER_DECREASE_FACTOR.max,
        window: limits::PACER_WINDOW.max,
        headroom: limits::PACER_HEADROOM.max,
        recovery: limits::PACER_RECOVERY.min,
        throttle_pause: limits::PACER_THROTTLE_PAUSE.max,
        max_throttle_pause: limits::PACER_MAX_THROTTLE_PAUSE.max,
        ..crate::pacer::PacerConfig::default()
    };
    assert_eq!(p.sanitized(), p);
}

/// One numeric setting: its path, its range as `f64` bounds, and how to set it from an
/// `f64` (durations in seconds, counts truncated).
struct Field {
    path: &'static str,
    lo: f64,
    hi: f64,
    set: fn(&mut SessionConfig, f64),
}

fn count(l: Limits<u32>) -> (f64, f64) {
    (f64::from(l.min), f64::from(l.max))
}

fn span(l: Limits<Duration>) -> (f64, f64) {
    (l.min.as_secs_f64(), l.max.as_secs_f64())
}

fn n(v: f64) -> u32 {
    // Out-of-range values above u32::MAX are not representable: saturate (still outside).
    v as u32
}

fn d(v: f64) -> Duration {
    Duration::try_from_secs_f64(v).unwrap_or(Duration::MAX)
}

macro_rules! fields {
    ($( $path:literal, $range:expr, |$c:ident, $v:ident| $set:expr; )+) => {
        vec![$({
            let (lo, hi) = $range;
            Field { path: $path, lo, hi, set: |$c: &mut SessionConfig, $v: f64| $set }
        }),+]
    };
}

fn fields() -> Vec<Field> {
    use limits::*;
    let f = |l: Limits<f64>| (l.min, l.max);
    fields! {
        "retry.max_attempts", count(MAX_ATTEMPTS), |c, v| c.retry.max_attempts = n(v);
        "retry.unknown_max_attempts", count(UNKNOWN_MAX_ATTEMPTS), |c, v| c.retry.unknown_max_attempts = n(v);
        "retry.max_age", span(MAX_AGE), |c, v| c.retry.max_age = d(v);
        "retry.backoff.base", span(BACKOFF_BASE), |c, v| {
            c.retry.backoff.base = d(v);
            c.retry.backoff.cap = c.retry.backoff.cap.max(d(v));
        };
        "retry.backoff.cap", span(BACKOFF_CAP), |c, v| {
            c.retry.backoff.cap = d(v);
            c.retry.backoff.base = c.retry.backoff.base.min(d(v)).max(BACKOFF_BASE.min);
        };
        "budget.ttl", span(BUDGET_TTL), |c, v| c.budget.ttl = d(v);
        "budget.min_per_sec", count(BUDGET_MIN_PER_SEC), |c, v| c.budget.min_per_sec = n(v);
        "budget.retry_ratio", f(BUDGET_RETRY_RATIO), |c, v| c.budget.retry_ratio = v;
        "pacer.initial_rate", f(PACER_INITIAL_RATE), |c, v| c.pacer.initial_rate = v;
        "pacer.min_rate", f(PACER_MIN_RATE), |c, v| {
            c.pacer.min_rate = v;
            c.pacer.max_rate = PACER_MAX_RATE.max;
        };
        "pacer.max_rate", f(PACER_MAX_RATE), |c, v| {
            c.pacer.max_rate = v;
            c.pacer.min_rate = PACER_MIN_RATE.min;
        };
        "pacer.burst", f(PACER_BURST), |c, v| c.pacer.burst = v;
        "pacer.decrease_factor", f(PACER_DECREASE_FACTOR), |c, v| c.pacer.decrease_factor = v;
        "pacer.increase_per_sec", f(PACER_INCREASE_PER_SEC), |c, v| c.pacer.increase_per_sec = v;
        "pacer.throttle_threshold", f(PACER_THROTTLE_THRESHOLD), |c, v| c.pacer.throttle_threshold = v;
        "pacer.window", span(PACER_WINDOW), |c, v| c.pacer.window = d(v);
        "pacer.headroom", f(PACER_HEADROOM), |c, v| c.pacer.headroom = v;
        "pacer.recovery", span(PACER_RECOVERY), |c, v| c.pacer.recovery = d(v);
        "pacer.throttle_pause", span(PACER_THROTTLE_PAUSE), |c, v| {
            c.pacer.throttle_pause = d(v);
            c.pacer.max_throttle_pause = PACER_MAX_THROTTLE_PAUSE.max;
        };
        "pacer.max_throttle_pause", span(PACER_MAX_THROTTLE_PAUSE), |c, v| {
            c.pacer.max_throttle_pause = d(v);
            c.pacer.throttle_pause = PACER_THROTTLE_PAUSE.min;
        };
        "retry_after.floor", span(RETRY_AFTER_FLOOR), |c, v| {
            c.retry_after.floor = d(v);
            c.retry_after.cap = RETRY_AFTER_CAP.max;
        };
        "retry_after.cap", span(RETRY_AFTER_CAP), |c, v| {
            c.retry_after.cap = d(v);
            c.retry_after.floor = RETRY_AFTER_FLOOR.min;
        };
        "retry_after.unparseable_wait", span(UNPARSEABLE_WAIT), |c, v| c.retry_after.unparseable_wait = d(v);
        "retry_after.unparseable_jitter", span(UNPARSEABLE_JITTER), |c, v| c.retry_after.unparseable_jitter = d(v);
        "budget_denied_delay", span(BUDGET_DENIED_DELAY), |c, v| c.budget_denied_delay = d(v);
        "hold_through_pause", span(HOLD_THROUGH_PAUSE), |c, v| c.hold_through_pause = d(v);
        "max_admit_rounds", count(MAX_ADMIT_ROUNDS), |c, v| c.max_admit_rounds = n(v);
        "outage_pause", span(OUTAGE_PAUSE), |c, v| {
            c.outage_pause = d(v);
            c.max_outage_pause = MAX_OUTAGE_PAUSE.max;
        };
        "max_outage_pause", span(MAX_OUTAGE_PAUSE), |c, v| {
            c.max_outage_pause = d(v);
            c.outage_pause = OUTAGE_PAUSE.min;
        };
        "refusal_streak", count(REFUSAL_STREAK), |c, v| c.refusal_streak = n(v);
        "refusal_span", span(REFUSAL_SPAN), |c, v| c.refusal_span = d(v);
        "refusal_pause", span(REFUSAL_PAUSE), |c, v| c.refusal_pause = d(v);
    }
}

/// A value outside `lo..=hi`: below (when anything is), above, or not a number.
fn outside(lo: f64, hi: f64, pick: u8, t: f64) -> f64 {
    match pick % 4 {
        0 if lo > 0.0 => lo * t * 0.999,
        1 => hi * (1.001 + t * 1e6) + 1.0,
        2 => f64::NAN,
        _ => hi + 1.0 + t * 1e30,
    }
}

#[test]
fn every_numeric_setting_is_checked() {
    // As many fields as the validator checks numbers: the proptests cover them all.
    assert_eq!(fields().len(), 32);
    for f in fields() {
        let mut c = SessionConfig::default();
        (f.set)(&mut c, f.lo);
        assert_eq!(c.validate(), Ok(()), "{} at its minimum", f.path);
        let mut c = SessionConfig::default();
        (f.set)(&mut c, f.hi);
        assert_eq!(c.validate(), Ok(()), "{} at its maximum", f.path);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_value_outside_its_range_is_refused_with_its_path(
        i in 0usize..32, pick in any::<u8>(), t in 0.0f64..1.0,
    ) {
        let fields = fields();
        let f = &fields[i % fields.len()];
        let v = outside(f.lo, f.hi, pick, t);
        let mut c = SessionConfig::default();
        (f.set)(&mut c, v);
        // Counts and durations cannot hold every float: skip a value that lands inside
        // once converted (NaN becomes 0, which is inside for some counts).
        let converted_inside = {
            let mut probe = SessionConfig::default();
            (f.set)(&mut probe, v);
            probe.validate().is_ok()
        };
        prop_assume!(!converted_inside);
        let e = c.validate().unwrap_err();
        prop_assert_eq!(e.setting(), f.path, "{}", e);
        prop_assert!(e.to_string().starts_with(f.path), "{}", e);
    }

    #[test]
    fn every_configuration_inside_the_ranges_decides_without_overflow(
        shares in proptest::collection::vec(0.0f64..=1.0, 32),
        seed in any::<u64>(),
        script in proptest::collection::vec(0u8..6, 1..12),
    ) {
        let mut c = SessionConfig::default();
        for (f, s) in fields().iter().zip(&shares) {
            // Logarithmic spread: small and huge values alike.
            let v = if f.lo > 0.0 {
                f.lo * (f.hi / f.lo).powf(*s)
            } else {
                f.hi * s * s
            };
            (f.set)(&mut c, v.clamp(f.lo, f.hi));
        }
        prop_assume!(c.validate().is_ok());
        decide_a_few(c, seed, &script);
    }
}

/// Drive one item through `script` (answers by number) on a session built from `cfg`:
/// nothing panics, every wait is finite and bounded by the longest configured pause.
fn decide_a_few(cfg: SessionConfig, seed: u64, script: &[u8]) {
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let longest = [
        cfg.retry_after.cap,
        cfg.retry.backoff.cap,
        cfg.max_outage_pause,
        cfg.refusal_pause.max(cfg.retry_after.cap),
        crate::pacer::MAX_PAUSE,
        crate::ratelimit::MAX_RESET,
        crate::ratelimit::github::SECONDARY_MAX_WAIT,
    ]
    .into_iter()
    .max()
    .unwrap_or_default();
    let session = Session::new(cfg, clock.monotonic());
    let mut item = ItemContext::first(clock.now());
    for &answer in script {
        let mut delivery = session.delivery(item);
        let mut sent = false;
        for _ in 0..64 {
            match delivery.poll(&session, clock.monotonic(), clock.now(), &mut rng) {
                Step::Send => {
                    sent = true;
                    break;
                }
                Step::WaitUntil(at) => {
                    let wait = at.saturating_duration_since(clock.monotonic());
                    assert!(wait <= longest * 2, "waits {wait:?}");
                    clock.advance(wait);
                }
                Step::HandBack { after, .. } => {
                    assert!(after <= longest * 2, "handed back for {after:?}");
                    clock.advance(after);
                    break;
                }
            }
        }
        if !sent {
            continue;
        }
        let headers = headers_for(answer);
        let obs = match answer {
            4 => Observation::Transport(TransportFailure::Connect),
            _ => Observation::Http {
                status: StatusCode::from_u16([429, 503, 403, 200, 0, 500][usize::from(answer)])
                    .unwrap_or(StatusCode::BAD_GATEWAY),
                headers: &headers,
                body: b"secondary rate limit",
            },
        };
        let a = delivery.on_answer(&session, clock.monotonic(), clock.now(), &obs, &mut rng);
        match a.decision {
            Decision::Retry { after } => {
                assert!(after <= longest * 2, "retry after {after:?}");
                clock.advance(after);
            }
            Decision::Delivered | Decision::Failed | Decision::Deferred(_) => {
                item = ItemContext::first(clock.now());
                continue;
            }
            Decision::Resend => {}
        }
        item = ItemContext {
            window_attempts: item.window_attempts.saturating_add(u32::from(a.sent)),
            role: super::super::BudgetRole::Retry,
            ..item
        };
    }
}

fn headers_for(answer: u8) -> HeaderMap {
    let mut h = HeaderMap::new();
    let pairs: &[(&str, &str)] = match answer {
        0 => &[("retry-after", "99999999999999999999")],
        1 => &[("retry-after", "soon")],
        2 => &[("x-github-request-id", "1"), ("x-ratelimit-remaining", "5")],
        3 => &[
            ("ratelimit-policy", "\"q\";q=1000000000;w=1"),
            ("ratelimit", "\"q\";r=0;t=86400"),
        ],
        _ => &[],
    };
    for (k, v) in pairs {
        h.append(
            http::HeaderName::from_static(k),
            http::HeaderValue::from_static(v),
        );
    }
    h
}
