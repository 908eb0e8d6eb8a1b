//! JSON lines in, [`NewItem`]s out: the input format of `abide send` and the body format of
//! `abide serve`'s `POST /v1/items`.
//!
//! A batch is validated whole before anything is enqueued: one bad line rejects the batch,
//! so an input is never half-enqueued. Items without an `idempotency_key` get one derived
//! from their content, so running the same file twice enqueues nothing new (see
//! `abide_outbox::keys`).

pub(crate) mod stream;
mod unique;

use std::collections::BTreeMap;
use std::fmt;

use abide_outbox::{echo, Body, Config, KeyUses, NewItem, Request};
use serde::Deserialize;

/// How many bad lines an error lists before summarising the rest.
pub(crate) const MAX_LISTED_ERRORS: usize = 20;

/// The line format, the one place it is explained to users.
pub(crate) const FORMAT_HELP: &str = "\
INPUT FORMAT (JSON lines: one JSON object per line; blank lines are skipped)
  {\"provider\":\"sms\",\"path\":\"/v1/messages\",\"body\":{\"to\":\"+15550100\",\"text\":\"hi\"}}
  {\"provider\":\"sms\",\"method\":\"POST\",\"path\":\"/v1/messages\",\"headers\":{\"X-Trace\":\"42\"},
   \"body\":{\"to\":\"+15550101\"},\"idempotency_key\":\"order-1001\"}

  provider         name of a provider in --config (required); a line never names a URL
  path             path below that provider's base_url, starting with '/' (required); never
                   leaving it: '..' in any spelling (%2e%2e, ..;), '\\', %2F, '//' are refused
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

  SMPP providers (transport = \"smpp\" in --config) send one SMS per line:
  {\"provider\":\"smsc\",\"path\":\"/\",\"body\":{\"to\":\"+15550100\",\"text\":\"hi\",\"from\":\"ACME\"}}
  path is \"/\", no headers; \"from\" may be left out when the provider sets source_addr;
  text longer than one SMS (160 GSM 7-bit characters, or 70 UCS-2 ones) goes whole in
  the message_payload TLV, up to the provider's max_text_octets (default 1530); longer
  text is refused, never cut.

  A batch is checked whole before anything is stored: if any line is malformed (bad JSON or
  UTF-8, unknown field, unknown provider, bad path, secret header, an idempotency_key already
  given to a different message on an earlier line, ...) NOTHING is enqueued, every bad line
  is reported with its line number (up to 20), and the exit code is 2.";

/// One input line as written by the user.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Line {
    provider: String,
    path: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, deserialize_with = "unique::headers")]
    headers: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "unique::body")]
    body: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// A problem with one item of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// Where: a 1-based line number (`send`) or a 0-based array index (`serve`).
    pub(crate) at: usize,
    pub(crate) message: String,
}

/// Every problem found in a batch; nothing was enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchError {
    /// The first [`MAX_LISTED_ERRORS`] problems.
    pub(crate) errors: Vec<Problem>,
    /// All bad items, including those not listed.
    pub(crate) bad: usize,
    /// Items in the batch (blank lines excluded).
    pub(crate) total: usize,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} of {} lines are malformed; nothing was enqueued:",
            self.bad, self.total
        )?;
        for e in &self.errors {
            writeln!(f, "  line {}: {}", e.at, e.message)?;
        }
        if self.bad > self.errors.len() {
            writeln!(f, "  ... and {} more", self.bad - self.errors.len())?;
        }
        Ok(())
    }
}

impl std::error::Error for BatchError {}

impl Line {
    /// The item this line describes.
    fn into_item(self, check: Check<'_>) -> Result<NewItem, String> {
        let body = match (self.body, self.text) {
            (Some(_), Some(_)) => return Err("give `body` or `text`, not both".into()),
            (Some(v), None) => Some(Body::Json(v)),
            (None, Some(t)) => Some(Body::Text(t)),
            (None, None) => None,
        };
        let method = match self.method {
            Some(m) => abide_outbox::parse_method(&m).map_err(|e| e.to_string())?,
            None => http::Method::POST,
        };
        let request = Request {
            method,
            path: self.path,
            headers: self.headers,
            body,
        };
        let item = NewItem {
            provider: self.provider,
            request,
            idempotency_key: self.idempotency_key,
        };
        check(&item)?;
        Ok(item)
    }
}

/// How each item of a batch is checked: [`configured`] in `send` and `serve`.
pub(crate) type Check<'a> = &'a dyn Fn(&NewItem) -> Result<(), String>;

/// Check items against `cfg`: the provider is configured, and [`Config::check_item`]
/// passes (the item's shape and bounds, its path confined below the provider's base
/// path, no header the provider reserves).
pub(crate) fn configured(cfg: &Config) -> impl Fn(&NewItem) -> Result<(), String> + '_ {
    move |item| {
        if cfg.provider(&item.provider).is_none() {
            return Err(format!(
                "provider {} is not configured (see --config)",
                echo::clip(&item.provider)
            ));
        }
        cfg.check_item(item).map_err(|e| e.to_string())
    }
}

/// A serde_json error without the "at line 1 column N" that would read as a line number
/// of the input next to our own; the column stays.
fn json_error(e: &serde_json::Error) -> String {
    // serde names our private type ("expected struct Line"); say what the user wrote instead.
    let full = e.to_string().replace("struct Line", "an item object");
    let position = format!(" at line {} column {}", e.line(), e.column());
    // serde quotes what it refuses (an unknown field, a string given for a map) whole.
    let bound = |m: &str| echo::truncate(m, echo::MAX_MESSAGE_BYTES);
    match full.strip_suffix(&position) {
        Some(m) if e.line() > 0 => format!("{} (column {})", bound(m), e.column()),
        _ => bound(&full),
    }
}

/// Collects a batch item by item, for `send` (lines) and `serve` (array items) alike, so
/// both apply the same rules: every problem is listed (up to [`MAX_LISTED_ERRORS`]), and
/// one explicit `idempotency_key` may not name two different messages (the second would
/// otherwise be taken for the first and silently never sent).
///
/// Memory: a kept batch ([`Collector::new`]) holds its items; a checking one
/// ([`Collector::checking`], `send`'s first pass over a stream) holds only 40 bytes per
/// distinct explicit key (128-bit digests of the key and of its first message) and the
/// listed problems.
#[derive(Debug)]
pub(crate) struct Collector {
    /// What a position is called in messages: "line" or "index".
    noun: &'static str,
    /// The accepted items, when kept.
    items: Option<Vec<NewItem>>,
    accepted: usize,
    errors: Vec<Problem>,
    bad: usize,
    /// Each explicit key and the message it names ([`abide_outbox::KeyUses`]).
    keys: KeyUses,
}

impl Collector {
    /// An empty batch whose positions are called `noun` ("line", "index") in messages;
    /// [`Collector::finish`] returns its items.
    pub(crate) fn new(noun: &'static str) -> Self {
        Self {
            noun,
            items: Some(Vec::new()),
            accepted: 0,
            errors: Vec::new(),
            bad: 0,
            keys: KeyUses::default(),
        }
    }

    /// An empty batch that only checks: it keeps no item, and [`Collector::finish`]
    /// returns an empty vector when every item is good.
    pub(crate) fn checking(noun: &'static str) -> Self {
        Self {
            items: None,
            ..Self::new(noun)
        }
    }

    /// Add the item at position `at` (a line number or an index), or its problem.
    pub(crate) fn push(&mut self, at: usize, parsed: Result<NewItem, String>) {
        let checked = parsed.and_then(|item| match self.keys.note(at, &item) {
            Ok(()) => Ok(item),
            Err(first) => Err(format!(
                "idempotency_key {:?} is already used by {} {first} for a different message \
                 (one key names one message)",
                item.idempotency_key.as_deref().unwrap_or_default(),
                self.noun
            )),
        });
        match checked {
            Ok(item) => {
                self.accepted += 1;
                if let Some(items) = &mut self.items {
                    items.push(item);
                }
            }
            Err(message) => {
                self.bad += 1;
                if self.errors.len() < MAX_LISTED_ERRORS {
                    self.errors.push(Problem { at, message });
                }
            }
        }
    }

    /// How many distinct explicit `idempotency_key`s were seen so far.
    pub(crate) fn explicit_keys(&self) -> usize {
        self.keys.len()
    }

    /// The items (none when only checking), or every problem if there was one.
    ///
    /// # Errors
    /// A [`BatchError`]; then nothing may be enqueued.
    pub(crate) fn finish(self) -> Result<Vec<NewItem>, BatchError> {
        if self.bad > 0 {
            return Err(BatchError {
                errors: self.errors,
                bad: self.bad,
                total: self.bad + self.accepted,
            });
        }
        Ok(self.items.unwrap_or_default())
    }
}

/// "not a JSON object" naming what was there instead.
fn not_an_object(v: &serde_json::Value) -> String {
    let kind = match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    };
    format!("not a JSON object (found {kind}); each line is one item object")
}

/// One item object as JSON text (a line of `send`'s input, an element of serve's batch), or
/// an error saying why not. From the text, not a parsed `Value`: a `Value` keeps only the
/// last of two same-named keys, and such an item is refused ([`unique`]).
pub(crate) fn parse_line(raw: &str, check: Check<'_>) -> Result<NewItem, String> {
    if !raw.starts_with('{') {
        // Valid JSON of another kind gets a plain answer, not serde's type talk.
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(raw) {
            return Err(not_an_object(&v));
        }
    }
    serde_json::from_str::<Line>(raw)
        .map_err(|e| json_error(&e))
        .and_then(|l| l.into_item(check))
}

/// Line `number` (1-based) of an input, as read (with or without its `\n`): `None` when
/// blank, else its item or why not. Bytes, so that a line that is not UTF-8 is reported
/// by number like any other bad line; a byte-order mark starting line 1 is skipped.
pub(crate) fn read_line(
    number: usize,
    raw: &[u8],
    check: Check<'_>,
) -> Option<Result<NewItem, String>> {
    let raw = match std::str::from_utf8(raw) {
        Ok(s) => s,
        Err(e) => {
            let at = e.valid_up_to() + 1;
            return Some(Err(format!("not valid UTF-8 (byte {at} of the line)")));
        }
    };
    // A byte-order mark some editors write at the start of a file.
    let raw = if number == 1 {
        raw.trim_start_matches('\u{feff}')
    } else {
        raw
    };
    let raw = raw.trim();
    (!raw.is_empty()).then(|| parse_line(raw, check))
}

/// Parse and validate a whole JSON-lines batch held in memory. `check` judges each item
/// (see [`configured`]). Items without a key get their content-derived key
/// ([`abide_outbox::assign_content_keys`]). `abide send` streams instead
/// (`input_stream`), with the same rules and keys.
///
/// # Errors
/// A [`BatchError`] listing bad lines; then nothing may be enqueued.
#[cfg(test)]
pub(crate) fn parse_batch(
    text: impl AsRef<[u8]>,
    check: Check<'_>,
) -> Result<Vec<NewItem>, BatchError> {
    let mut batch = Collector::new("line");
    for (i, raw) in text.as_ref().split(|b| *b == b'\n').enumerate() {
        if let Some(parsed) = read_line(i + 1, raw, check) {
            batch.push(i + 1, parsed);
        }
    }
    let mut items = batch.finish()?;
    abide_outbox::assign_content_keys(&mut items);
    Ok(items)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn any(item: &NewItem) -> Result<(), String> {
        item.validate().map_err(|e| e.to_string())
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

    /// The keys `abide send` derived before the derivation moved into abide-outbox: a
    /// changed key would send an already-sent message again.
    #[test]
    fn derived_keys_are_unchanged_by_the_move_into_the_outbox() {
        let line = r#"{"provider":"sms","path":"/v1/messages","body":{"to":"+15550101","text":"hi","n":[1,2.5,{"b":1,"a":null}]}}"#;
        let text = format!(
            "{line}\n{line}\n{}\n{}",
            r#"{"provider":"sms","method":"PUT","path":"/v1/x","headers":{"X-Tenant":"t1","accept":"a/b"},"text":"plain é"}"#,
            r#"{"provider":"mail","path":"/send"}"#
        );
        let keys: Vec<_> = parse_batch(&text, &any)
            .unwrap()
            .into_iter()
            .map(|i| i.idempotency_key.unwrap())
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
        let cfg = Config::from_toml_str(
            "[[provider]]\nname = \"sms\"\nbase_url = \"http://127.0.0.1:9/api\"",
        )
        .unwrap();
        let known = configured(&cfg);
        let text = "{\"provider\":\"sms\",\"path\":\"/m\"}\nnot json\n\n{\"provider\":\"email\",\"path\":\"/m\"}\n{\"provider\":\"sms\",\"path\":\"https://evil/x\"}\n{\"provider\":\"sms\",\"path\":\"/m\",\"hedaers\":{}}";
        let e = parse_batch(text, &known).unwrap_err();
        let lines: Vec<usize> = e.errors.iter().map(|e| e.at).collect();
        assert_eq!(lines, vec![2, 4, 5, 6]);
        assert_eq!(e.total, 5);
        let shown = e.to_string();
        assert!(
            shown.contains("line 4: provider \"email\" is not configured"),
            "{shown}"
        );
        assert!(shown.contains("nothing was enqueued"));
    }

    #[test]
    fn a_method_no_provider_call_is_made_with_is_refused_naming_line_and_field() {
        let cfg = Config::from_toml_str(
            "[[provider]]\nname = \"sms\"\nbase_url = \"http://127.0.0.1:9/api\"",
        )
        .unwrap();
        let known = configured(&cfg);
        let text = "{\"provider\":\"sms\",\"path\":\"/m\"}\n{\"provider\":\"sms\",\"path\":\"/m\",\"method\":\"CONNECT\"}\n{\"provider\":\"sms\",\"path\":\"/m\",\"method\":\"TRACE\"}";
        let e = parse_batch(text, &known).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("line 2: invalid request: method CONNECT is not one"),
            "{shown}"
        );
        assert!(
            shown.contains("line 3: invalid request: method TRACE is not one"),
            "{shown}"
        );
    }

    #[test]
    fn error_list_is_bounded() {
        let text = "x\n".repeat(50);
        let e = parse_batch(&text, &any).unwrap_err();
        assert_eq!(e.errors.len(), MAX_LISTED_ERRORS);
        assert_eq!(e.bad, 50);
        assert!(e.to_string().contains("and 30 more"));
    }

    #[test]
    fn secret_headers_and_both_bodies_are_refused() {
        let e = parse_batch(
            "{\"provider\":\"sms\",\"path\":\"/m\",\"headers\":{\"Authorization\":\"Bearer x\"}}\n{\"provider\":\"sms\",\"path\":\"/m\",\"body\":1,\"text\":\"x\"}",
            &any,
        )
        .unwrap_err();
        assert_eq!(e.bad, 2);
    }

    #[test]
    fn one_key_for_two_different_messages_rejects_the_batch() {
        let text = "{\"provider\":\"sms\",\"path\":\"/m\",\"body\":1,\"idempotency_key\":\"k\"}\n\
                    {\"provider\":\"sms\",\"path\":\"/m\",\"body\":1,\"idempotency_key\":\"k\"}\n\
                    {\"provider\":\"sms\",\"path\":\"/m\",\"body\":2,\"idempotency_key\":\"k\"}";
        let e = parse_batch(text, &any).unwrap_err();
        assert_eq!(e.bad, 1, "{e}");
        assert_eq!(e.errors[0].at, 3);
        assert!(
            e.errors[0]
                .message
                .contains("idempotency_key \"k\" is already used by line 1"),
            "{e}"
        );
        // The same message twice under one key is one message: accepted.
        let same = text.rsplit_once('\n').unwrap().0;
        assert_eq!(parse_batch(same, &any).unwrap().len(), 2);
    }

    #[test]
    fn a_line_that_is_not_utf8_is_reported_with_its_number() {
        let mut text = b"{\"provider\":\"sms\",\"path\":\"/m\"}\n".to_vec();
        text.extend_from_slice(b"{\"provider\":\"sms\",\"path\":\"/m\xff\"}\n");
        let e = parse_batch(&text, &any).unwrap_err();
        assert_eq!(e.errors[0].at, 2, "{e}");
        assert_eq!(e.errors[0].message, "not valid UTF-8 (byte 29 of the line)");
    }

    #[test]
    fn json_errors_name_the_column_not_a_second_line_number() {
        let e = parse_batch(
            "\u{feff}{\"provider\":\"sms\",\"path\":\"/m\"}\n{\"provider\":\"sms\"}",
            &any,
        )
        .unwrap_err();
        assert_eq!(e.bad, 1, "a byte-order mark made line 1 bad: {e}");
        let m = &e.errors[0].message;
        assert_eq!(m, "missing field `path` (column 18)");
    }

    #[test]
    fn a_line_that_is_not_an_object_says_so() {
        let e = parse_batch("[1, 2]\n42\n\"x\"", &any).unwrap_err();
        assert_eq!(e.bad, 3, "{e}");
        assert!(
            e.errors[0]
                .message
                .starts_with("not a JSON object (found an array)"),
            "{e}"
        );
        assert!(e.errors[1].message.contains("found a number"), "{e}");
        let v = parse_line(r#"[{"provider": "sms"}]"#, &any).unwrap_err();
        assert!(v.starts_with("not a JSON object"), "{v}");
        assert!(!v.contains("Line"), "{v}");
        let v = parse_line(r#"{"provider": "sms", "path": 3}"#, &any).unwrap_err();
        assert!(!v.contains("struct Line"), "{v}");
    }
}
