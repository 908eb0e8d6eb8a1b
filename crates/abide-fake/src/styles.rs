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
//! Resets are rounded up to whole seconds, once: a client must never be invited back early,
//! nor later than the next whole second. An epoch reset is the gate's own (unrounded) reset
//! added to the wall clock and then rounded up; adding the IETF `t`, already rounded up,
//! and rounding again put it up to two seconds past the window's end, and a client that
//! waited for it skipped every other 1 s window.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abide_core::ratelimit::{self, Dialect, RATELIMIT, RATELIMIT_POLICY};
use abide_core::retry_after::ceil_secs;
use abide_gate::GateStatus;
use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::config::HeaderStyle;

const NAMES_IETF: [&str; 2] = [RATELIMIT, RATELIMIT_POLICY];

/// Rewrite the IETF fields in `h` into `style`; `wall` dates an epoch reset. `statuses`
/// are the gates' states behind the fields, when known: the exact reset of the policy the
/// fields name is taken from them (else the field's `t`, already rounded up). Other headers
/// are left alone; without IETF fields nothing changes.
pub(crate) fn restyle(
    h: &mut HeaderMap,
    style: HeaderStyle,
    wall: SystemTime,
    statuses: &[GateStatus],
) {
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
            if let Some(t) = exact_reset(info.policy.as_deref(), statuses).or(info.reset) {
                let at = wall.duration_since(UNIX_EPOCH).unwrap_or_default() + t;
                put("x-ratelimit-reset", ceil_secs(at).to_string());
            }
        }
    }
}

/// The unrounded reset of the gate named `policy`, if its status is known.
fn exact_reset(policy: Option<&str>, statuses: &[GateStatus]) -> Option<Duration> {
    let policy = policy?;
    statuses.iter().find(|s| s.name == policy).map(|s| s.reset)
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
            restyle(&mut h, style, wall, &[]);
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
        restyle(&mut h, HeaderStyle::XRateLimit, wall, &[]);
        assert_eq!(h.get("x-ratelimit-reset").unwrap(), "1767225602");
        assert!(h.get("ratelimit").is_none() && h.get("ratelimit-policy").is_none());
        let mut h = gate_headers();
        restyle(&mut h, HeaderStyle::Draft6, wall, &[]);
        assert_eq!(h.get("ratelimit-policy").unwrap(), "10;w=2");
        assert_eq!(h.get("ratelimit-reset").unwrap(), "2");
    }

    /// The window ends 1.0 s after a wall clock 0.57 s into its second: the gate's `t` is
    /// 1, the reset instant is at .57 of the next second, and the epoch reset is that
    /// second rounded up once (not `wall + 1` rounded up again, two seconds late).
    #[test]
    fn an_epoch_reset_is_rounded_up_once() {
        let wall = UNIX_EPOCH + Duration::from_millis(908_570);
        let status = |reset| GateStatus {
            name: "key".into(),
            category: "key_rate".into(),
            limit: 100,
            remaining: 0,
            window_secs: Some(1),
            reset,
        };
        let fields = |t: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(
                "ratelimit-policy",
                HeaderValue::from_static("\"key\";q=100;w=1"),
            );
            h.insert("ratelimit", HeaderValue::from_static(t));
            h
        };
        // 908.57 + 1.0 = 909.57: 910, not 911.
        let mut h = fields("\"key\";r=0;t=1");
        restyle(
            &mut h,
            HeaderStyle::XRateLimit,
            wall,
            &[status(Duration::from_secs(1))],
        );
        assert_eq!(h.get("x-ratelimit-reset").unwrap(), "910");
        // 908.57 + 0.32 = 908.89: 909 (the rounded t alone said 910).
        let mut h = fields("\"key\";r=0;t=1");
        restyle(
            &mut h,
            HeaderStyle::XRateLimit,
            wall,
            &[status(Duration::from_millis(320))],
        );
        assert_eq!(h.get("x-ratelimit-reset").unwrap(), "909");
        // Never early: a status of another policy is not used.
        let mut other = status(Duration::from_millis(10));
        other.name = "account".into();
        let mut h = fields("\"key\";r=0;t=1");
        restyle(&mut h, HeaderStyle::XRateLimit, wall, &[other]);
        assert_eq!(h.get("x-ratelimit-reset").unwrap(), "910");
    }
}
