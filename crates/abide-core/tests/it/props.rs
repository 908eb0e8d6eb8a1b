//! Property tests: parsers never panic on any bytes and every decision is bounded.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abide_core::ratelimit::{MAX_QUOTA, MAX_RESET};
use abide_core::retry_after::MIN_FLOOR;
use abide_core::{parse_rate_limit, DelayReason, RetryAfterPolicy};
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn policy() -> impl Strategy<Value = RetryAfterPolicy> {
    (0u64..120, 0u64..7200, 0u64..7200, 0u64..600).prop_map(|(floor, span, wait, jitter)| {
        RetryAfterPolicy {
            floor: Duration::from_secs(floor),
            cap: Duration::from_secs(floor + span),
            unparseable_wait: Duration::from_secs(wait),
            unparseable_jitter: Duration::from_secs(jitter),
        }
    })
}

fn wall_time() -> impl Strategy<Value = SystemTime> {
    // 1970 .. 2200, to the second.
    (0u64..7_258_118_400).prop_map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

/// Values that look like Retry-After (digits, dates, lists) as well as noise.
fn retry_after_like() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        "[ \t]{0,2}[+-]?[0-9]{0,25}(\\.[0-9]{0,3})?[ \t]{0,2}".prop_map(String::into_bytes),
        "(Mon|Sun|Monday|Sunday)[, ]{1,2}[0-9 ]{2}[ -](Jun|Nov)[ -][0-9]{2,4} [0-9:]{8}( GMT)?"
            .prop_map(String::into_bytes),
        "[0-9]{1,4}(, ?[0-9a-z]{0,4}){0,3}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #[test]
    fn decide_is_always_within_floor_and_cap(
        p in policy(),
        lines in proptest::collection::vec(retry_after_like(), 0..4),
        now in wall_time(),
        seed in any::<u64>(),
    ) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let d = p.decide(lines.iter().map(Vec::as_slice), now, &mut rng);
        prop_assert_eq!(d.is_none(), lines.is_empty());
        if let Some(d) = d {
            // The configured floor, raised to the hard minimum; the cap never below it.
            let floor = p.floor.max(MIN_FLOOR);
            prop_assert!(d.delay >= floor && d.delay <= p.cap.max(floor), "{:?} {:?}", d, p);
            prop_assert!(d.raw.is_some());
            if d.reason == DelayReason::Unparseable {
                prop_assert!(d.retry_after.is_none());
                // Never shorter than the configured wait (unless the cap says so).
                prop_assert!(d.delay >= p.unparseable_wait.clamp(p.floor, p.cap));
            }
        }
    }

    #[test]
    fn unparseable_never_yields_less_than_the_floor(
        p in policy(),
        garbage in "[a-zA-Z!?%*_ -]{0,20}",
        seed in any::<u64>(),
    ) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let d = p.decide([garbage.as_bytes()], UNIX_EPOCH, &mut rng).unwrap();
        prop_assert_eq!(d.reason, DelayReason::Unparseable);
        prop_assert!(d.delay >= p.floor);
        prop_assert!(d.delay >= p.unparseable_wait.clamp(p.floor, p.cap));
    }

    #[test]
    fn delay_seconds_within_range_are_honoured_exactly(
        p in policy(),
        offset in 0u64..7200,
        pad in "[ \t]{0,3}",
    ) {
        let secs = p.floor.as_secs() + offset % (p.cap.as_secs() - p.floor.as_secs() + 1);
        // 0 s is below the hard minimum whatever the configured floor (see MIN_FLOOR).
        prop_assume!(Duration::from_secs(secs) >= MIN_FLOOR);
        let value = format!("{pad}{secs}{pad}");
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let d = p.decide([value.as_bytes()], UNIX_EPOCH, &mut rng).unwrap();
        prop_assert_eq!(d.delay, Duration::from_secs(secs));
        prop_assert_eq!(d.retry_after, Some(Duration::from_secs(secs)));
        let expected = if d.delay == p.floor && secs < p.floor.as_secs() {
            DelayReason::Floored
        } else {
            DelayReason::Honoured
        };
        prop_assert_eq!(d.reason, expected);
    }

    #[test]
    fn every_http_date_form_round_trips(now in wall_time(), ahead in 0u64..100_000) {
        let at = now + Duration::from_secs(ahead);
        let imf = httpdate::fmt_http_date(at);
        let parsed = abide_core::retry_after::parse_at(imf.as_bytes(), now).unwrap();
        prop_assert_eq!(parsed.delay_from(now), Duration::from_secs(ahead));
    }

    #[test]
    fn rate_limit_parsing_never_panics_and_is_clamped(
        values in proptest::collection::vec(
            (0usize..10, "[ -~]{0,40}"),
            0..6,
        ),
        now in wall_time(),
    ) {
        const NAMES: [&str; 10] = [
            "ratelimit", "ratelimit-policy", "ratelimit-limit", "ratelimit-remaining",
            "ratelimit-reset", "x-ratelimit-limit", "x-ratelimit-remaining",
            "x-ratelimit-reset", "x-ratelimit-reset-after", "retry-after",
        ];
        let mut h = HeaderMap::new();
        for (i, v) in &values {
            if let Ok(v) = HeaderValue::from_str(v) {
                h.append(HeaderName::from_static(NAMES[*i]), v);
            }
        }
        if let Some(info) = parse_rate_limit(&h, now) {
            prop_assert!(info.limit.is_none_or(|l| l <= MAX_QUOTA));
            prop_assert!(info.remaining.is_none_or(|r| r <= MAX_QUOTA));
            prop_assert!(info.reset.is_none_or(|r| r <= MAX_RESET));
            prop_assert!(info.window.is_none_or(|w| w <= MAX_RESET && !w.is_zero()));
            if let Some(rate) = info.advertised_rate() {
                prop_assert!((0.001..=100_000.0).contains(&rate));
            }
        }
        let _ = abide_core::parse_warnings(&h);
    }
}
