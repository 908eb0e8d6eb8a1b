//! `Retry-After` (RFC 9110 §10.2.3): parsing every form the spec allows and turning the
//! result into a clamped delay with its reason; and writing it ([`RetryAfter::after`],
//! [`RetryAfter::at`], [`RetryAfter::to_header_value`]) as servers should.
//!
//! ```text
//! Retry-After = HTTP-date / delay-seconds
//! delay-seconds = 1*DIGIT
//! ```
//!
//! An HTTP-date may come in any of the three forms of RFC 9110 §5.6.7: IMF-fixdate
//! (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94
//! 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). IMF-fixdate and asctime are
//! parsed by the `httpdate` crate. RFC 850 is read here because its two-digit year must be
//! resolved against the current year (§5.6.7: a year that appears more than 50 years in the
//! future is the past century), which `httpdate` does with a fixed pivot instead.
//!
//! # Why a clamp, and why unparseable is never zero
//! A client that reads only the integer form and falls back to zero on a date retries at
//! once, with every worker, exactly when the server asked it to stop. So every value passes
//! through [`RetryAfterPolicy`]: the result always lies within `[floor, cap]`, and a value
//! we cannot read yields a long jittered wait, with the raw value kept for the log.
//!
//! # Lenient cases (what real servers send)
//! | value | reading | why |
//! |---|---|---|
//! | ` 120 ` | 120 s | surrounding OWS (space, tab) is trimmed, as for any field value |
//! | `1.5` | 2 s (rounded **up**), warned as non-conforming | the meaning is clear; rounding up never retries before the server asked (see below) |
//! | `-1` | unparseable | a negative wait has no meaning; it must never become zero |
//! | `+5` | unparseable | signs are outside the grammar; treated like `-1` so a sign never decides |
//! | `99999999999999999999` | saturates to a huge delay, then capped | the server clearly asked for "very long" |
//! | a date in the past | 0 s, then floored | the server's clock may be behind ours |
//! | asctime with an unpadded day (`Sun Nov 6 ...`) | unparseable | asctime pads the day with a space; `httpdate` requires it |
//! | a date with the wrong weekday | the date, weekday ignored | it is redundant; even RFC 8594's example has a wrong one |
//! | `120, 60` or two header lines | the **largest** delay (120 s) | the most conservative reading of a disagreement |
//! | `120, soon` | 120 s: the parseable elements win | a partly readable list still says something |
//! | `soon, later` | unparseable | nothing could be read |
//! | empty, or only whitespace | unparseable | a present but empty header still signals a throttle |
//! | non-ASCII or invalid UTF-8 bytes | that element is unparseable | dates and digits are ASCII |
//!
//! ## Fractional seconds: read, rounded up, and warned
//! RFC 9110 §10.2.3 defines `delay-seconds = 1*DIGIT`, so `1.5` is not a valid value. It is
//! still read (as 2 s) rather than treated as unparseable: "confusion never means zero" is
//! about values whose meaning is unclear, and a decimal number of seconds is not unclear.
//! Rounding **up** keeps the one promise that matters (never before the server asked), and
//! the unparseable path would answer a server that asked for 1.5 s with a 5-minute wait.
//! It is not silent either: [`RetryAfterPolicy::decide`] logs a `WARN`
//! (`non-conforming Retry-After read leniently`) with the raw value, as malformed rate-limit
//! headers are, and [`is_lenient`] tells a caller which values were read this way. The
//! delay's reason stays [`DelayReason::Honoured`] (or floored, or capped): that says what
//! was done with the number, not how it was spelled.
//!
//! The raw value is kept lossily decoded (invalid UTF-8 becomes U+FFFD), with control
//! characters escaped as `\xNN` and truncated to [`MAX_RAW_LEN`] bytes, so a hostile header
//! cannot forge log lines or flood them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod policy;
mod write;

pub use policy::{DelayReason, RetryAfterPolicy, RetryDelay, CAP_SPREAD, MIN_FLOOR};
pub use write::{ceil_secs, delay_seconds};

/// A parsed `Retry-After` value, before any floor or cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// `delay-seconds`: a non-negative number of whole seconds.
    Delay(Duration),
    /// `HTTP-date` in any of its three forms (IMF-fixdate, RFC 850, asctime).
    Date(SystemTime),
}

impl RetryAfter {
    /// The delay this value asks for at wall time `now`; a date in the past gives zero.
    pub fn delay_from(&self, now: SystemTime) -> Duration {
        match *self {
            RetryAfter::Delay(d) => d,
            RetryAfter::Date(at) => at.duration_since(now).unwrap_or(Duration::ZERO),
        }
    }
}

/// Why a `Retry-After` value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetryAfterError {
    /// The value was empty or only whitespace.
    #[error("empty Retry-After value")]
    Empty,
    /// The value is neither delay-seconds nor an HTTP-date.
    #[error("Retry-After is neither delay-seconds nor an HTTP-date")]
    Invalid,
    /// Several values (repeated headers or a list) disagree.
    #[error("several Retry-After values disagree")]
    Conflicting,
}

/// Longest raw value kept in [`RetryDelay::raw`], in bytes (before escaping).
pub const MAX_RAW_LEN: usize = 256;

/// Parse one `Retry-After` field value. Two-digit RFC 850 years are resolved against the
/// Unix epoch's century window (1970–2069, as `httpdate` does); prefer [`parse_at`] with the
/// clock's `now`, which applies the RFC 9110 §5.6.7 rule.
///
/// A list (`120, 120`) parses when all its elements agree.
///
/// # Errors
/// [`RetryAfterError::Empty`] for an empty value, [`RetryAfterError::Invalid`] when an
/// element is neither delay-seconds nor an HTTP-date, [`RetryAfterError::Conflicting`] when
/// the elements of a list disagree.
pub fn parse(value: &[u8]) -> Result<RetryAfter, RetryAfterError> {
    // Any instant in 2019 puts the two-digit-year window at 1970..=2069.
    parse_at(value, UNIX_EPOCH + Duration::from_secs(1_559_347_200))
}

/// [`parse`] with `now` (wall time) to resolve two-digit RFC 850 years per RFC 9110 §5.6.7:
/// the year is the one with those last two digits that lies no more than 50 years after
/// `now`'s year and less than 50 years before it.
///
/// # Errors
/// As [`parse`].
pub fn parse_at(value: &[u8], now: SystemTime) -> Result<RetryAfter, RetryAfterError> {
    let mut elements = Elements::new(value, now);
    let first = elements.next().ok_or(RetryAfterError::Empty)?;
    let first = first.ok_or(RetryAfterError::Invalid)?;
    for other in elements {
        match other {
            None => return Err(RetryAfterError::Invalid),
            Some(v) if v != first => return Err(RetryAfterError::Conflicting),
            Some(_) => {}
        }
    }
    Ok(first)
}

/// Whether a `Retry-After` field value holds an element read only leniently: delay-seconds
/// with a fraction (`1.5`, `2.0`), outside RFC 9110 §10.2.3's `1*DIGIT`. Such an element is
/// read rounded up (see the module docs); this says the server did not follow the grammar,
/// for the log. `false` for conforming values and for unparseable ones (those are reported
/// as [`DelayReason::Unparseable`]).
pub fn is_lenient(value: &[u8]) -> bool {
    value.split(|b| *b == b',').map(trim_ows).any(|piece| {
        piece.contains(&b'.')
            && piece.first().is_some_and(u8::is_ascii_digit)
            && parse_seconds(piece).is_some()
    })
}

type CommaSplit<'a> = std::slice::Split<'a, u8, fn(&u8) -> bool>;

/// Iterates the elements of one field value: `Some(parsed)` or `None` (garbage). Empty list
/// elements (`120, , 60`) are skipped as RFC 9110 §5.6.1 asks of recipients, so an empty
/// value yields nothing: `parse_at` reports it as `Empty` and `decide`, having seen a line
/// but no readable element, as unparseable.
struct Elements<'a> {
    pieces: std::iter::Peekable<CommaSplit<'a>>,
    now: SystemTime,
}

impl<'a> Elements<'a> {
    fn new(value: &'a [u8], now: SystemTime) -> Self {
        let is_comma: fn(&u8) -> bool = |b| *b == b',';
        Self {
            pieces: value.split(is_comma).peekable(),
            now,
        }
    }
}

impl Iterator for Elements<'_> {
    type Item = Option<RetryAfter>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let piece = trim_ows(self.pieces.next()?);
            if piece.is_empty() {
                continue;
            }
            if let Some(v) = parse_one(piece, self.now) {
                return Some(Some(v));
            }
            // IMF-fixdate and RFC 850 contain a comma after the day name: rejoin.
            if let Some(next) = self.pieces.peek() {
                let mut joined = piece.to_vec();
                joined.push(b',');
                joined.extend_from_slice(next);
                if let Some(v) = parse_one(trim_ows(&joined), self.now) {
                    self.pieces.next();
                    return Some(Some(v));
                }
            }
            return Some(None);
        }
    }
}

/// Trim optional whitespace (SP / HTAB, RFC 9110 §5.6.3).
fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// Parse one trimmed, non-empty element.
fn parse_one(v: &[u8], now: SystemTime) -> Option<RetryAfter> {
    if !v.is_ascii() {
        return None;
    }
    if v.first().is_some_and(u8::is_ascii_digit) {
        if let Some(d) = parse_seconds(v) {
            return Some(RetryAfter::Delay(d));
        }
    }
    parse_http_date(v, now).map(RetryAfter::Date)
}

/// `1*DIGIT [ "." 1*DIGIT ]`: whole seconds, saturating on overflow; a fraction rounds up.
fn parse_seconds(v: &[u8]) -> Option<Duration> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (&v[..i], Some(&v[i + 1..])),
        None => (v, None),
    };
    if int.is_empty() || !int.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut secs: u64 = 0;
    for &b in int {
        secs = secs.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    if let Some(frac) = frac {
        if frac.is_empty() || !frac.iter().all(u8::is_ascii_digit) {
            return None;
        }
        if frac.iter().any(|&b| b != b'0') {
            secs = secs.saturating_add(1);
        }
    }
    Some(Duration::from_secs(secs))
}

/// An HTTP-date in any of the three forms of RFC 9110 §5.6.7. A weekday that does not
/// match the date is ignored: it is redundant, and even RFC 8594's own example
/// (`Sat, 31 Dec 2018`, a Monday) gets it wrong.
pub(crate) fn parse_http_date(v: &[u8], now: SystemTime) -> Option<SystemTime> {
    let s = std::str::from_utf8(v).ok()?;
    let s = rfc850_to_imf(s, now).unwrap_or_else(|| s.to_owned());
    if let Ok(t) = httpdate::parse_http_date(&s) {
        return Some(t);
    }
    // IMF-fixdate and asctime both start with a three-letter day name: try the others.
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    let rest = s.get(3..).filter(|_| DAYS.contains(&&s[..3]))?;
    DAYS.iter()
        .find_map(|d| httpdate::parse_http_date(&format!("{d}{rest}")).ok())
}

/// Rewrite an RFC 850 date (`Sunday, 06-Nov-94 08:49:37 GMT`) as an IMF-fixdate with the
/// two-digit year resolved against `now`, so that `httpdate` validates the rest (day of
/// month, weekday). `None` when `s` is not in RFC 850 shape.
fn rfc850_to_imf(s: &str, now: SystemTime) -> Option<String> {
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    let (day_name, rest) = s.split_once(", ")?;
    if !DAYS.contains(&day_name) {
        return None;
    }
    // rest = "06-Nov-94 08:49:37 GMT"
    let b = rest.as_bytes();
    if b.len() != 22 || b[2] != b'-' || b[6] != b'-' || !rest.ends_with(" GMT") {
        return None;
    }
    let yy = &rest[7..9];
    if !yy.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let yy: i64 = yy.parse().ok()?;
    let year = resolve_two_digit_year(yy, year_of(now));
    Some(format!(
        "{}, {} {} {} {}",
        &day_name[..3],
        &rest[0..2],
        &rest[3..6],
        year,
        &rest[10..]
    ))
}

/// RFC 9110 §5.6.7: the year ending in `yy` within `(current - 50, current + 50]`.
fn resolve_two_digit_year(yy: i64, current: i64) -> i64 {
    let base = current - 49;
    base + (yy - base).rem_euclid(100)
}

/// The proleptic Gregorian year of `t` (UTC); times before the epoch count as 1970, times
/// beyond what `time` holds as 9999.
pub(crate) fn year_of(t: SystemTime) -> i64 {
    if t < UNIX_EPOCH {
        return 1970;
    }
    crate::rfc3339::to_utc(t).map_or(9999, |d| i64::from(d.year()))
}

/// Lossy, escaped, bounded copy of a raw header value for logs and JSON.
pub fn escape_raw(v: &[u8]) -> String {
    let (v, truncated) = if v.len() > MAX_RAW_LEN {
        (&v[..MAX_RAW_LEN], true)
    } else {
        (v, false)
    };
    let mut out = String::with_capacity(v.len());
    for c in String::from_utf8_lossy(v).chars() {
        if c.is_control() {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    if truncated {
        out.push('…');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(s: &str) -> SystemTime {
        httpdate::parse_http_date(s).unwrap()
    }

    #[test]
    fn two_digit_year_window() {
        assert_eq!(resolve_two_digit_year(94, 2026), 1994);
        assert_eq!(resolve_two_digit_year(26, 2026), 2026);
        assert_eq!(resolve_two_digit_year(76, 2026), 2076);
        assert_eq!(resolve_two_digit_year(77, 2026), 1977);
        assert_eq!(resolve_two_digit_year(10, 2080), 2110);
    }

    #[test]
    fn years() {
        assert_eq!(year_of(UNIX_EPOCH), 1970);
        assert_eq!(year_of(at("Mon, 15 Jun 2026 08:02:31 GMT")), 2026);
        assert_eq!(year_of(at("Thu, 31 Dec 2099 23:59:59 GMT")), 2099);
        assert_eq!(year_of(UNIX_EPOCH - Duration::from_secs(10)), 1970);
        assert_eq!(
            year_of(UNIX_EPOCH + Duration::from_secs(u64::MAX / 4)),
            9999
        );
    }

    #[test]
    fn parse_without_a_clock_uses_the_1970_to_2069_window() {
        let v = parse(b"Thursday, 01-Jan-70 00:00:00 GMT").unwrap();
        assert_eq!(v, RetryAfter::Date(UNIX_EPOCH));
        let v = parse(b"Tuesday, 31-Dec-69 23:59:59 GMT").unwrap();
        assert_eq!(v, RetryAfter::Date(at("Tue, 31 Dec 2069 23:59:59 GMT")));
    }

    #[test]
    fn rfc850_uses_now_for_the_century() {
        let now = at("Mon, 15 Jun 2026 08:02:31 GMT");
        // 2070-11-06 is a Thursday; with a fixed 1970 pivot this would be 1970.
        let v = parse_at(b"Thursday, 06-Nov-70 08:49:37 GMT", now).unwrap();
        assert_eq!(v, RetryAfter::Date(at("Thu, 06 Nov 2070 08:49:37 GMT")));
    }

    #[test]
    fn capped_delays_spread_below_the_cap_and_never_under_the_floor() {
        let p = RetryAfterPolicy::default();
        let now = at("Mon, 15 Jun 2026 08:02:31 GMT");
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(7);
        let cap = p.cap;
        let draws: Vec<Duration> = (0..100)
            .map(|i| {
                let d = if i % 2 == 0 {
                    p.decide([b"86400".as_slice()], now, &mut rng).unwrap()
                } else {
                    p.from_server_delay(Duration::from_secs(86_400), None, &mut rng)
                };
                assert_eq!(d.reason, DelayReason::Capped);
                d.delay
            })
            .collect();
        let lo = *draws.iter().min().unwrap();
        let hi = *draws.iter().max().unwrap();
        assert!(hi <= cap, "{hi:?} above the cap");
        assert!(
            lo >= cap - cap / CAP_SPREAD,
            "{lo:?} more than a tenth early"
        );
        // Nodes refused together resume over at least 5 % of the cap, not in one instant.
        assert!(hi - lo >= cap / 20, "spread {:?}", hi - lo);
        // A cap just above the floor: the spread never goes below the floor.
        let tight = RetryAfterPolicy {
            floor: Duration::from_secs(599),
            ..RetryAfterPolicy::default()
        };
        for _ in 0..100 {
            let d = tight.decide([b"86400".as_slice()], now, &mut rng).unwrap();
            assert!(d.delay >= Duration::from_secs(599) && d.delay <= cap);
        }
    }

    #[test]
    fn a_zero_floor_still_never_means_retry_at_once() {
        let p = RetryAfterPolicy {
            floor: Duration::ZERO,
            cap: Duration::ZERO,
            ..RetryAfterPolicy::default()
        };
        let now = at("Mon, 15 Jun 2026 08:02:31 GMT");
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
        let past = b"Mon, 15 Jun 2026 08:00:00 GMT".as_slice();
        for value in [b"0".as_slice(), past] {
            let d = p.decide([value], now, &mut rng).unwrap();
            assert_eq!(d.delay, MIN_FLOOR, "{value:?}");
            assert_eq!(d.reason, DelayReason::Floored);
            assert_eq!(d.retry_after, Some(Duration::ZERO));
        }
        assert_eq!(p.from_backoff(Duration::ZERO).delay, MIN_FLOOR);
        // A floor above the minimum is kept as configured.
        let p = RetryAfterPolicy {
            floor: Duration::from_millis(250),
            ..p
        };
        assert_eq!(
            p.from_backoff(Duration::ZERO).delay,
            Duration::from_millis(250)
        );
    }

    #[test]
    fn escape_raw_escapes_controls_and_truncates() {
        assert_eq!(escape_raw(b"a\x1bb\xff"), "a\\x1bb\u{fffd}");
        let long = vec![b'9'; 1000];
        assert_eq!(escape_raw(&long).len(), MAX_RAW_LEN + '…'.len_utf8());
    }
}
