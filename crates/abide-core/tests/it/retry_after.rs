//! Contract tests: every form RFC 9110 §10.2.3 allows for `Retry-After`, and every hostile
//! value from the incident seeds (0, 86400, an HTTP-date, garbage, absent).

use std::time::Duration;

use abide_core::retry_after::{is_lenient, parse, parse_at};
use abide_core::{DelayReason, RetryAfter, RetryAfterError, RetryAfterPolicy, RetryDelay};

use crate::support::{date, headers, now, rng};

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn decide(lines: &[&[u8]]) -> RetryDelay {
    RetryAfterPolicy::default()
        .decide(lines.iter().copied(), now(), &mut rng())
        .unwrap()
}

fn assert_unparseable(d: &RetryDelay) {
    assert_eq!(d.reason, DelayReason::Unparseable, "{d:?}");
    assert_eq!(d.retry_after, None);
    assert!(d.delay >= SECS(300) && d.delay <= SECS(360), "{d:?}");
}

// --- RFC 9110 forms -------------------------------------------------------------------

#[test]
fn delay_seconds() {
    assert_eq!(parse(b"120"), Ok(RetryAfter::Delay(SECS(120))));
    assert_eq!(parse(b"0"), Ok(RetryAfter::Delay(SECS(0))));
    assert_eq!(parse(b"007"), Ok(RetryAfter::Delay(SECS(7))));
}

#[test]
fn imf_fixdate() {
    let v = parse(b"Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
    assert_eq!(v, RetryAfter::Date(date("Sun, 06 Nov 1994 08:49:37 GMT")));
}

#[test]
fn obsolete_rfc850_date() {
    let v = parse_at(b"Sunday, 06-Nov-94 08:49:37 GMT", now()).unwrap();
    assert_eq!(v, RetryAfter::Date(date("Sun, 06 Nov 1994 08:49:37 GMT")));
}

#[test]
fn rfc850_two_digit_year_more_than_50_years_ahead_is_the_past_century() {
    // From 2026, "99" would be 2099 (73 years ahead), so it is 1999.
    let v = parse_at(b"Friday, 31-Dec-99 23:59:59 GMT", now()).unwrap();
    assert_eq!(v, RetryAfter::Date(date("Fri, 31 Dec 1999 23:59:59 GMT")));
    // "26" is this year.
    let v = parse_at(b"Monday, 15-Jun-26 08:02:31 GMT", now()).unwrap();
    assert_eq!(v, RetryAfter::Date(date("Mon, 15 Jun 2026 08:02:31 GMT")));
}

#[test]
fn asctime_date_with_space_padded_day() {
    let v = parse(b"Sun Nov  6 08:49:37 1994").unwrap();
    assert_eq!(v, RetryAfter::Date(date("Sun, 06 Nov 1994 08:49:37 GMT")));
    let v = parse(b"Mon Jun 15 08:02:31 2026").unwrap();
    assert_eq!(v, RetryAfter::Date(date("Mon, 15 Jun 2026 08:02:31 GMT")));
}

#[test]
fn all_three_date_forms_give_the_same_delay() {
    let p = RetryAfterPolicy::default();
    for v in [
        &b"Mon, 15 Jun 2026 08:02:31 GMT"[..],
        b"Monday, 15-Jun-26 08:02:31 GMT",
        b"Mon Jun 15 08:02:31 2026",
    ] {
        let d = p.decide([v], now(), &mut rng()).unwrap();
        assert_eq!(d.delay, SECS(151), "{}", String::from_utf8_lossy(v));
        assert_eq!(d.reason, DelayReason::Honoured);
        assert_eq!(d.retry_after, Some(SECS(151)));
    }
}

// --- hostile values from the seeds -----------------------------------------------------

#[test]
fn seed_http_date_is_converted_against_our_clock_not_zero() {
    let d = decide(&[b"Mon, 15 Jun 2026 08:02:31 GMT"]);
    assert_eq!(d.delay, SECS(151));
    assert_eq!(d.reason, DelayReason::Honoured);
    assert_eq!(d.raw.as_deref(), Some("Mon, 15 Jun 2026 08:02:31 GMT"));
}

#[test]
fn seed_zero_is_floored() {
    let d = decide(&[b"0"]);
    assert_eq!(d.delay, SECS(1));
    assert_eq!(d.reason, DelayReason::Floored);
    assert_eq!(d.retry_after, Some(SECS(0)));
    assert_eq!(d.raw.as_deref(), Some("0"));
}

#[test]
fn seed_86400_is_capped() {
    let d = decide(&[b"86400"]);
    assert_capped(&d);
    assert_eq!(d.reason, DelayReason::Capped);
    assert_eq!(d.retry_after, Some(SECS(86_400)));
}

#[test]
fn seed_garbage_is_a_long_jittered_wait_with_raw_kept() {
    let d = decide(&[b"soon"]);
    assert_unparseable(&d);
    assert_eq!(d.raw.as_deref(), Some("soon"));
    assert_eq!(parse(b"soon"), Err(RetryAfterError::Invalid));
}

#[test]
fn seed_absent_is_none_and_backoff_is_clamped() {
    let p = RetryAfterPolicy::default();
    assert_eq!(p.decide(std::iter::empty(), now(), &mut rng()), None);
    assert_eq!(p.from_headers(&headers(&[]), now(), &mut rng()), None);
    let d = p.from_backoff(Duration::from_millis(500));
    assert_eq!((d.delay, d.reason), (SECS(1), DelayReason::Absent));
    assert_eq!(p.from_backoff(SECS(3600)).delay, SECS(600));
}

#[test]
fn unparseable_jitter_is_seeded_and_varies_with_the_seed() {
    use rand_chacha::rand_core::SeedableRng;
    let p = RetryAfterPolicy::default();
    let with = |seed| {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        p.decide([&b"soon"[..]], now(), &mut r).unwrap().delay
    };
    assert_eq!(with(1), with(1));
    let distinct: std::collections::HashSet<_> = (0..20).map(with).collect();
    assert!(distinct.len() > 10, "jitter barely varies: {distinct:?}");
}

// --- lenient cases (documented in the module docs) ------------------------------------

#[test]
fn surrounding_whitespace_is_trimmed() {
    assert_eq!(parse(b" \t120 "), Ok(RetryAfter::Delay(SECS(120))));
    assert!(parse(b"  Sun, 06 Nov 1994 08:49:37 GMT\t").is_ok());
}

#[test]
fn fractional_seconds_round_up() {
    assert_eq!(parse(b"1.5"), Ok(RetryAfter::Delay(SECS(2))));
    assert_eq!(parse(b"2.0"), Ok(RetryAfter::Delay(SECS(2))));
    assert_eq!(parse(b"0.001"), Ok(RetryAfter::Delay(SECS(1))));
    assert_eq!(parse(b"1."), Err(RetryAfterError::Invalid));
    assert_eq!(parse(b".5"), Err(RetryAfterError::Invalid));
    let d = decide(&[b"1.5"]);
    assert_eq!((d.delay, d.reason), (SECS(2), DelayReason::Honoured));
    // Kept raw for the log, and read before any clamp as the rounded-up value.
    assert_eq!(d.raw.as_deref(), Some("1.5"));
    assert_eq!(d.retry_after, Some(SECS(2)));
}

/// RFC 9110 §10.2.3: `delay-seconds = 1*DIGIT`. A fraction is read (rounded up) but flagged
/// as non-conforming, so it is warned with its raw value; conforming and unparseable values
/// are not flagged (the latter are reported as unparseable instead).
#[test]
fn fractional_seconds_are_flagged_as_non_conforming() {
    for v in [&b"1.5"[..], b"2.0", b" 0.001 ", b"120, 1.5", b"1.5, 120"] {
        assert!(is_lenient(v), "{:?}", String::from_utf8_lossy(v));
    }
    for v in [
        &b"120"[..],
        b" 120 ",
        b"120, 60",
        b"Sun, 06 Nov 1994 08:49:37 GMT",
        b"1.",
        b".5",
        b"-1.5",
        b"soon",
        b"",
    ] {
        assert!(!is_lenient(v), "{:?}", String::from_utf8_lossy(v));
    }
}

#[test]
fn signs_are_unparseable_never_zero() {
    for v in [&b"-1"[..], b"+5", b"-0"] {
        assert_eq!(parse(v), Err(RetryAfterError::Invalid));
        assert_unparseable(&decide(&[v]));
    }
}

#[test]
fn overflowing_digits_saturate_and_are_capped() {
    let v = b"99999999999999999999999999";
    assert_eq!(parse(v), Ok(RetryAfter::Delay(SECS(u64::MAX))));
    let d = decide(&[v]);
    assert_capped(&d);
}

#[test]
fn past_date_is_floored() {
    let d = decide(&[b"Sun, 06 Nov 1994 08:49:37 GMT"]);
    assert_eq!((d.delay, d.reason), (SECS(1), DelayReason::Floored));
    assert_eq!(d.retry_after, Some(Duration::ZERO));
}

#[test]
fn far_future_date_is_capped() {
    let d = decide(&[b"Thu, 31 Dec 9998 23:59:59 GMT"]);
    assert_capped(&d);
}

/// A capped delay is the 600 s cap less at most a tenth of it (jitter against a herd).
fn assert_capped(d: &RetryDelay) {
    assert_eq!(d.reason, DelayReason::Capped);
    assert!(
        d.delay <= SECS(600) && d.delay >= SECS(540),
        "{:?}",
        d.delay
    );
}

#[test]
fn wrong_weekday_is_ignored() {
    // 15 Jun 2026 is a Monday.
    for v in [
        &b"Tue, 15 Jun 2026 08:02:31 GMT"[..],
        b"Tuesday, 15-Jun-26 08:02:31 GMT",
        b"Tue Jun 15 08:02:31 2026",
    ] {
        let d = decide(&[v]);
        assert_eq!((d.delay, d.reason), (SECS(151), DelayReason::Honoured));
    }
    assert_eq!(
        parse(b"Xyz, 15 Jun 2026 08:02:31 GMT"),
        Err(RetryAfterError::Invalid)
    );
    assert_eq!(
        parse(b"Mon, 31 Jun 2026 08:02:31 GMT"),
        Err(RetryAfterError::Invalid)
    );
}

#[test]
fn list_in_one_line_takes_the_largest() {
    let d = decide(&[b"120, 60"]);
    assert_eq!((d.delay, d.reason), (SECS(120), DelayReason::Honoured));
    assert_eq!(d.raw.as_deref(), Some("120, 60"));
    assert_eq!(parse(b"120, 60"), Err(RetryAfterError::Conflicting));
    assert_eq!(parse(b"120, 120"), Ok(RetryAfter::Delay(SECS(120))));
}

#[test]
fn list_with_dates_keeps_their_commas() {
    let d = decide(&[b"30, Mon, 15 Jun 2026 08:02:31 GMT, 10"]);
    assert_eq!(d.delay, SECS(151));
    assert_eq!(d.reason, DelayReason::Honoured);
}

#[test]
fn repeated_header_lines_take_the_largest_and_join_raw() {
    let h = headers(&[
        ("retry-after", "5"),
        ("retry-after", "Mon, 15 Jun 2026 08:02:31 GMT"),
    ]);
    let d = RetryAfterPolicy::default()
        .from_headers(&h, now(), &mut rng())
        .unwrap();
    assert_eq!((d.delay, d.reason), (SECS(151), DelayReason::Honoured));
    assert_eq!(d.raw.as_deref(), Some("5, Mon, 15 Jun 2026 08:02:31 GMT"));
}

#[test]
fn garbage_next_to_a_valid_value_uses_the_valid_one() {
    let d = decide(&[b"soon", b"45"]);
    assert_eq!((d.delay, d.reason), (SECS(45), DelayReason::Honoured));
    let d = decide(&[b"45, soon"]);
    assert_eq!((d.delay, d.reason), (SECS(45), DelayReason::Honoured));
    assert_eq!(parse(b"45, soon"), Err(RetryAfterError::Invalid));
}

#[test]
fn all_garbage_lines_are_unparseable() {
    assert_unparseable(&decide(&[b"soon", b"later, never"]));
}

#[test]
fn empty_value_is_unparseable_not_absent() {
    assert_eq!(parse(b""), Err(RetryAfterError::Empty));
    assert_eq!(parse(b"  "), Err(RetryAfterError::Empty));
    assert_eq!(parse(b" , "), Err(RetryAfterError::Empty));
    let d = decide(&[b""]);
    assert_unparseable(&d);
    assert_eq!(d.raw.as_deref(), Some(""));
}

#[test]
fn non_ascii_and_invalid_utf8_are_unparseable_and_raw_is_escaped() {
    let d = decide(&[b"12\xff"]);
    assert_unparseable(&d);
    assert_eq!(d.raw.as_deref(), Some("12\u{fffd}"));
    let d = decide(&["１２０".as_bytes()]);
    assert_unparseable(&d);
    let d = decide(&[b"5\r\nX-Injected: 1"]);
    assert_unparseable(&d);
    assert_eq!(d.raw.as_deref(), Some("5\\x0d\\x0aX-Injected: 1"));
}

#[test]
fn unparseable_wait_is_clamped_to_the_policy() {
    let p = RetryAfterPolicy {
        floor: SECS(2),
        cap: SECS(60),
        ..RetryAfterPolicy::default()
    };
    let d = p.decide([&b"soon"[..]], now(), &mut rng()).unwrap();
    assert_eq!((d.delay, d.reason), (SECS(60), DelayReason::Unparseable));
}

#[test]
fn misconfigured_floor_above_cap_never_panics_and_keeps_the_floor() {
    let p = RetryAfterPolicy {
        floor: SECS(30),
        cap: SECS(10),
        ..RetryAfterPolicy::default()
    };
    assert_eq!(
        p.decide([&b"600"[..]], now(), &mut rng()).unwrap().delay,
        SECS(30)
    );
    assert_eq!(p.from_backoff(SECS(1)).delay, SECS(30));
}

#[test]
fn thousands_of_repeated_lines_keep_a_bounded_raw_value() {
    // Each line was cut, but 100 000 lines of `5` joined to 300 kB of "5, 5, …".
    let lines: Vec<&[u8]> = vec![b"5"; 100_000];
    let d = decide(&lines);
    assert_eq!((d.delay, d.reason), (SECS(5), DelayReason::Honoured));
    let raw = d.raw.unwrap();
    assert!(
        raw.len() <= abide_core::retry_after::MAX_RAW_LEN + 8,
        "{}",
        raw.len()
    );
    assert!(raw.starts_with("5, 5, ") && raw.ends_with('…'), "{raw}");
    // Every line is still read: a larger value far down the list wins.
    let mut lines: Vec<&[u8]> = vec![b"5"; 10_000];
    lines.push(b"90");
    assert_eq!(decide(&lines).delay, SECS(90));
}
