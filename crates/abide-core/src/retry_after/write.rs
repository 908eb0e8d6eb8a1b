//! Writing `Retry-After` (RFC 9110 §10.2.3): the same [`RetryAfter`] the parser reads, so a
//! server (a gate, the fake provider, the simulator) says exactly what a client reads back.
//!
//! A wait is written as delay-seconds **rounded up** and never below 1: rounding a 0.2 s
//! wait down gives `0`, which clients read as "retry now" and which turns a rejection into
//! a hot loop. A date is written as an IMF-fixdate (RFC 9110 §5.6.7), the one form a sender
//! must generate, rounded up to the whole second.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;

use super::RetryAfter;

/// Whole seconds of `wait`, rounded up (0 stays 0).
pub fn ceil_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// The delay-seconds a server sends for `wait`: rounded up, at least 1.
///
/// # Examples
/// ```
/// use abide_core::retry_after::delay_seconds;
/// use std::time::Duration;
///
/// assert_eq!(delay_seconds(Duration::from_millis(200)), 1);
/// assert_eq!(delay_seconds(Duration::from_millis(1010)), 2);
/// assert_eq!(delay_seconds(Duration::ZERO), 1);
/// ```
pub fn delay_seconds(wait: Duration) -> u64 {
    ceil_secs(wait).max(1)
}

/// Latest instant an IMF-fixdate can name: 9999-12-31 23:59:59 UTC.
const LAST_DATE: Duration = Duration::from_secs(253_402_300_799);

/// `t` rounded up to the whole second, within the years an HTTP-date can name
/// (1970–9999).
fn date_second(t: SystemTime) -> SystemTime {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH + Duration::from_secs(ceil_secs(since)).min(LAST_DATE)
}

impl RetryAfter {
    /// The value a server sends for a wait of `wait`: delay-seconds rounded up, at least 1.
    pub fn after(wait: Duration) -> Self {
        RetryAfter::Delay(Duration::from_secs(delay_seconds(wait)))
    }

    /// The value a server sends to name the moment `at`: an HTTP-date rounded up to the
    /// whole second (and within 1970–9999).
    pub fn at(at: SystemTime) -> Self {
        RetryAfter::Date(date_second(at))
    }

    /// The field value: delay-seconds (rounded up, at least 1) or an IMF-fixdate (rounded
    /// up to the second). [`super::parse`] reads back what [`RetryAfter::after`] and
    /// [`RetryAfter::at`] made.
    pub fn to_header_value(&self) -> HeaderValue {
        match *self {
            RetryAfter::Delay(d) => HeaderValue::from(delay_seconds(d)),
            RetryAfter::Date(t) => {
                // An IMF-fixdate is visible ASCII.
                HeaderValue::try_from(httpdate::fmt_http_date(date_second(t)))
                    .unwrap_or_else(|_| HeaderValue::from_static("1"))
            }
        }
    }
}

impl fmt::Display for RetryAfter {
    /// As [`RetryAfter::to_header_value`]: `120`, `Sun, 06 Nov 1994 08:49:37 GMT`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RetryAfter::Delay(d) => write!(f, "{}", delay_seconds(d)),
            RetryAfter::Date(t) => f.write_str(&httpdate::fmt_http_date(date_second(t))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry_after::parse;
    use proptest::prelude::*;

    #[test]
    fn a_wait_rounds_up_and_never_says_zero() {
        let s = |d: Duration| RetryAfter::after(d).to_string();
        assert_eq!(s(Duration::ZERO), "1");
        assert_eq!(s(Duration::from_nanos(1)), "1");
        assert_eq!(s(Duration::from_millis(1000)), "1");
        assert_eq!(s(Duration::from_millis(1010)), "2");
        assert_eq!(s(Duration::from_secs(60)), "60");
        // A delay built by hand is written the same way.
        assert_eq!(RetryAfter::Delay(Duration::ZERO).to_string(), "1");
    }

    #[test]
    fn a_date_is_an_imf_fixdate_rounded_up() {
        let t = UNIX_EPOCH + Duration::from_millis(784_111_776_500);
        let v = RetryAfter::at(t);
        assert_eq!(v.to_string(), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(v.to_header_value(), "Sun, 06 Nov 1994 08:49:37 GMT");
        // Outside what an HTTP-date can name: held at its ends, never a panic.
        let far = UNIX_EPOCH + Duration::from_secs(u64::MAX / 4);
        assert_eq!(
            RetryAfter::at(far).to_string(),
            "Fri, 31 Dec 9999 23:59:59 GMT"
        );
        let before = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(
            RetryAfter::at(before).to_string(),
            "Thu, 01 Jan 1970 00:00:00 GMT"
        );
        assert_eq!(
            RetryAfter::Date(far).to_header_value(),
            "Fri, 31 Dec 9999 23:59:59 GMT"
        );
    }

    proptest! {
        #[test]
        fn what_is_written_reads_back_the_same(
            wait_ms in 0u64..10_000_000_000,
            at_ms in 0u64..253_402_300_799_000,
        ) {
            let v = RetryAfter::after(Duration::from_millis(wait_ms));
            prop_assert_eq!(parse(v.to_header_value().as_bytes()), Ok(v));
            prop_assert_eq!(parse(v.to_string().as_bytes()), Ok(v));
            let RetryAfter::Delay(d) = v else { unreachable!() };
            prop_assert!(d >= Duration::from_millis(wait_ms) && d >= Duration::from_secs(1));
            let t = UNIX_EPOCH + Duration::from_millis(at_ms);
            let v = RetryAfter::at(t);
            prop_assert_eq!(parse(v.to_header_value().as_bytes()), Ok(v));
            let RetryAfter::Date(at) = v else { unreachable!() };
            prop_assert!(at >= t && at < t + Duration::from_secs(1));
        }
    }
}
