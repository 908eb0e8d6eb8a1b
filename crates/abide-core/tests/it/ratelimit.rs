//! Contract tests for rate-limit headers: IETF structured fields
//! (draft-ietf-httpapi-ratelimit-headers), the legacy draft and `X-RateLimit-*`.

use std::time::{Duration, UNIX_EPOCH};

use abide_core::ratelimit::{MAX_QUOTA, MAX_RESET};
use abide_core::{parse_rate_limit, RateLimitInfo, RateLimitSource};

use crate::support::{headers, now};

fn parse(pairs: &[(&str, &str)]) -> Option<RateLimitInfo> {
    parse_rate_limit(&headers(pairs), now())
}

const SECS: fn(u64) -> Duration = Duration::from_secs;

#[test]
fn absent_or_unrelated_headers_give_none() {
    assert_eq!(parse(&[]), None);
    assert_eq!(parse(&[("content-type", "text/plain")]), None);
    assert_eq!(parse(&[("x-ratelimit-limit", "lots")]), None);
}

#[test]
fn ietf_policy_and_limit() {
    let i = parse(&[
        ("ratelimit-policy", r#""default";q=100;w=60"#),
        ("ratelimit", r#""default";r=50;t=30"#),
    ])
    .unwrap();
    assert_eq!(i.source, RateLimitSource::Ietf);
    assert_eq!(i.policy.as_deref(), Some("default"));
    assert_eq!((i.limit, i.remaining), (Some(100), Some(50)));
    assert_eq!((i.reset, i.window), (Some(SECS(30)), Some(SECS(60))));
    assert!(!i.exhausted());
    let rate = i.advertised_rate().unwrap();
    assert!((rate - 100.0 / 60.0).abs() < 1e-9, "{rate}");
}

#[test]
fn ietf_several_policies_report_the_tightest() {
    let i = parse(&[
        (
            "ratelimit-policy",
            r#""burst";q=100;w=60, "daily";q=1000;w=86400"#,
        ),
        ("ratelimit", r#""burst";r=40;t=10, "daily";r=0;t=3600"#),
    ])
    .unwrap();
    assert_eq!(i.policy.as_deref(), Some("daily"));
    assert_eq!((i.limit, i.remaining), (Some(1000), Some(0)));
    assert_eq!((i.reset, i.window), (Some(SECS(3600)), Some(SECS(86_400))));
    assert!(i.exhausted());
}

#[test]
fn ietf_policy_only_picks_the_lowest_rate() {
    let i = parse(&[(
        "ratelimit-policy",
        r#""burst";q=100;w=1, "hourly";q=3600;w=3600"#,
    )])
    .unwrap();
    assert_eq!(i.policy.as_deref(), Some("hourly"));
    assert_eq!(i.remaining, None);
    assert_eq!(i.advertised_rate(), Some(1.0));
}

#[test]
fn ietf_token_names_and_earlier_dictionary_form() {
    let i = parse(&[("ratelimit", "limit=100, remaining=0, reset=7")]).unwrap();
    assert_eq!(i.source, RateLimitSource::Ietf);
    assert_eq!(
        (i.limit, i.remaining, i.reset),
        (Some(100), Some(0), Some(SECS(7)))
    );
    let i = parse(&[
        ("ratelimit-policy", "10;w=1"),
        ("ratelimit", "default;r=3;t=1"),
    ])
    .unwrap();
    assert_eq!(i.policy.as_deref(), Some("default"));
    assert_eq!(
        (i.limit, i.window, i.remaining),
        (Some(10), Some(SECS(1)), Some(3))
    );
}

#[test]
fn ietf_hostile_values_are_clamped_or_ignored() {
    let i = parse(&[
        ("ratelimit-policy", r#""p";q=999999999999999;w=0"#),
        ("ratelimit", r#""p";r=-5;t=999999999"#),
    ])
    .unwrap();
    assert_eq!(i.limit, Some(MAX_QUOTA));
    assert_eq!(i.window, None, "a zero window is ignored");
    assert_eq!(i.remaining, None, "negative remaining is ignored");
    assert_eq!(i.reset, Some(MAX_RESET));
    assert_eq!(i.advertised_rate(), None);
}

#[test]
fn ietf_garbage_falls_back_to_other_families() {
    let i = parse(&[("ratelimit", "%%%"), ("x-ratelimit-remaining", "3")]).unwrap();
    assert_eq!(i.source, RateLimitSource::XRateLimit);
    assert_eq!(i.remaining, Some(3));
}

#[test]
fn legacy_draft_fields() {
    let i = parse(&[
        ("ratelimit-limit", "100"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", "30"),
    ])
    .unwrap();
    assert_eq!(i.source, RateLimitSource::LegacyDraft);
    assert_eq!(
        (i.limit, i.remaining, i.reset),
        (Some(100), Some(0), Some(SECS(30)))
    );
    assert_eq!(i.window, None);
    assert!(i.exhausted());
}

#[test]
fn legacy_limit_with_quota_policy_gives_a_window() {
    let i = parse(&[("ratelimit-limit", "100, 100;w=60")]).unwrap();
    assert_eq!((i.limit, i.window), (Some(100), Some(SECS(60))));
}

#[test]
fn legacy_hostile_values() {
    let i = parse(&[
        ("ratelimit-limit", "99999999999999999999999"),
        ("ratelimit-remaining", "-1"),
        ("ratelimit-reset", "100000000"),
    ])
    .unwrap();
    assert_eq!(i.limit, Some(MAX_QUOTA));
    assert_eq!(i.remaining, None);
    assert_eq!(i.reset, Some(MAX_RESET));
}

#[test]
fn x_ratelimit_delta_reset() {
    let i = parse(&[
        ("x-ratelimit-limit", "5000"),
        ("x-ratelimit-remaining", "4999"),
        ("x-ratelimit-reset", "60"),
    ])
    .unwrap();
    assert_eq!(i.source, RateLimitSource::XRateLimit);
    assert_eq!(
        (i.limit, i.remaining, i.reset),
        (Some(5000), Some(4999), Some(SECS(60)))
    );
}

#[test]
fn x_ratelimit_epoch_reset_is_converted_against_now() {
    let epoch = now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 42;
    let v = epoch.to_string();
    let i = parse(&[("x-ratelimit-reset", &v)]).unwrap();
    assert_eq!(i.reset, Some(SECS(42)));
    let past = (epoch - 1000).to_string();
    assert_eq!(
        parse(&[("x-ratelimit-reset", &past)]).unwrap().reset,
        Some(SECS(0))
    );
}

#[test]
fn x_ratelimit_reset_after_fractional_is_preferred() {
    let i = parse(&[
        ("x-ratelimit-reset", "1470173023.123"),
        ("x-ratelimit-reset-after", "1.234"),
    ])
    .unwrap();
    assert_eq!(i.reset, Some(Duration::from_millis(1234)));
}

#[test]
fn x_ratelimit_garbage_and_negative_are_ignored() {
    let i = parse(&[
        ("x-ratelimit-limit", "abc"),
        ("x-ratelimit-remaining", "-3"),
        ("x-ratelimit-reset", "1e5"),
        ("x-ratelimit-reset-after", "soon"),
    ]);
    assert_eq!(i, None);
}

#[test]
fn ietf_beats_legacy_beats_x() {
    let all = [
        ("ratelimit", r#""p";r=1"#),
        ("ratelimit-remaining", "2"),
        ("x-ratelimit-remaining", "3"),
    ];
    assert_eq!(parse(&all).unwrap().remaining, Some(1));
    assert_eq!(parse(&all[1..]).unwrap().remaining, Some(2));
    assert_eq!(parse(&all[2..]).unwrap().remaining, Some(3));
}

#[test]
fn advertised_rate_is_clamped() {
    let mut i = parse(&[("ratelimit-policy", "1;w=86400")]).unwrap();
    assert_eq!(i.advertised_rate(), Some(0.001));
    i.limit = Some(MAX_QUOTA);
    i.window = Some(SECS(1));
    assert_eq!(i.advertised_rate(), Some(100_000.0));
}

#[test]
fn serialises_durations_as_seconds() {
    let i = parse(&[
        ("ratelimit-policy", r#""d";q=10;w=60"#),
        ("ratelimit", r#""d";r=0;t=2"#),
    ])
    .unwrap();
    let json = serde_json::to_value(&i).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "source": "ietf", "policy": "d", "limit": 10, "remaining": 0,
            "reset_secs": 2.0, "window_secs": 60.0
        })
    );
}

/// `abide demo`'s provider: 75/s (GCRA, burst 15) and 6 requests in flight.
#[test]
fn ietf_concurrency_policies_are_read_apart_from_the_rate() {
    let ok = parse(&[
        ("ratelimit-policy", r#""key";q=75;w=1, "conc";q=6"#),
        ("ratelimit", r#""key";r=12;t=1, "conc";r=0;t=0"#),
    ])
    .unwrap();
    assert_eq!(ok.policy.as_deref(), Some("key"));
    assert_eq!(ok.advertised_rate(), Some(75.0));
    assert_eq!((ok.remaining, ok.reset), (Some(12), Some(SECS(1))));
    let conc = ok.concurrency.as_ref().unwrap();
    assert_eq!(
        (conc.policy.as_deref(), conc.allowed()),
        (Some("conc"), Some(6))
    );
    // The last place taken by this very request says nothing about time.
    assert!(!ok.exhausted() && ok.exhausted_pause(true).is_none());
    // The refusal names only the concurrency policy.
    let refused = parse(&[
        ("ratelimit-policy", r#""conc";q=6"#),
        ("ratelimit", r#""conc";r=0;t=1"#),
    ])
    .unwrap();
    assert!(refused.concurrency_refused());
    assert_eq!((refused.limit, refused.remaining), (None, None));
    assert_eq!(refused.exhausted_pause(false), None);
    // The draft's quota unit says so even with a window; a rate quota's own exhaustion is
    // not a concurrency refusal.
    let unit = parse(&[
        (
            "ratelimit-policy",
            r#""r";q=10;w=1, "c";q=2000000;w=1;qu="concurrent-requests""#,
        ),
        ("ratelimit", r#""r";r=0;t=1, "c";r=0"#),
    ])
    .unwrap();
    assert_eq!(unit.advertised_rate(), Some(10.0));
    assert_eq!(unit.concurrency.as_ref().unwrap().allowed(), Some(1024));
    assert!(unit.exhausted() && !unit.concurrency_refused());
}
