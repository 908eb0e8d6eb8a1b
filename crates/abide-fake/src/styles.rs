//! Rate-limit header styles: the gates speak the current IETF draft; a provider configured
//! with another [`HeaderStyle`] rewrites those fields into it on the way out, so a client
//! can be tried against each dialect it will meet.
//!
//! - `ietf`: `RateLimit-Policy: "key";q=10;w=1` and `RateLimit: "key";r=0;t=1`
//!   (draft-ietf-httpapi-ratelimit-headers, as the gates write them).
//! - `draft-6`: `RateLimit-Policy: 10;w=1`, `RateLimit-Limit: 10`, `RateLimit-Remaining: 0`,
//!   `RateLimit-Reset: 1` (draft -06, as express-rate-limit's `draft-6` emits them).
//! - `x-ratelimit`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, and `X-RateLimit-Reset` in
//!   Unix epoch seconds (as GitHub and X send it).
//!
//! Resets are rounded up to whole seconds: a client must never be invited back early.

use std::time::{SystemTime, UNIX_EPOCH};

use abide_core::ratelimit::{self, Dialect, RATELIMIT, RATELIMIT_POLICY};
use abide_core::retry_after::ceil_secs;
use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::config::HeaderStyle;

const NAMES_IETF: [&str; 2] = [RATELIMIT, RATELIMIT_POLICY];

/// Rewrite the IETF fields in `h` into `style`; `wall` dates an epoch reset. Other headers
/// are left alone; without IETF fields nothing changes.
pub(crate) fn restyle(h: &mut HeaderMap, style: HeaderStyle, wall: SystemTime) {
    if style == HeaderStyle::Ietf {
        return;
    }
    let Some(info) = ratelimit::read(h, wall, Dialect::Ietf).info else {
        return;
    };
    for n in NAMES_IETF {
        h.remove(n);
    }
    let mut put = |name: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(HeaderName::from_static(name), v);
        }
    };
    match style {
        HeaderStyle::Ietf => {}
        HeaderStyle::Draft6 => {
            if let (Some(l), Some(w)) = (info.limit, info.window) {
                put("ratelimit-policy", format!("{l};w={}", ceil_secs(w)));
            }
            if let Some(l) = info.limit {
                put("ratelimit-limit", l.to_string());
            }
            if let Some(r) = info.remaining {
                put("ratelimit-remaining", r.to_string());
            }
            if let Some(t) = info.reset {
                put("ratelimit-reset", ceil_secs(t).to_string());
            }
        }
        HeaderStyle::XRateLimit => {
            if let Some(l) = info.limit {
                put("x-ratelimit-limit", l.to_string());
            }
            if let Some(r) = info.remaining {
                put("x-ratelimit-remaining", r.to_string());
            }
            if let Some(t) = info.reset {
                let at = wall.duration_since(UNIX_EPOCH).unwrap_or_default() + t;
                put("x-ratelimit-reset", ceil_secs(at).to_string());
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use abide_core::ratelimit::Reader;
    use std::time::Duration;

    fn gate_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            "ratelimit-policy",
            HeaderValue::from_static("\"key\";q=10;w=2"),
        );
        h.insert("ratelimit", HeaderValue::from_static("\"key\";r=0;t=1.5"));
        h.insert("retry-after", HeaderValue::from_static("2"));
        h
    }

    #[test]
    fn each_style_reads_back_as_the_same_limit() {
        let wall = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        for (style, reader) in [
            (HeaderStyle::Ietf, Reader::Ietf),
            (HeaderStyle::Draft6, Reader::Ietf),
            (HeaderStyle::XRateLimit, Reader::XRateLimit),
        ] {
            let mut h = gate_headers();
            restyle(&mut h, style, wall);
            assert_eq!(h.get("retry-after").unwrap(), "2", "{style:?}");
            let r = ratelimit::read(&h, wall, Dialect::Auto);
            assert_eq!(r.reader, Some(reader), "{style:?}: {h:?}");
            let i = r.info.unwrap();
            assert_eq!((i.limit, i.remaining), (Some(10), Some(0)), "{style:?}");
            // Rewritten, 1.5 s is rounded up, never down.
            let want = match style {
                HeaderStyle::Ietf => Duration::from_millis(1500),
                _ => Duration::from_secs(2),
            };
            assert_eq!(i.reset, Some(want), "{style:?}");
        }
        let mut h = gate_headers();
        restyle(&mut h, HeaderStyle::XRateLimit, wall);
        assert_eq!(h.get("x-ratelimit-reset").unwrap(), "1767225602");
        assert!(h.get("ratelimit").is_none() && h.get("ratelimit-policy").is_none());
        let mut h = gate_headers();
        restyle(&mut h, HeaderStyle::Draft6, wall);
        assert_eq!(h.get("ratelimit-policy").unwrap(), "10;w=2");
        assert_eq!(h.get("ratelimit-reset").unwrap(), "2");
    }
}
