//! Shared helpers: a fixed clock reading, a seeded RNG and header maps.

use std::time::SystemTime;

use http::{HeaderMap, HeaderName, HeaderValue};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The instant of the seed incident: Mon, 15 Jun 2026 08:00:00 GMT.
pub(crate) fn now() -> SystemTime {
    date("Mon, 15 Jun 2026 08:00:00 GMT")
}

pub(crate) fn date(s: &str) -> SystemTime {
    httpdate::parse_http_date(s).unwrap()
}

pub(crate) fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(7)
}

pub(crate) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}
