//! Any bytes as rate-limit and warning header values: parsing never panics and every value
//! stays within its clamp. The first byte of each NUL-separated chunk picks the header name.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use abide_core::parse_rate_limit;
use abide_core::ratelimit::{MAX_QUOTA, MAX_RESET};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 12] = [
    "ratelimit",
    "ratelimit-policy",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-reset-after",
    "deprecation",
    "sunset",
    "link",
];

fuzz_target!(|data: &[u8]| {
    let now = UNIX_EPOCH + Duration::from_secs(1_781_510_400);
    let mut headers = HeaderMap::new();
    for chunk in data.split(|&b| b == 0) {
        let Some((&pick, value)) = chunk.split_first() else {
            continue;
        };
        if let Ok(v) = HeaderValue::from_bytes(value) {
            let name = NAMES[usize::from(pick) % NAMES.len()];
            headers.append(HeaderName::from_static(name), v);
        }
    }
    if let Some(info) = parse_rate_limit(&headers, now) {
        assert!(info.limit.is_none_or(|l| l <= MAX_QUOTA));
        assert!(info.remaining.is_none_or(|r| r <= MAX_QUOTA));
        assert!(info.reset.is_none_or(|r| r <= MAX_RESET));
        assert!(info.window.is_none_or(|w| w <= MAX_RESET && !w.is_zero()));
        if let Some(rate) = info.advertised_rate() {
            assert!((0.001..=100_000.0).contains(&rate));
        }
    }
    let _ = abide_core::parse_warnings(&headers);
});
