//! JSON lines in, [`NewItem`]s out: the input format of `abide send` and the body format of
//! `abide serve`'s `POST /v1/items`.
//!
//! A batch is validated whole before anything is enqueued: one bad line rejects the batch,
//! so an input is never half-enqueued. Items without an `idempotency_key` get one derived
//! from their content, so running the same file twice enqueues nothing new (see
//! [`derived_key`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};

use abide_outbox::{Body, NewItem, Request};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// How many bad lines an error lists before summarising the rest.
pub(crate) const MAX_LISTED_ERRORS: usize = 20;

/// The line format, the one place it is explained to users.
pub(crate) const FORMAT_HELP: &str = "\
INPUT FORMAT (JSON lines: one JSON object per line; blank lines are skipped)
  {\"provider\":\"sms\",\"path\":\"/v1/messages\",\"body\":{\"to\":\"+15550100\",\"text\":\"hi\"}}
  {\"provider\":\"sms\",\"method\":\"POST\",\"path\":\"/v1/messages\",\"headers\":{\"X-Trace\":\"42\"},
   \"body\":{\"to\":\"+15550101\"},\"idempotency_key\":\"order-1001\"}

  provider         name of a provider in --config (required); a line never names a URL
  path             path below that provider's base_url, starting with '/' (required)
  method           upper-case HTTP method (default POST)
  headers          non-secret headers; Authorization, cookies and API keys are refused
                   (credentials come from the provider's credentials_env)
  body             any JSON value, sent as application/json; or
  text             a string, sent as text/plain (at most one of body and text)
  idempotency_key  sent on every attempt in the provider's idempotency header; 1-255
                   visible ASCII bytes. When absent, abide derives one: \"abide-\" and 32
                   hex digits of SHA-256 over provider, method, path, headers, body and the
                   number of identical lines before this one in the same input. Re-running
                   the same input (after Ctrl-C, kill -9 or to the end) therefore enqueues
                   nothing twice, and identical lines stay distinct messages. The same
                   message in another file sent into the same database is treated as the
                   same message: give an explicit key when that is not what you mean.

  A batch is checked whole before anything is stored: if any line is malformed (bad JSON,
  unknown field, unknown provider, bad path, secret header, ...) NOTHING is enqueued, every
  bad line is reported with its line number (up to 20), and the exit code is 2.";

/// One input line as written by the user.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Line {
    provider: String,
    path: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// A problem with one line (1-based number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

/// Every problem found in a batch; nothing was enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchError {
    /// The first [`MAX_LISTED_ERRORS`] problems.
    pub(crate) errors: Vec<LineError>,
    /// All bad lines, including those not listed.
    pub(crate) bad_lines: usize,
    /// Lines that held an item (blank lines excluded).
    pub(crate) total_lines: usize,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} of {} lines are malformed; nothing was enqueued:",
            self.bad_lines, self.total_lines
        )?;
        for e in &self.errors {
            writeln!(f, "  line {}: {}", e.line, e.message)?;
        }
        if self.bad_lines > self.errors.len() {
            writeln!(f, "  ... and {} more", self.bad_lines - self.errors.len())?;
        }
        Ok(())
    }
}

impl std::error::Error for BatchError {}

impl Line {
    /// The item this line describes. `occurrence` counts identical earlier lines.
    fn into_item(self, known: &dyn Fn(&str) -> bool) -> Result<NewItem, String> {
        if !known(&self.provider) {
            return Err(format!(
                "provider {:?} is not configured (see --config)",
                self.provider
            ));
        }
        let body = match (self.body, self.text) {
            (Some(_), Some(_)) => return Err("give `body` or `text`, not both".into()),
            (Some(v), None) => Some(Body::Json(v)),
            (None, Some(t)) => Some(Body::Text(t)),
            (None, None) => None,
        };
        let request = Request {
            method: self.method.unwrap_or_else(|| "POST".into()),
            path: self.path,
            headers: self.headers,
            body,
        };
        let item = NewItem {
            provider: self.provider,
            request,
            idempotency_key: self.idempotency_key,
        };
        item.validate().map_err(|e| e.to_string())?;
        Ok(item)
    }
}

/// One item from a JSON value in the line format (used by `serve`). No key is derived:
/// without `idempotency_key` the store uses the new item's id.
///
/// # Errors
/// What is wrong with it, as text.
pub(crate) fn item_from_value(
    v: serde_json::Value,
    known: &dyn Fn(&str) -> bool,
) -> Result<NewItem, String> {
    serde_json::from_value::<Line>(v)
        .map_err(|e| e.to_string())
        .and_then(|l| l.into_item(known))
}

/// Parse and validate a whole JSON-lines batch. `known` says whether a provider name is
/// configured. Items without a key get a [`derived_key`].
///
/// # Errors
/// A [`BatchError`] listing bad lines; then nothing may be enqueued.
pub(crate) fn parse_batch(
    text: &str,
    known: &dyn Fn(&str) -> bool,
) -> Result<Vec<NewItem>, BatchError> {
    let mut items = Vec::new();
    let mut errors = Vec::new();
    let mut bad_lines = 0;
    let mut total_lines = 0;
    let mut seen: HashMap<[u8; 32], u64> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        total_lines += 1;
        let parsed = serde_json::from_str::<Line>(raw)
            .map_err(|e| e.to_string())
            .and_then(|l| l.into_item(known));
        match parsed {
            Ok(mut item) => {
                if item.idempotency_key.is_none() {
                    let digest = content_digest(&item);
                    let n = seen.entry(digest).or_insert(0);
                    item.idempotency_key = Some(derived_key(&digest, *n));
                    *n += 1;
                }
                items.push(item);
            }
            Err(message) => {
                bad_lines += 1;
                if errors.len() < MAX_LISTED_ERRORS {
                    errors.push(LineError {
                        line: i + 1,
                        message,
                    });
                }
            }
        }
    }
    if bad_lines > 0 {
        return Err(BatchError {
            errors,
            bad_lines,
            total_lines,
        });
    }
    Ok(items)
}

/// SHA-256 over everything that makes a message this message (not its line number, so
/// inserting an unrelated line does not change every key after it).
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

/// The generated key: `abide-` and 128 bits of `SHA-256(digest ‖ occurrence)` in hex.
/// Stable across runs, machines and abide versions that keep the `v1` prefix.
pub(crate) fn derived_key(digest: &[u8; 32], occurrence: u64) -> String {
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
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn any(_: &str) -> bool {
        true
    }

    #[test]
    fn keys_are_stable_and_ignore_key_order() {
        let a = parse_batch(
            r#"{"provider":"sms","path":"/m","body":{"a":1,"b":[1,{"y":2,"x":1}]}}"#,
            &any,
        )
        .unwrap();
        let b = parse_batch(
            "\n\n{\"body\":{\"b\":[1,{\"x\":1,\"y\":2}],\"a\":1},\"path\":\"/m\",\"provider\":\"sms\"}",
            &any,
        )
        .unwrap();
        assert_eq!(a[0].idempotency_key, b[0].idempotency_key);
        let k = a[0].idempotency_key.clone().unwrap();
        assert!(k.starts_with("abide-") && k.len() == 6 + 32, "{k}");
    }

    #[test]
    fn identical_lines_stay_distinct_and_given_keys_are_kept() {
        let line = r#"{"provider":"sms","path":"/m","body":{"to":"+1"}}"#;
        let text = format!(
            "{line}\n{line}\n{{\"provider\":\"sms\",\"path\":\"/m\",\"idempotency_key\":\"mine\"}}"
        );
        let items = parse_batch(&text, &any).unwrap();
        assert_ne!(items[0].idempotency_key, items[1].idempotency_key);
        assert_eq!(items[2].idempotency_key.as_deref(), Some("mine"));
        // Inserting an unrelated line first changes no key.
        let text2 = format!("{{\"provider\":\"sms\",\"path\":\"/other\"}}\n{text}");
        let items2 = parse_batch(&text2, &any).unwrap();
        assert_eq!(items[0].idempotency_key, items2[1].idempotency_key);
        assert_eq!(items[1].idempotency_key, items2[2].idempotency_key);
    }

    #[test]
    fn bad_lines_are_all_reported_with_numbers() {
        let known = |p: &str| p == "sms";
        let text = "{\"provider\":\"sms\",\"path\":\"/m\"}\nnot json\n\n{\"provider\":\"email\",\"path\":\"/m\"}\n{\"provider\":\"sms\",\"path\":\"https://evil/x\"}\n{\"provider\":\"sms\",\"path\":\"/m\",\"hedaers\":{}}";
        let e = parse_batch(text, &known).unwrap_err();
        let lines: Vec<usize> = e.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![2, 4, 5, 6]);
        assert_eq!(e.total_lines, 5);
        let shown = e.to_string();
        assert!(
            shown.contains("line 4: provider \"email\" is not configured"),
            "{shown}"
        );
        assert!(shown.contains("nothing was enqueued"));
    }

    #[test]
    fn error_list_is_bounded() {
        let text = "x\n".repeat(50);
        let e = parse_batch(&text, &any).unwrap_err();
        assert_eq!(e.errors.len(), MAX_LISTED_ERRORS);
        assert_eq!(e.bad_lines, 50);
        assert!(e.to_string().contains("and 30 more"));
    }

    #[test]
    fn secret_headers_and_both_bodies_are_refused() {
        let e = parse_batch(
            "{\"provider\":\"sms\",\"path\":\"/m\",\"headers\":{\"Authorization\":\"Bearer x\"}}\n{\"provider\":\"sms\",\"path\":\"/m\",\"body\":1,\"text\":\"x\"}",
            &any,
        )
        .unwrap_err();
        assert_eq!(e.bad_lines, 2);
    }
}
