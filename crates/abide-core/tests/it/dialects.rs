//! Rate-limit dialects: a documented vector per family (source in each test's comment), the
//! classifier's dialect rules, and a property across every dialect parser: never panics,
//! always clamped.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abide_core::ratelimit::{self, Dialect, RateLimitSource, Reader, MAX_QUOTA, MAX_RESET};
use abide_core::retry_after::MIN_FLOOR;
use abide_core::{Classifier, Observation, VerdictClass};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::support::{headers, now, rng};

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn unix(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn classify(dialect: Dialect, status: u16, h: &HeaderMap, body: &[u8]) -> abide_core::Verdict {
    let obs = Observation::Http {
        status: StatusCode::from_u16(status).unwrap(),
        headers: h,
        body,
    };
    Classifier::default()
        .with_dialect(dialect)
        .classify(&obs, now(), &mut rng())
}

#[test]
fn x_rate_limit_hyphenated_prefix() {
    // X (Twitter) API v2 "Rate limits": x-rate-limit-limit / -remaining / -reset (epoch s).
    let reset = (unix(now()) + 900).to_string();
    let h = headers(&[
        ("x-rate-limit-limit", "900"),
        ("x-rate-limit-remaining", "899"),
        ("x-rate-limit-reset", &reset),
    ]);
    let r = ratelimit::read(&h, now(), Dialect::Auto);
    assert_eq!(r.reader, Some(Reader::XRateLimit));
    let i = r.info.unwrap();
    assert_eq!(i.source, RateLimitSource::XRateLimit);
    assert_eq!(
        (i.limit, i.remaining, i.reset),
        (Some(900), Some(899), Some(SECS(900)))
    );
}

#[test]
fn github_vectors() {
    // GitHub Docs, "Rate limits for the REST API", "Checking the status of your rate limit".
    let reset = (unix(now()) + 1800).to_string();
    let h = headers(&[
        ("x-ratelimit-limit", "5000"),
        ("x-ratelimit-remaining", "4999"),
        ("x-ratelimit-used", "1"),
        ("x-ratelimit-reset", &reset),
        ("x-ratelimit-resource", "core"),
    ]);
    let r = ratelimit::read(&h, now(), Dialect::Auto);
    assert_eq!(
        (r.reader, r.detected, r.used),
        (Some(Reader::Github), true, Some(1))
    );
    let i = r.info.unwrap();
    assert_eq!(i.policy.as_deref(), Some("core"));
    assert_eq!((i.reset, i.window), (Some(SECS(1800)), Some(SECS(3600))));
    let rate = i.advertised_rate().unwrap();
    assert!((rate - 5000.0 / 3600.0).abs() < 1e-9, "{rate}");
    // The search resource is per minute.
    let h = headers(&[
        ("x-ratelimit-limit", "30"),
        ("x-ratelimit-resource", "search"),
    ]);
    let i = ratelimit::read(&h, now(), Dialect::Github).info.unwrap();
    assert_eq!(i.advertised_rate(), Some(0.5));
    // GitHub resets are always epoch seconds: a small number is long past, not a delta.
    let h = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "60")]);
    let i = ratelimit::read(&h, now(), Dialect::Github).info.unwrap();
    assert_eq!(i.reset, Some(Duration::ZERO));
}

#[test]
fn github_secondary_limit_rules() {
    // "Handle rate limit errors appropriately": retry-after if sent; else, with remaining
    // 0, the reset; else at least one minute.
    let body = b"You have exceeded a secondary rate limit and have been temporarily blocked";
    let v = classify(
        Dialect::Github,
        403,
        &headers(&[("x-ratelimit-remaining", "14")]),
        body,
    );
    assert_eq!(v.class, VerdictClass::Throttle);
    assert_eq!(v.reason, "http_403_secondary_rate_limit");
    assert!(v.secondary_limit);
    assert_eq!(v.retry_after.unwrap().delay, SECS(60));
    let v = classify(
        Dialect::Github,
        403,
        &headers(&[("retry-after", "5")]),
        body,
    );
    assert_eq!(v.retry_after.unwrap().delay, SECS(5));
    let reset = (unix(now()) + 300).to_string();
    let h = headers(&[
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", &reset),
    ]);
    let v = classify(Dialect::Github, 403, &h, body);
    assert_eq!(
        v.retry_after, None,
        "the pacer pauses until the reset instead"
    );
    assert_eq!(v.rate_limit.unwrap().reset, Some(SECS(300)));
    // Another dialect, or a body without the text: the 403 is what it says.
    let h = headers(&[("x-ratelimit-remaining", "14")]);
    assert_eq!(
        classify(Dialect::Auto, 403, &h, body).class,
        VerdictClass::Terminal
    );
    assert_eq!(
        classify(Dialect::Github, 403, &h, b"Bad credentials").class,
        VerdictClass::Terminal
    );
    assert!(!classify(Dialect::Auto, 403, &h, body).secondary_limit);
    // An override decides the class: no secondary-limit wait is added to its retries.
    let c = abide_core::Classifier::default()
        .with_dialect(Dialect::Github)
        .with_http(403, VerdictClass::Retry);
    let obs = abide_core::Observation::Http {
        status: http::StatusCode::FORBIDDEN,
        headers: &h,
        body,
    };
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
    let v = c.classify(&obs, now(), &mut rng);
    assert_eq!((v.class, v.secondary_limit), (VerdictClass::Retry, false));
}

#[test]
fn discord_vectors() {
    // Discord Developer Documentation, "Rate Limits", "Header Format" example.
    let h = headers(&[
        ("x-ratelimit-limit", "5"),
        ("x-ratelimit-remaining", "1"),
        ("x-ratelimit-reset", "1470173023.123"),
        ("x-ratelimit-reset-after", "1"),
        ("x-ratelimit-bucket", "abcd1234"),
    ]);
    let r = ratelimit::read(&h, now(), Dialect::Auto);
    assert_eq!(r.reader, Some(Reader::Discord));
    let i = r.info.unwrap();
    assert_eq!(
        (i.policy.as_deref(), i.reset),
        (Some("abcd1234"), Some(SECS(1)))
    );
    // Global and shared 429s.
    let h = headers(&[("x-ratelimit-global", "true"), ("retry-after", "65")]);
    let r = ratelimit::read(&h, now(), Dialect::Auto);
    assert_eq!(r.scope.as_deref(), Some("global"));
    let h = headers(&[("x-ratelimit-scope", "shared")]);
    assert_eq!(
        ratelimit::read(&h, now(), Dialect::Auto).scope.as_deref(),
        Some("shared")
    );
}

#[test]
fn shopify_vectors() {
    // Shopify "REST Admin API rate limits": X-Shopify-Shop-Api-Call-Limit: 32/40.
    let h = headers(&[("x-shopify-shop-api-call-limit", "32/40")]);
    let r = ratelimit::read(&h, now(), Dialect::Auto);
    assert_eq!(
        (r.reader, r.used, r.leaky_bucket),
        (Some(Reader::Shopify), Some(32), true)
    );
    let i = r.info.unwrap();
    assert_eq!((i.limit, i.remaining, i.reset), (Some(40), Some(8), None));
    assert_eq!(i.advertised_rate(), Some(2.0));
    // Shopify Plus: a bucket of 400 leaking 20/s.
    let h = headers(&[("x-shopify-shop-api-call-limit", "400/400")]);
    let i = ratelimit::read(&h, now(), Dialect::Auto).info.unwrap();
    assert_eq!(
        (i.advertised_rate(), i.reset),
        (Some(20.0), Some(Duration::from_millis(50)))
    );
}

#[test]
fn azure_vectors() {
    // Azure SDK retry policy: retry-after-ms first, then x-ms-retry-after-ms, then
    // Retry-After. A 429 with both uses the millisecond value.
    let h = headers(&[("retry-after-ms", "2500"), ("retry-after", "3")]);
    let v = classify(Dialect::Auto, 429, &h, b"");
    assert_eq!(v.retry_after.unwrap().delay, Duration::from_millis(2500));
    // A 4xx with only retry-after-ms is a throttle, as with Retry-After.
    let h = headers(&[("x-ms-retry-after-ms", "4000")]);
    let v = classify(Dialect::Auto, 400, &h, b"");
    assert_eq!(
        (v.class, v.reason.as_str()),
        (VerdictClass::Throttle, "http_400_retry_after")
    );
    // Garbage is ignored with a warning, and the plain Retry-After still counts.
    let h = headers(&[("retry-after-ms", "soon"), ("retry-after", "3")]);
    let r = ratelimit::read(&h, now(), Dialect::Auto);
    assert_eq!(r.retry_after_ms, None);
    assert_eq!(r.malformed[0].header, "retry-after-ms");
    assert_eq!(
        classify(Dialect::Auto, 429, &h, b"")
            .retry_after
            .unwrap()
            .delay,
        SECS(3)
    );
}

#[test]
fn ietf_draft6_with_policy() {
    // express-rate-limit standardHeaders "draft-6" (draft-ietf-httpapi-ratelimit-headers-06).
    let h = headers(&[
        ("ratelimit-policy", "100;w=900"),
        ("ratelimit-limit", "100"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", "52"),
    ]);
    let i = ratelimit::read(&h, now(), Dialect::Ietf).info.unwrap();
    assert_eq!(i.source, RateLimitSource::LegacyDraft);
    assert_eq!(
        (i.limit, i.remaining, i.reset, i.window),
        (Some(100), Some(0), Some(SECS(52)), Some(SECS(900)))
    );
    // A policy alone still gives the limit when RateLimit-Limit is missing.
    let h = headers(&[("ratelimit-policy", "10;w=1"), ("ratelimit-remaining", "3")]);
    let i = ratelimit::read(&h, now(), Dialect::Ietf).info.unwrap();
    assert_eq!(
        (i.limit, i.remaining, i.window),
        (Some(10), Some(3), Some(SECS(1)))
    );
}

#[test]
fn a_named_dialect_reads_only_its_headers() {
    let h = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30")]);
    assert!(ratelimit::read(&h, now(), Dialect::Ietf).info.is_none());
    assert!(ratelimit::read(&h, now(), Dialect::Shopify).info.is_none());
    assert_eq!(
        ratelimit::read(&h, now(), Dialect::XRateLimit)
            .info
            .unwrap()
            .reset,
        Some(SECS(30))
    );
}

#[test]
fn dialect_names_round_trip() {
    for d in Dialect::ALL {
        assert_eq!(d.as_str().parse::<Dialect>().unwrap(), d);
        assert_eq!(
            d.reader().map(Dialect::from),
            Some(d).filter(|d| *d != Dialect::Auto)
        );
    }
    for r in Reader::ALL {
        assert_eq!(Dialect::from(r).as_str(), r.as_str());
    }
    assert_eq!(" GitHub ".parse::<Dialect>(), Ok(Dialect::Github));
    let e = "twitter".parse::<Dialect>().unwrap_err().to_string();
    assert_eq!(
        e,
        "unknown rate-limit dialect \"twitter\": expected one of auto, ietf, x-ratelimit, \
         azure, shopify, discord, github"
    );
}

/// Every header name any dialect reads.
const NAMES: [&str; 22] = [
    "ratelimit",
    "ratelimit-policy",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-used",
    "x-ratelimit-reset",
    "x-ratelimit-reset-after",
    "x-rate-limit-limit",
    "x-rate-limit-remaining",
    "x-rate-limit-reset",
    "x-ratelimit-resource",
    "x-ratelimit-bucket",
    "x-ratelimit-global",
    "x-ratelimit-scope",
    "x-shopify-shop-api-call-limit",
    "retry-after-ms",
    "x-ms-retry-after-ms",
    "x-ms-ratelimit-remaining-subscription-reads",
    "retry-after",
];

/// Header-like values: numbers of every size, fractions, slashes, lists, noise.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,25}",
        "[0-9]{1,20}\\.[0-9]{1,12}",
        "[0-9]{1,20}/[0-9]{1,20}",
        "-?[0-9]{1,6}(;w=[0-9]{1,6})?(, [0-9]{1,6})?",
        "\"?[a-z]{1,5}\"?;[qrtw]=-?[0-9]{1,20}(;[qrtw]=[0-9.]{1,8})?",
        "(true|false|user|global|shared)",
        "[ -~]{0,40}",
    ]
}

proptest! {
    #[test]
    fn every_dialect_never_panics_and_is_clamped(
        values in proptest::collection::vec((0usize..NAMES.len(), value()), 0..8),
        secs in 0u64..7_258_118_400,
        status in 100u16..600,
        body in "[ -~]{0,60}",
    ) {
        let now = UNIX_EPOCH + Duration::from_secs(secs);
        let mut h = HeaderMap::new();
        for (i, v) in &values {
            if let Ok(v) = HeaderValue::from_str(v) {
                h.append(HeaderName::from_static(NAMES[*i]), v);
            }
        }
        for dialect in Dialect::ALL {
            let r = ratelimit::read(&h, now, dialect);
            prop_assert!(r.retry_after_ms.is_none_or(|d| d <= MAX_RESET));
            prop_assert!(r.used.is_none_or(|u| u <= MAX_QUOTA));
            prop_assert!(r.malformed.len() <= 16);
            if let Some(info) = r.info {
                prop_assert!(info.limit.is_none_or(|l| l <= MAX_QUOTA));
                prop_assert!(info.remaining.is_none_or(|r| r <= MAX_QUOTA));
                prop_assert!(info.reset.is_none_or(|r| r <= MAX_RESET));
                prop_assert!(info.window.is_none_or(|w| w <= MAX_RESET && !w.is_zero()));
                if let Some(rate) = info.advertised_rate() {
                    prop_assert!((0.001..=100_000.0).contains(&rate));
                }
            }
            // Through the classifier: every delay within the default [1 s, 10 min].
            let obs = Observation::Http {
                status: StatusCode::from_u16(status).unwrap(),
                headers: &h,
                body: body.as_bytes(),
            };
            let c = Classifier::default().with_dialect(dialect);
            let v = c.classify(&obs, now, &mut ChaCha8Rng::seed_from_u64(secs));
            if let Some(d) = &v.retry_after {
                prop_assert!(d.delay >= SECS(1).max(MIN_FLOOR) && d.delay <= SECS(600));
            }
            if let Some(info) = &v.rate_limit {
                prop_assert!(info.reset.is_none_or(|r| r <= MAX_RESET));
            }
        }
    }
}
