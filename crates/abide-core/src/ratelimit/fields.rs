//! Reading header values for every dialect: joined field lines, counts and decimal seconds,
//! each saturating at its clamp, with unreadable values recorded as [`Malformed`].

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use serde::Serialize;

use super::info::{MAX_QUOTA, MAX_RESET};
use crate::retry_after::escape_raw;

/// A header that was present but could not be read; it was ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Malformed {
    /// Header name, lower-case.
    pub header: String,
    /// The value as received, escaped and cut (see [`crate::retry_after::escape_raw`]).
    pub raw: String,
}

/// Headers of one response plus what could not be read from them.
pub(crate) struct Fields<'a> {
    headers: &'a HeaderMap,
    pub(crate) now: SystemTime,
    malformed: Vec<Malformed>,
}

/// Most malformed headers recorded per response (a hostile response could send thousands).
const MAX_MALFORMED: usize = 16;

impl<'a> Fields<'a> {
    pub(crate) fn new(headers: &'a HeaderMap, now: SystemTime) -> Self {
        Self {
            headers,
            now,
            malformed: Vec::new(),
        }
    }

    /// Every header name present, lower-case (once per name).
    pub(crate) fn names(&self) -> impl Iterator<Item = &'a str> {
        self.headers.keys().map(http::HeaderName::as_str)
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.headers.contains_key(name)
    }

    /// All lines of `name` joined with ", " (RFC 9110 §5.3). A line that is not visible
    /// ASCII is recorded as malformed and skipped. `None` when absent.
    pub(crate) fn text(&mut self, name: &str) -> Option<String> {
        let mut out: Option<String> = None;
        for v in self.headers.get_all(name) {
            let Ok(s) = v.to_str() else {
                self.bad(name, v.as_bytes());
                continue;
            };
            match &mut out {
                Some(o) => {
                    o.push_str(", ");
                    o.push_str(s);
                }
                None => out = Some(s.to_owned()),
            }
        }
        out
    }

    /// The first element of `name` as a whole non-negative count, saturating at
    /// [`MAX_QUOTA`]; malformed when present but not a count.
    pub(crate) fn count(&mut self, name: &str) -> Option<u64> {
        let v = self.text(name)?;
        let n = first_count(&v);
        if n.is_none() {
            self.bad(name, v.as_bytes());
        }
        n
    }

    /// The first element of `name` as non-negative decimal seconds, saturating; malformed
    /// when present but not a number.
    pub(crate) fn decimal(&mut self, name: &str) -> Option<Duration> {
        let v = self.text(name)?;
        let d = parse_decimal_secs(first_element(&v));
        if d.is_none() {
            self.bad(name, v.as_bytes());
        }
        d
    }

    /// The first element of `name` as a Go-style duration (`6m0s`, `1.5s`, `20ms`) or
    /// delay-seconds, saturating; malformed when present but neither.
    pub(crate) fn go_duration(&mut self, name: &str) -> Option<Duration> {
        let v = self.text(name)?;
        let d = crate::classify::duration::parse_go(first_element(&v));
        if d.is_none() {
            self.bad(name, v.as_bytes());
        }
        d
    }

    /// Record `name: raw` as present but unreadable.
    pub(crate) fn bad(&mut self, name: &str, raw: &[u8]) {
        if self.malformed.len() < MAX_MALFORMED {
            self.malformed.push(Malformed {
                header: name.to_owned(),
                raw: escape_raw(raw),
            });
        }
    }

    pub(crate) fn into_malformed(self) -> Vec<Malformed> {
        self.malformed
    }
}

pub(crate) fn clamp_reset(d: Duration) -> Duration {
    if d > MAX_RESET {
        MAX_RESET
    } else {
        d
    }
}

/// The first list element, trimmed of OWS.
pub(crate) fn first_element(v: &str) -> &str {
    v.split(',').next().unwrap_or("").trim_matches([' ', '\t'])
}

/// The first element as a whole non-negative count (a `;param` suffix is ignored),
/// saturating at [`MAX_QUOTA`].
pub(crate) fn first_count(v: &str) -> Option<u64> {
    let e = first_element(v);
    let e = e.split(';').next().unwrap_or("").trim_matches([' ', '\t']);
    digits(e)
}

/// `1*DIGIT` as a count, saturating at [`MAX_QUOTA`].
pub(crate) fn digits(e: &str) -> Option<u64> {
    if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut n: u64 = 0;
    for b in e.bytes() {
        n = n.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    Some(n.min(MAX_QUOTA))
}

/// `1*DIGIT [ "." 1*DIGIT ]` as a duration, saturating on overflow; nanosecond precision.
pub(crate) fn parse_decimal_secs(s: &str) -> Option<Duration> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut secs: u64 = 0;
    for b in int.bytes() {
        secs = secs.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    let mut nanos: u32 = 0;
    if let Some(f) = frac {
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        for (i, b) in f.bytes().take(9).enumerate() {
            nanos += u32::from(b - b'0') * 10u32.pow(8 - i as u32);
        }
    }
    Some(Duration::new(secs, 0).saturating_add(Duration::from_nanos(u64::from(nanos))))
}

/// Decimal milliseconds (`1500`, `1500.5`) as a duration, saturating.
pub(crate) fn parse_decimal_millis(s: &str) -> Option<Duration> {
    let secs = parse_decimal_secs(s)?;
    // n ms = n/1000 s: divide the value read as seconds.
    Some(secs / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_seconds() {
        assert_eq!(
            parse_decimal_secs("1.234"),
            Some(Duration::from_millis(1234))
        );
        assert_eq!(parse_decimal_secs("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_decimal_secs("-1"), None);
        assert_eq!(parse_decimal_secs("1."), None);
        assert_eq!(parse_decimal_secs(".5"), None);
        assert_eq!(
            parse_decimal_secs("99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn decimal_millis() {
        assert_eq!(
            parse_decimal_millis("1500"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_decimal_millis("0.5"),
            Some(Duration::from_micros(500))
        );
        assert_eq!(parse_decimal_millis("soon"), None);
    }

    #[test]
    fn malformed_values_are_recorded_not_read() {
        let mut h = HeaderMap::new();
        h.insert("x-a", http::HeaderValue::from_static("lots"));
        let mut f = Fields::new(&h, SystemTime::UNIX_EPOCH);
        assert_eq!(f.count("x-a"), None);
        assert_eq!(f.count("x-absent"), None);
        let m = f.into_malformed();
        assert_eq!(m.len(), 1);
        assert_eq!((m[0].header.as_str(), m[0].raw.as_str()), ("x-a", "lots"));
    }
}
