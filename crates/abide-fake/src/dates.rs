//! The obsolete HTTP-date forms (RFC 9110 §5.6.7) that recipients must still accept, RFC 850
//! and asctime, which the fake sends to try clients (a sender writes IMF-fixdate:
//! `abide_core::retry_after::RetryAfter::at`); and the `YYMMDDhhmm` of SMPP delivery
//! receipts (SMPP 3.4 Appendix B). Each is a rearrangement of an IMF-fixdate, so calendar
//! arithmetic stays in `httpdate`.

use std::time::SystemTime;

/// `Sun, 06 Nov 1994 08:49:37 GMT` (the second truncated).
fn imf_fixdate(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// The fields of an IMF-fixdate: (`Sun`, `06`, `Nov`, `1994`, `08:49:37`).
fn fields(t: SystemTime) -> [String; 5] {
    let imf = imf_fixdate(t);
    let mut it = imf
        .split([' ', ','])
        .filter(|p| !p.is_empty())
        .map(str::to_owned);
    std::array::from_fn(|_| it.next().unwrap_or_default())
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`.
pub(crate) fn rfc850(t: SystemTime) -> String {
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    let [day, dd, mon, year, time] = fields(t);
    let day = DAYS
        .iter()
        .find(|d| d.starts_with(&day))
        .unwrap_or(&"Sunday");
    let yy = year.get(year.len().saturating_sub(2)..).unwrap_or("");
    format!("{day}, {dd}-{mon}-{yy} {time} GMT")
}

/// `Sun Nov  6 08:49:37 1994`.
pub(crate) fn asctime(t: SystemTime) -> String {
    let [day, dd, mon, year, time] = fields(t);
    format!(
        "{day} {mon} {:>2} {time} {year}",
        dd.trim_start_matches('0')
    )
}

/// `9411060849` (UTC, minutes truncated), as in a delivery receipt's `submit date:`.
pub(crate) fn yymmddhhmm(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let [_, dd, mon, year, time] = fields(t);
    let mm = MONTHS.iter().position(|m| *m == mon).map_or(1, |i| i + 1);
    let yy = year.get(year.len().saturating_sub(2)..).unwrap_or("00");
    let hhmm: String = time.chars().filter(char::is_ascii_digit).take(4).collect();
    format!("{yy}{mm:02}{dd}{hhmm}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use abide_core::retry_after::{parse, RetryAfter};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc9110_example_date_in_all_three_forms() {
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(imf_fixdate(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(rfc850(t), "Sunday, 06-Nov-94 08:49:37 GMT");
        assert_eq!(asctime(t), "Sun Nov  6 08:49:37 1994");
        assert_eq!(yymmddhhmm(t), "9411060849");
        assert_eq!(yymmddhhmm(UNIX_EPOCH), "7001010000");
        // All three read back, by the reader clients use, as the same instant.
        for s in [imf_fixdate(t), rfc850(t), asctime(t)] {
            assert_eq!(parse(s.as_bytes()), Ok(RetryAfter::Date(t)), "{s}");
        }
        assert_eq!(RetryAfter::at(t).to_string(), imf_fixdate(t));
    }

    #[test]
    fn every_weekday_and_a_two_digit_day() {
        // 2026-06-15 is a Monday; step through a week, one day at a time.
        let monday = UNIX_EPOCH + Duration::from_secs(1_781_481_600);
        let names = [
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
        ];
        for (i, name) in names.iter().enumerate() {
            let t = monday + Duration::from_secs(86_400 * i as u64);
            let want = format!("{name}, {}-Jun-26 00:00:00 GMT", 15 + i);
            assert_eq!(rfc850(t), want);
            assert_eq!(
                asctime(t),
                format!("{} Jun {} 00:00:00 2026", &name[..3], 15 + i)
            );
            for s in [rfc850(t), asctime(t)] {
                assert_eq!(parse(s.as_bytes()), Ok(RetryAfter::Date(t)), "{s}");
            }
        }
    }
}
