//! Durations written in a body or a vendor header: delay-seconds as a JSON number, and the
//! Go `time.Duration` form (`6m0s`, `1.5s`, `20ms`) that Go services and Protocol Buffers'
//! `google.protobuf.Duration` JSON mapping (`"30s"`, `"1.5s"`) use.
//!
//! Sources: Go `time.ParseDuration` (<https://pkg.go.dev/time#ParseDuration>): a sequence
//! of decimal numbers, each with an optional fraction and a unit suffix, units `ns`, `us`
//! (or `µs`), `ms`, `s`, `m`, `h`; protobuf JSON mapping of `Duration`
//! (<https://protobuf.dev/programming-guides/json/>): seconds with up to nine fractional
//! digits, suffix `s`.
//!
//! Nothing here clamps: the classifier passes every value through its
//! [`RetryAfterPolicy`](crate::RetryAfterPolicy) floor and cap. A negative, non-finite or
//! garbled value is `None` (the caller then treats the delay as unparseable, never as zero).

use std::time::Duration;

/// Longest duration text read, in bytes; a longer value is not a duration anyone means.
pub const MAX_DURATION_TEXT: usize = 64;

/// Largest duration returned: a value above it saturates here (the caller's cap is far
/// lower). One year.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// Seconds as a JSON number (`30`, `1.5`, `64.57`) to a duration; `None` when negative,
/// NaN or infinite. Values above [`MAX_DURATION`] saturate.
pub fn from_secs_f64(secs: f64) -> Option<Duration> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    if secs >= MAX_DURATION.as_secs_f64() {
        return Some(MAX_DURATION);
    }
    Some(Duration::from_secs_f64(secs))
}

/// A Go-style duration (`6m0s`, `1h2m3.5s`, `1.5s`, `20ms`, `0`) or plain delay-seconds
/// (`30`, `1.5`); `None` for anything else (a sign, an unknown unit, an empty number).
/// Values above [`MAX_DURATION`] saturate.
///
/// ```
/// use abide_core::classify::duration::parse_go;
/// use std::time::Duration;
/// assert_eq!(parse_go("6m0s"), Some(Duration::from_secs(360)));
/// assert_eq!(parse_go("1.5s"), Some(Duration::from_millis(1500)));
/// assert_eq!(parse_go("20ms"), Some(Duration::from_millis(20)));
/// assert_eq!(parse_go("-1s"), None);
/// ```
pub fn parse_go(text: &str) -> Option<Duration> {
    let t = text.trim();
    if t.is_empty() || t.len() > MAX_DURATION_TEXT {
        return None;
    }
    if t == "0" {
        return Some(Duration::ZERO);
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return t.parse::<f64>().ok().and_then(from_secs_f64);
    }
    let mut rest = t;
    let mut total = 0.0_f64;
    while !rest.is_empty() {
        let num_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num.bytes().filter(|b| *b == b'.').count() > 1 || num == "." {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        let unit_len = tail
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(tail.len(), |(i, _)| i);
        let (unit, next) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = next;
    }
    from_secs_f64(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_forms() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("6m0s", Some(ms(360_000))),
            ("1.5s", Some(ms(1500))),
            ("20ms", Some(ms(20))),
            ("1h2m3s", Some(ms(3_723_000))),
            ("250us", Some(Duration::from_micros(250))),
            ("3µs", Some(Duration::from_micros(3))),
            ("0", Some(Duration::ZERO)),
            ("0s", Some(Duration::ZERO)),
            ("30", Some(ms(30_000))),
            ("2.5", Some(ms(2500))),
            (" 7s ", Some(ms(7000))),
            ("", None),
            ("s", None),
            ("-1s", None),
            ("+1s", None),
            ("1x", None),
            ("1.2.3s", None),
            (".s", None),
            ("1d", None),
            ("NaN", None),
            ("1e9s", None),
        ] {
            assert_eq!(parse_go(text), want, "{text:?}");
        }
    }

    #[test]
    fn huge_values_saturate_and_long_text_is_refused() {
        assert_eq!(parse_go("99999999999h"), Some(MAX_DURATION));
        assert_eq!(from_secs_f64(1e300), Some(MAX_DURATION));
        assert_eq!(from_secs_f64(-0.5), None);
        assert_eq!(from_secs_f64(f64::INFINITY), None);
        assert_eq!(parse_go(&"1s".repeat(40)), None);
    }
}
