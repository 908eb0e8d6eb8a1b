//! Idempotency keys derived from content, for items whose caller gave none.
//!
//! The key of an item is `abide-` and 128 bits of SHA-256 (hex) over what makes the
//! message this message: provider, method, path, headers (names lower-cased), body (JSON
//! with object keys sorted at every level), and how many identical items came before it in
//! the same batch. So enqueueing the same batch twice adds nothing the second time (the
//! store ignores a known key), while two identical lines stay two messages. The position
//! of an item is not part of its key: inserting an unrelated line changes no other key.
//! Keys are stable across runs, machines and abide versions that keep the `v1` prefix.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::model::{Body, NewItem};

/// Give every item of `items` without an idempotency key its content-derived key
/// ([`content_key`], counting identical items earlier in `items`). Items with a key keep
/// it, and do not count as occurrences.
pub fn assign_content_keys(items: &mut [NewItem]) {
    let mut keys = ContentKeys::default();
    for item in items {
        keys.assign(item);
    }
}

/// The content-derived keys of a stream of items, as [`assign_content_keys`] gives them
/// to a slice, for input read (and enqueued) in parts: one 128-bit digest and a count per
/// distinct message without a key (a 24-byte slot, 2-3 times that as the table grows by
/// doubling), none per item.
#[derive(Debug, Default)]
pub struct ContentKeys {
    seen: HashMap<[u8; 16], u64>,
}

impl ContentKeys {
    /// Give `item` its derived key if it has none; the next item of the same content gets
    /// the next occurrence. An item with a key keeps it and does not count.
    pub fn assign(&mut self, item: &mut NewItem) {
        if item.idempotency_key.is_some() {
            return;
        }
        let digest = content_digest(item);
        let n = self.seen.entry(half(&digest)).or_insert(0);
        item.idempotency_key = Some(derived_key(&digest, *n));
        *n += 1;
    }
}

/// One explicit idempotency key, one message, over a stream of items checked before any
/// is stored (the store checks each enqueue call on its own): 40 bytes per distinct key
/// (128-bit digests of the key and of its first message), none per item.
#[derive(Debug, Default)]
pub struct KeyUses {
    first: HashMap<[u8; 16], (usize, [u8; 16])>,
}

impl KeyUses {
    /// Note `item`, at position `at` of the stream. Items without a key pass.
    ///
    /// # Errors
    /// The position of the first item that gave its key to a different message (a
    /// different content, or the same with header names written otherwise: what
    /// [`NewItem`]'s equality sees).
    pub fn note(&mut self, at: usize, item: &NewItem) -> Result<(), usize> {
        let Some(key) = &item.idempotency_key else {
            return Ok(());
        };
        let mut h = Sha256::new();
        h.update(content_digest(item));
        for name in item.request.headers.keys() {
            h.update(name.as_bytes());
            h.update(b"\0");
        }
        let message = half(&h.finalize().into());
        let key = half(&Sha256::digest(key.as_bytes()).into());
        match self.first.entry(key) {
            Entry::Occupied(first) if first.get().1 != message => Err(first.get().0),
            Entry::Occupied(_) => Ok(()),
            Entry::Vacant(v) => {
                v.insert((at, message));
                Ok(())
            }
        }
    }

    /// Distinct keys noted so far.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// Whether no key was noted.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }
}

/// The first 128 bits of a digest.
fn half(d: &[u8; 32]) -> [u8; 16] {
    let mut h = [0u8; 16];
    h.copy_from_slice(&d[..16]);
    h
}

/// The content-derived key of `item` when `earlier` identical items precede it (0 for
/// the first). Ignores any key `item` already has.
pub fn content_key(item: &NewItem, earlier: u64) -> String {
    derived_key(&content_digest(item), earlier)
}

/// The first 128 bits of SHA-256 (32 lower-case hex digits, like a derived key: enough
/// that two different messages never share one by chance, and half the bytes per stored
/// row of the whole digest) over everything that makes `item` this message: provider,
/// method, path, headers (names lower-cased), body (canonical JSON); the digest its
/// derived key starts from ([`content_key`]). The store keeps it with the item to refuse a
/// known idempotency key given with different content. Ignores any key `item` has.
pub fn content_digest_hex(item: &NewItem) -> String {
    let mut s = String::with_capacity(32);
    for b in &content_digest(item)[..16] {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// SHA-256 over everything that makes a message this message.
fn content_digest(item: &NewItem) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"abide-send-v1\0");
    for part in [
        item.provider.as_str(),
        item.request.method.as_str(),
        item.request.path.as_str(),
    ] {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    for (k, v) in &item.request.headers {
        h.update(k.to_ascii_lowercase().as_bytes());
        h.update(b":");
        h.update(v.as_bytes());
        h.update(b"\0");
    }
    let mut body = String::new();
    match &item.request.body {
        None => body.push('-'),
        Some(Body::Json(v)) => {
            body.push('j');
            canonical_json(v, &mut body);
        }
        Some(Body::Text(t)) => {
            body.push('t');
            body.push_str(t);
        }
    }
    h.update(body.as_bytes());
    h.finalize().into()
}

/// `abide-` and 128 bits of `SHA-256(digest ‖ occurrence)` in hex.
fn derived_key(digest: &[u8; 32], occurrence: u64) -> String {
    let mut h = Sha256::new();
    h.update(digest);
    h.update(occurrence.to_be_bytes());
    let out = h.finalize();
    let mut s = String::from("abide-");
    for b in &out[..16] {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// JSON with object keys sorted at every level, so key order in the input (and serde_json
/// feature flags elsewhere in the build) cannot change a derived key.
fn canonical_json(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(x) = m.get(k) {
                    canonical_json(x, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Request;
    use serde_json::json;

    /// The stored digest: 32 hex digits, the same for the same message whatever its key,
    /// JSON key order or a header name's case, different for a different message.
    #[test]
    fn content_digests_name_the_message_not_the_key() {
        let a = content_digest_hex(&sms());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{a}"
        );
        assert_eq!(content_digest_hex(&sms().with_idempotency_key("k")), a);
        let mut reordered = sms();
        reordered.request.body = Some(Body::Json(
            json!({"n": [1, 2.5, {"a": null, "b": 1}], "text": "hi", "to": "+15550101"}),
        ));
        assert_eq!(content_digest_hex(&reordered), a);
        // Names are hashed lower-cased (in the order of the names as written).
        let one = |name: &str| {
            let mut it = put_text();
            it.request.headers = [(name.to_owned(), "t1".to_owned())].into_iter().collect();
            content_digest_hex(&it)
        };
        assert_eq!(one("X-Tenant"), one("x-tenant"));
        assert_ne!(one("X-Tenant"), one("X-Other"));
        assert_ne!(content_digest_hex(&put_text()), a);
        assert_ne!(content_digest_hex(&no_body()), a);
    }

    fn sms() -> NewItem {
        NewItem::new(
            "sms",
            Request::post_json(
                "/v1/messages",
                json!({"to": "+15550101", "text": "hi", "n": [1, 2.5, {"b": 1, "a": null}]}),
            ),
        )
    }

    fn put_text() -> NewItem {
        NewItem::new(
            "sms",
            Request {
                method: http::Method::PUT,
                path: "/v1/x".into(),
                headers: [("X-Tenant", "t1"), ("accept", "a/b")]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                body: Some(Body::Text("plain é".into())),
            },
        )
    }

    fn no_body() -> NewItem {
        NewItem::new(
            "mail",
            Request {
                method: http::Method::POST,
                path: "/send".into(),
                headers: Default::default(),
                body: None,
            },
        )
    }

    /// Keys already stored in users' databases (computed by the CLI before the derivation
    /// moved here) must still come out: a changed key would send a message twice.
    #[test]
    fn keys_match_those_derived_before_the_move() {
        let mut items = vec![sms(), sms(), put_text(), no_body()];
        assign_content_keys(&mut items);
        let keys: Vec<_> = items
            .iter()
            .map(|i| i.idempotency_key.clone().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "abide-367643bf1862ecbeeea4077dc695d26e",
                "abide-e19156ebde1a6042ce6b644dc23b46f6",
                "abide-12d9750a923818addd5c6bfc70043142",
                "abide-6f528841e55ccaeaa1259313b975f6f0",
            ]
        );
        assert_eq!(content_key(&sms(), 1), keys[1]);
    }

    #[test]
    fn key_order_and_header_case_do_not_matter_content_does() {
        let mut a = sms();
        a.request.body = Some(Body::Json(json!({"x": 1, "y": {"q": 2, "p": 3}})));
        let mut b = sms();
        b.request.body = Some(Body::Json(json!({"y": {"p": 3, "q": 2}, "x": 1})));
        assert_eq!(content_key(&a, 0), content_key(&b, 0));
        let one_header = |name: &str| {
            let mut x = sms();
            x.request.headers.insert(name.to_owned(), "t1".to_owned());
            x
        };
        assert_eq!(
            content_key(&one_header("X-Tenant"), 0),
            content_key(&one_header("x-tenant"), 0)
        );
        for changed in [
            NewItem::new("other", sms().request),
            {
                let mut x = sms();
                x.request.path = "/v1/other".into();
                x
            },
            {
                let mut x = sms();
                x.request.method = http::Method::PUT;
                x
            },
            {
                let mut x = sms();
                x.request.body = Some(Body::Json(json!({"to": "+15550102"})));
                x
            },
        ] {
            assert_ne!(content_key(&changed, 0), content_key(&sms(), 0));
        }
    }

    #[test]
    fn a_key_given_to_two_messages_names_the_first() {
        let mut uses = KeyUses::default();
        assert_eq!(uses.note(1, &sms().with_idempotency_key("k")), Ok(()));
        assert_eq!(uses.note(2, &sms().with_idempotency_key("k")), Ok(()));
        assert_eq!(uses.note(3, &sms()), Ok(()), "no key: nothing to check");
        assert_eq!(uses.note(4, &no_body().with_idempotency_key("k")), Err(1));
        let mut upper = sms();
        upper.request.headers.insert("X-Tenant".into(), "t1".into());
        let mut lower = sms();
        lower.request.headers.insert("x-tenant".into(), "t1".into());
        assert_eq!(uses.note(5, &upper.with_idempotency_key("h")), Ok(()));
        assert_eq!(uses.note(6, &lower.with_idempotency_key("h")), Err(5));
        assert_eq!(uses.len(), 2);
    }

    /// Streamed, items get the keys a slice gets.
    #[test]
    fn streamed_keys_are_the_slices() {
        let mut batch = vec![
            sms(),
            put_text(),
            sms(),
            sms().with_idempotency_key("x"),
            sms(),
        ];
        let mut streamed = batch.clone();
        assign_content_keys(&mut batch);
        let mut keys = ContentKeys::default();
        for it in &mut streamed {
            keys.assign(it);
        }
        assert_eq!(batch, streamed);
        assert_eq!(batch[4].idempotency_key, Some(content_key(&sms(), 2)));
    }

    #[test]
    fn given_keys_are_kept_and_do_not_count_as_occurrences() {
        let mut items = vec![sms().with_idempotency_key("mine"), sms(), no_body(), sms()];
        assign_content_keys(&mut items);
        assert_eq!(items[0].idempotency_key.as_deref(), Some("mine"));
        assert_eq!(items[1].idempotency_key, Some(content_key(&sms(), 0)));
        assert_eq!(items[3].idempotency_key, Some(content_key(&sms(), 1)));
        let k = items[2].idempotency_key.clone().unwrap();
        assert!(k.starts_with("abide-") && k.len() == 6 + 32, "{k}");
    }
}
