//! Any bytes as a response body (and a vendor error header) through the body reader and the
//! classifier: nothing panics, every delay stays within [floor, cap], and an out-of-quota
//! verdict never carries a delay. Byte 0 picks the status, byte 1 the vendor header; up to
//! the first NUL after them is that header's value, the rest is the body (cut at 4 KiB,
//! as every caller keeps it).
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use abide_core::classify::{duration, vendors};
use abide_core::{Classifier, Observation, VerdictClass, MAX_CLASSIFY_BODY};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use libfuzzer_sys::fuzz_target;
use rand_chacha::rand_core::SeedableRng;

const STATUSES: [u16; 8] = [200, 400, 403, 404, 429, 500, 503, 504];
const HEADERS: [&str; 4] = [
    "x-amzn-errortype",
    "x-ms-error-code",
    "retry-after",
    "x-none",
];

fuzz_target!(|data: &[u8]| {
    let [s, h, rest @ ..] = data else { return };
    let status = STATUSES[usize::from(*s) % STATUSES.len()];
    let (value, body) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&[][..], rest),
    };
    let body = &body[..body.len().min(MAX_CLASSIFY_BODY)];
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_bytes(value) {
        let name = HEADERS[usize::from(*h) % HEADERS.len()];
        headers.append(HeaderName::from_static(name), v);
    }
    if let Ok(text) = std::str::from_utf8(body) {
        if let Some(d) = duration::parse_go(text) {
            assert!(d <= duration::MAX_DURATION);
        }
    }
    let json = vendors::parse_json(body);
    let _ = vendors::find(status, &headers, body, json.as_ref());
    let _ = vendors::aws::xml_error_code(body);
    let obs = Observation::Http {
        status: StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        headers: &headers,
        body,
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_781_510_400);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let v = Classifier::default().classify(&obs, now, &mut rng);
    if let Some(d) = v.retry_after {
        assert!(d.delay >= Duration::from_secs(1) && d.delay <= Duration::from_secs(600));
        assert_ne!(v.class, VerdictClass::OutOfQuota);
    }
});
