//! The three HTTP-date forms (RFC 9110 §5.6.7): IMF-fixdate and the obsolete RFC 850 and
//! asctime forms that recipients must still accept.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

struct Civil {
    year: i64,
    month: usize,
    day: u32,
    hour: u64,
    min: u64,
    sec: u64,
    weekday: usize,
}

/// Whole seconds after `t`, rounded up: a date must not promise an earlier time than meant.
pub(crate) fn ceil_to_second(t: SystemTime) -> SystemTime {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn civil(t: SystemTime) -> Civil {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as usize;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        min: rem % 3600 / 60,
        sec: rem % 60,
        // 1970-01-01 was a Thursday (index 3 from Monday).
        weekday: ((days + 3).rem_euclid(7)) as usize,
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) fn imf_fixdate(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`.
pub(crate) fn rfc850(t: SystemTime) -> String {
    let c = civil(t);
    format!(
        "{}, {:02}-{}-{:02} {:02}:{:02}:{:02} GMT",
        DAYS[c.weekday],
        c.day,
        MONTHS[c.month - 1],
        c.year.rem_euclid(100),
        c.hour,
        c.min,
        c.sec
    )
}

/// `Sun Nov  6 08:49:37 1994`.
pub(crate) fn asctime(t: SystemTime) -> String {
    let c = civil(t);
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        &DAYS[c.weekday][..3],
        MONTHS[c.month - 1],
        c.day,
        c.hour,
        c.min,
        c.sec,
        c.year
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9110_example_date_in_all_three_forms() {
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(imf_fixdate(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(rfc850(t), "Sunday, 06-Nov-94 08:49:37 GMT");
        assert_eq!(asctime(t), "Sun Nov  6 08:49:37 1994");
        // All three parse back to the same instant.
        for s in [imf_fixdate(t), rfc850(t), asctime(t)] {
            assert_eq!(httpdate::parse_http_date(&s).unwrap(), t);
        }
    }

    #[test]
    fn dates_round_up() {
        let t = UNIX_EPOCH + Duration::from_millis(1_500);
        assert_eq!(ceil_to_second(t), UNIX_EPOCH + Duration::from_secs(2));
    }
}
