//! Safe request traces: what logs may say about a caller.

use http::HeaderMap;

/// A short, stable, non-reversible-at-a-glance label for a secret (an API key) or an
/// idempotency key, safe to put in logs: `k:` followed by 8 hex digits of FNV-1a.
///
/// It is for correlating log lines, not a security boundary; the raw value is never logged.
pub fn safe_trace(secret: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in secret.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("k:{:08x}", h >> 32)
}

/// The request trace used for concurrency reservations: the `Idempotency-Key` header, else
/// `X-Request-Id`, else `None` (the gate then uses a fresh trace).
pub fn request_trace(headers: &HeaderMap) -> Option<String> {
    ["idempotency-key", "x-request-id"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_trace_hides_the_secret_and_is_stable() {
        let a = safe_trace("sk_live_abcdef");
        assert_eq!(a, safe_trace("sk_live_abcdef"));
        assert_ne!(a, safe_trace("sk_live_abcdeg"));
        assert!(!a.contains("abc"));
        assert_eq!(a.len(), 10);
    }

    #[test]
    fn idempotency_key_wins_over_request_id() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", "r1".parse().unwrap());
        assert_eq!(request_trace(&h).as_deref(), Some("r1"));
        h.insert("idempotency-key", "i1".parse().unwrap());
        assert_eq!(request_trace(&h).as_deref(), Some("i1"));
    }
}
