//! Warning shots: `Deprecation` (RFC 9745) and `Sunset` (RFC 8594).
//!
//! A provider that is about to retire an endpoint usually says so in headers weeks ahead.
//! Nobody reads headers on successful responses, so the warning goes unseen until the
//! endpoint starts failing; abide reports them so they can be counted and alerted on.
//!
//! # What is read
//! - `Deprecation` (RFC 9745 §2): a structured-field Date, `@1688169599`. Also read, from
//!   earlier drafts and real servers: `?1` / `true` (deprecated, date unknown) and an
//!   HTTP-date. Anything else is ignored, as RFC 9745 asks of an invalid value.
//! - `Sunset` (RFC 8594 §3): an HTTP-date (a wrong weekday is ignored, as in RFC 8594's own
//!   example). An invalid value is ignored (RFC 8594 §3).
//! - `Link` with `rel="deprecation"` (RFC 9745 §3): its target is attached to the
//!   deprecation warning, truncated to [`crate::retry_after::MAX_RAW_LEN`] bytes.
//!
//! Dates are reported as given; whether a date is past (already deprecated) or future
//! (scheduled) is for the caller, who has the clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use serde::Serialize;
use sfv::{BareItem, Item, Parser};

use crate::retry_after::escape_raw;

/// One warning found in response headers. Serialised with a `kind` tag, times as RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Warning {
    /// `Deprecation` (RFC 9745): the resource is (or will be) deprecated.
    Deprecation {
        /// When it is or was deprecated; `None` for the legacy `true` / `?1` form.
        #[serde(serialize_with = "crate::rfc3339::serialize_opt")]
        at: Option<SystemTime>,
        /// Target of a `Link: <…>; rel="deprecation"`, if sent.
        link: Option<String>,
    },
    /// `Sunset` (RFC 8594): the resource is expected to stop responding at this time.
    Sunset {
        /// When the resource is expected to become unresponsive.
        #[serde(serialize_with = "crate::rfc3339::serialize")]
        at: SystemTime,
    },
}

/// Read `Deprecation` and `Sunset` from response headers, in that order. Repeated lines
/// are read one by one; an invalid one is ignored.
pub fn parse_warnings(headers: &HeaderMap) -> Vec<Warning> {
    let mut out = Vec::new();
    let link = deprecation_link(headers);
    for v in headers.get_all("deprecation") {
        if let Some(at) = parse_deprecation(v.as_bytes()) {
            out.push(Warning::Deprecation {
                at,
                link: link.clone(),
            });
        }
    }
    for v in headers.get_all("sunset") {
        if let Some(at) = parse_http_date(v.as_bytes()) {
            out.push(Warning::Sunset { at });
        }
    }
    out
}

/// `Some(Some(date))`, `Some(None)` for "deprecated, date unknown", `None` when invalid.
fn parse_deprecation(v: &[u8]) -> Option<Option<SystemTime>> {
    if let Ok(item) = Parser::new(v).parse::<Item>() {
        return match item.bare_item {
            BareItem::Date(d) => unix_seconds(i64::from(d.unix_seconds())).map(Some),
            BareItem::Boolean(true) => Some(None),
            BareItem::Token(t) if t.as_str() == "true" => Some(None),
            _ => None,
        };
    }
    parse_http_date(v).map(Some)
}

fn unix_seconds(s: i64) -> Option<SystemTime> {
    let magnitude = Duration::from_secs(s.unsigned_abs());
    if s >= 0 {
        UNIX_EPOCH.checked_add(magnitude)
    } else {
        UNIX_EPOCH.checked_sub(magnitude)
    }
}

fn parse_http_date(v: &[u8]) -> Option<SystemTime> {
    // RFC 8594 dates have four-digit years, so the clock only matters for RFC 850 forms.
    crate::retry_after::parse_http_date(
        trim_ows(v),
        UNIX_EPOCH + Duration::from_secs(1_559_347_200),
    )
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// The target of the first `Link` value whose `rel` includes `deprecation`.
fn deprecation_link(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::LINK)
        .iter()
        .flat_map(|v| link_values(v.as_bytes()))
        .find(|(_, params)| has_rel(params, "deprecation"))
        .map(|(target, _)| escape_raw(target))
}

/// Split a `Link` field (RFC 8288 §3) into `(target, params)` pairs. Commas inside `<…>`
/// or quoted strings do not split.
fn link_values(v: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    let mut rest = v;
    loop {
        let Some(open) = rest.iter().position(|&b| b == b'<') else {
            return out;
        };
        let Some(close) = rest[open..].iter().position(|&b| b == b'>') else {
            return out;
        };
        let target = &rest[open + 1..open + close];
        let after = &rest[open + close + 1..];
        let mut in_quotes = false;
        let end = after
            .iter()
            .position(|&b| {
                if b == b'"' {
                    in_quotes = !in_quotes;
                }
                b == b',' && !in_quotes
            })
            .unwrap_or(after.len());
        out.push((target, &after[..end]));
        rest = &after[end..];
    }
}

/// Whether `;rel=…` among `params` lists `rel` (case-insensitive, space-separated).
fn has_rel(params: &[u8], rel: &str) -> bool {
    let Ok(params) = std::str::from_utf8(params) else {
        return false;
    };
    params.split(';').any(|p| {
        let Some((k, v)) = p.split_once('=') else {
            return false;
        };
        k.trim().eq_ignore_ascii_case("rel")
            && v.trim()
                .trim_matches('"')
                .split_ascii_whitespace()
                .any(|r| r.eq_ignore_ascii_case(rel))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn deprecation_date_and_link() {
        let h = headers(&[
            ("deprecation", "@1688169599"),
            (
                "link",
                r#"<https://example.com/a,b>; rel="alternate", <https://example.com/dep>; rel="deprecation"; type="text/html""#,
            ),
        ]);
        assert_eq!(
            parse_warnings(&h),
            vec![Warning::Deprecation {
                at: Some(UNIX_EPOCH + Duration::from_secs(1_688_169_599)),
                link: Some("https://example.com/dep".into()),
            }]
        );
    }

    #[test]
    fn legacy_forms_and_garbage() {
        let h = headers(&[
            ("deprecation", "true"),
            ("deprecation", "?1"),
            ("deprecation", "soon"),
            ("sunset", "Sat, 31 Dec 2018 23:59:59 GMT"),
            ("sunset", "never"),
        ]);
        let w = parse_warnings(&h);
        assert_eq!(w.len(), 3, "{w:?}");
        // RFC 8594 §3 example: "Sat" although 31 Dec 2018 was a Monday.
        assert_eq!(
            w[2],
            Warning::Sunset {
                at: httpdate::parse_http_date("Mon, 31 Dec 2018 23:59:59 GMT").unwrap()
            }
        );
    }

    #[test]
    fn serialises_with_kind_and_rfc3339() {
        let w = Warning::Sunset {
            at: UNIX_EPOCH + Duration::from_secs(1_546_300_799),
        };
        assert_eq!(
            serde_json::to_string(&w).unwrap(),
            r#"{"kind":"sunset","at":"2018-12-31T23:59:59Z"}"#
        );
    }
}
