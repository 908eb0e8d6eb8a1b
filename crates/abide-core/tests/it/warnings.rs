//! Contract tests for `Deprecation` (RFC 9745) and `Sunset` (RFC 8594).

use std::time::{Duration, UNIX_EPOCH};

use abide_core::{parse_warnings, Warning};

use crate::support::{date, headers};

#[test]
fn rfc9745_deprecation_date() {
    let w = parse_warnings(&headers(&[("deprecation", "@1688169599")]));
    assert_eq!(
        w,
        vec![Warning::Deprecation {
            at: Some(UNIX_EPOCH + Duration::from_secs(1_688_169_599)),
            link: None
        }]
    );
}

#[test]
fn rfc8594_sunset_and_both_together() {
    let w = parse_warnings(&headers(&[
        ("sunset", "Thu, 31 Dec 2026 23:59:59 GMT"),
        ("deprecation", "@1688169599"),
    ]));
    assert_eq!(w.len(), 2);
    assert_eq!(
        w[1],
        Warning::Sunset {
            at: date("Thu, 31 Dec 2026 23:59:59 GMT")
        }
    );
    let json = serde_json::to_value(&w).unwrap();
    assert_eq!(json[0]["kind"], "deprecation");
    assert_eq!(json[0]["at"], "2023-06-30T23:59:59Z");
    assert_eq!(json[1]["at"], "2026-12-31T23:59:59Z");
}

#[test]
fn invalid_values_are_ignored() {
    let w = parse_warnings(&headers(&[
        ("deprecation", "\"yes\""),
        ("deprecation", "@"),
        ("sunset", "tomorrow"),
        ("sunset", "1735689599"),
    ]));
    assert_eq!(w, vec![]);
}

#[test]
fn nothing_without_the_headers() {
    assert!(parse_warnings(&headers(&[("link", "<https://x>; rel=deprecation")])).is_empty());
}
