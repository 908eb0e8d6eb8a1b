//! Any bytes as one or more `Retry-After` lines (split on NUL): parsing never panics and the
//! decided delay always lies within [floor, cap].
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use abide_core::retry_after::parse_at;
use abide_core::{DelayReason, RetryAfterPolicy};
use libfuzzer_sys::fuzz_target;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

fuzz_target!(|data: &[u8]| {
    let now = UNIX_EPOCH + Duration::from_secs(1_781_510_400);
    let lines: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    for line in &lines {
        let _ = parse_at(line, now);
    }
    let policy = RetryAfterPolicy::default();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let d = policy
        .decide(lines.iter().copied(), now, &mut rng)
        .expect("at least one line");
    assert!(d.delay >= policy.floor && d.delay <= policy.cap, "{d:?}");
    if d.reason == DelayReason::Unparseable {
        assert!(d.delay >= policy.unparseable_wait);
    }
});
