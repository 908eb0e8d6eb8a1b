//! Idempotency keys as the fake remembers them: one header (HTTP) or TLV (SMPP) value,
//! bounded and escaped so that distinct keys stay distinct.

use axum::http::HeaderMap;

/// Longest accepted `Idempotency-Key`, in bytes (as the outbox's own limit).
pub(crate) const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// The `Idempotency-Key` header: `Ok(None)` when absent, `Err` when empty, longer than
/// [`MAX_IDEMPOTENCY_KEY_LEN`] bytes or repeated. Bytes outside printable ASCII (obs-text,
/// RFC 9110 §5.5) and `\` are written `\xNN`, so distinct keys stay distinct.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ()> {
    let mut values = headers.get_all("idempotency-key").iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(());
    }
    escape_key(v.as_bytes()).map(Some)
}

/// An idempotency key's bytes as a string: `Err` when empty or longer than
/// [`MAX_IDEMPOTENCY_KEY_LEN`] bytes. Bytes outside printable ASCII and `\` are written
/// `\xNN`, so distinct keys stay distinct.
pub(crate) fn escape_key(b: &[u8]) -> Result<String, ()> {
    if b.is_empty() || b.len() > MAX_IDEMPOTENCY_KEY_LEN {
        return Err(());
    }
    let mut key = String::with_capacity(b.len());
    for &c in b {
        if c == b' ' || (c.is_ascii_graphic() && c != b'\\') {
            key.push(char::from(c));
        } else {
            key.push_str(&format!("\\x{c:02x}"));
        }
    }
    Ok(key)
}
