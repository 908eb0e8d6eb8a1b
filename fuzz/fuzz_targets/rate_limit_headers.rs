//! Any bytes as rate-limit and warning header values, read in every dialect and through the
//! classifier: parsing never panics and every value stays within its clamp. The first byte
//! of each NUL-separated chunk picks the header name; the last chunk is also the body.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use abide_core::ratelimit::{self, Dialect, MAX_QUOTA, MAX_RESET};
use abide_core::{Classifier, Observation};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use libfuzzer_sys::fuzz_target;
use rand_chacha::rand_core::SeedableRng;

const NAMES: [&str; 28] = [
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
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-reset-requests",
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
    "deprecation",
    "sunset",
    "link",
];

fuzz_target!(|data: &[u8]| {
    let now = UNIX_EPOCH + Duration::from_secs(1_781_510_400);
    let mut headers = HeaderMap::new();
    let mut body: &[u8] = &[];
    let mut status = 429;
    for chunk in data.split(|&b| b == 0) {
        let Some((&pick, value)) = chunk.split_first() else {
            continue;
        };
        body = value;
        status = 400 + u16::from(pick % 200);
        if let Ok(v) = HeaderValue::from_bytes(value) {
            let name = NAMES[usize::from(pick) % NAMES.len()];
            headers.append(HeaderName::from_static(name), v);
        }
    }
    for dialect in Dialect::ALL {
        let r = ratelimit::read(&headers, now, dialect);
        assert!(r.retry_after_ms.is_none_or(|d| d <= MAX_RESET));
        if let Some(info) = r.info {
            assert!(info.limit.is_none_or(|l| l <= MAX_QUOTA));
            assert!(info.remaining.is_none_or(|r| r <= MAX_QUOTA));
            assert!(info.reset.is_none_or(|r| r <= MAX_RESET));
            assert!(info.window.is_none_or(|w| w <= MAX_RESET && !w.is_zero()));
            if let Some(rate) = info.advertised_rate() {
                assert!((0.001..=100_000.0).contains(&rate));
            }
        }
        let obs = Observation::Http {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::TOO_MANY_REQUESTS),
            headers: &headers,
            body,
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let v = Classifier::default()
            .with_dialect(dialect)
            .classify(&obs, now, &mut rng);
        if let Some(d) = v.retry_after {
            assert!(d.delay >= Duration::from_secs(1) && d.delay <= Duration::from_secs(600));
        }
    }
    let _ = abide_core::parse_warnings(&headers);
});
