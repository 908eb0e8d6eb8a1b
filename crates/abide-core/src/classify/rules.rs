//! Rules a user writes: "this field of the body (or this header) having this value means
//! that verdict", for an API whose throttles the built-in [`vendors`](super::vendors) table
//! does not know.
//!
//! ```toml
//! [[provider.classify.body]]
//! name = "throttled"                      # optional; in the reason code and in errors
//! json = "/errors/0/extensions/code"      # RFC 6901 JSON pointer
//! equals = "THROTTLED"                    # a string, number or boolean, compared exactly
//! verdict = "throttle"
//! delay_json = "/retry_after"             # optional: seconds, or a Go-style duration
//! status = [200]                          # optional: only on these statuses
//!
//! [[provider.classify.header]]
//! header = "x-error-kind"
//! equals = "rate-limited"                 # the whole value, trimmed, compared exactly
//! verdict = "throttle"
//! delay_header = "x-wait"                 # optional: seconds, or a Go-style duration
//! ```
//!
//! Rules are tried in order, body rules first, before every other table (a status
//! override included); the first that matches decides, with reason code
//! `http_<status>_rule_<name>` (`rule_body_<n>` / `rule_header_<n>` without a name,
//! counting from 1). A delay they name is floored and capped like a `Retry-After`; one
//! that cannot be read is an unparseable delay (a long jittered wait, never zero).
//!
//! Pointers follow RFC 6901 (<https://www.rfc-editor.org/rfc/rfc6901>): `""` is the whole
//! document, `/a/0/b` walks object members and array indices, `~1` is `/` and `~0` is `~`
//! in a member name. [`ClassifyOverrides::validate`](super::ClassifyOverrides::validate)
//! checks every rule, naming it.

use std::borrow::Cow;

use http::{HeaderMap, HeaderName};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::vendors::BodyDelay;
use super::verdict::VerdictClass;
use crate::session::SettingError;

/// Most body and header rules of one provider, together.
pub const MAX_RULES: usize = 64;

/// Longest pointer, header name, label or compared string, in bytes.
pub const MAX_RULE_TEXT: usize = 256;

/// A rule on a JSON body field (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodyRule {
    /// A label for the reason code and errors: 1 to 64 of `a-z`, `0-9`, `_`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// RFC 6901 JSON pointer to the field.
    pub json: String,
    /// The field's value that makes the rule match: a string, number or boolean.
    pub equals: Value,
    /// The verdict when it matches.
    pub verdict: VerdictClass,
    /// Pointer to the delay: a number of seconds, or a string in delay-seconds or Go-style
    /// (`6m0s`, `1.5s`); only for a verdict that waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_json: Option<String>,
    /// Only on these statuses (any when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<u16>,
}

/// A rule on a response header (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderRule {
    /// A label for the reason code and errors: 1 to 64 of `a-z`, `0-9`, `_`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The header's name (any case).
    pub header: String,
    /// Its whole value, trimmed, compared exactly.
    pub equals: String,
    /// The verdict when it matches.
    pub verdict: VerdictClass,
    /// A header holding the delay, in delay-seconds or Go-style (`6m0s`, `1.5s`); only for
    /// a verdict that waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_header: Option<String>,
    /// Only on these statuses (any when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<u16>,
}

/// What a matching rule decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RuleMatch {
    pub(crate) class: VerdictClass,
    /// `rule_<name>`, `rule_body_<n>` or `rule_header_<n>`.
    pub(crate) tail: String,
    pub(crate) delay: Option<BodyDelay>,
}

fn tail(name: Option<&str>, kind: &str, i: usize) -> String {
    match name {
        Some(n) => format!("rule_{n}"),
        None => format!("rule_{kind}_{}", i + 1),
    }
}

/// The first of `body` then `header` rules that matches, if any.
pub(crate) fn first_match(
    body: &[BodyRule],
    header: &[HeaderRule],
    status: u16,
    headers: &HeaderMap,
    json: Option<&Value>,
) -> Option<RuleMatch> {
    let on = |s: &[u16]| s.is_empty() || s.contains(&status);
    if let Some(j) = json {
        for (i, r) in body.iter().enumerate() {
            if on(&r.status) && j.pointer(&r.json) == Some(&r.equals) {
                let delay = r.delay_json.as_deref().and_then(|p| {
                    j.pointer(p)
                        .and_then(|v| BodyDelay::from_json(p.trim_start_matches('/'), v))
                });
                return Some(RuleMatch {
                    class: r.verdict,
                    tail: tail(r.name.as_deref(), "body", i),
                    delay,
                });
            }
        }
    }
    let value = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
    };
    for (i, r) in header.iter().enumerate() {
        if on(&r.status) && value(&r.header).as_deref() == Some(r.equals.as_str()) {
            let delay = r.delay_header.as_deref().and_then(|h| {
                let v = value(h)?;
                BodyDelay::from_json(h, &Value::String(v))
            });
            return Some(RuleMatch {
                class: r.verdict,
                tail: tail(r.name.as_deref(), "header", i),
                delay,
            });
        }
    }
    None
}

fn bad(setting: String, problem: impl Into<Cow<'static, str>>) -> SettingError {
    SettingError::Classify {
        setting: Cow::Owned(setting),
        problem: problem.into(),
    }
}

/// `classify.body.<name>` or `classify.body[<n>]` (from 1).
fn path(kind: &str, name: Option<&str>, i: usize) -> String {
    match name {
        Some(n) if valid_label(n) => format!("classify.{kind}.{n}"),
        _ => format!("classify.{kind}[{}]", i + 1),
    }
}

fn valid_label(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn check_pointer(p: &str) -> Result<(), Cow<'static, str>> {
    if p.len() > MAX_RULE_TEXT {
        return Err(format!("longer than {MAX_RULE_TEXT} bytes").into());
    }
    if !(p.is_empty() || p.starts_with('/')) {
        return Err(format!(
            "{} is no JSON pointer: it must be empty or start with `/` (RFC 6901)",
            crate::echo::clip(p)
        )
        .into());
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err("`~` must be followed by 0 or 1 (RFC 6901 §3)".into());
        }
    }
    Ok(())
}

fn check_common(
    at: &str,
    name: Option<&str>,
    verdict: VerdictClass,
    has_delay: bool,
    delay_key: &str,
    status: &[u16],
) -> Result<(), SettingError> {
    if name.is_some_and(|n| !valid_label(n)) {
        return Err(bad(
            format!("{at}.name"),
            "1 to 64 of a-z, 0-9 and _ (it becomes part of a reason code)",
        ));
    }
    if has_delay && !verdict.waits() {
        return Err(bad(
            format!("{at}.{delay_key}"),
            format!(
                "a {verdict} verdict waits for nothing: a delay applies only to one that retries"
            ),
        ));
    }
    if let Some(s) = status.iter().find(|s| !(100..=599).contains(*s)) {
        return Err(bad(
            format!("{at}.status"),
            format!("{s} is not an HTTP status (100-599)"),
        ));
    }
    Ok(())
}

/// Check `body` and `header` rules, naming the first bad one (see
/// [`ClassifyOverrides::validate`](super::ClassifyOverrides::validate)).
pub(crate) fn validate(body: &[BodyRule], header: &[HeaderRule]) -> Result<(), SettingError> {
    if body.len() + header.len() > MAX_RULES {
        return Err(bad(
            "classify.body".to_owned(),
            format!(
                "{} rules: at most {MAX_RULES} body and header rules together",
                body.len() + header.len()
            ),
        ));
    }
    for (i, r) in body.iter().enumerate() {
        let at = path("body", r.name.as_deref(), i);
        check_common(
            &at,
            r.name.as_deref(),
            r.verdict,
            r.delay_json.is_some(),
            "delay_json",
            &r.status,
        )?;
        check_pointer(&r.json).map_err(|p| bad(format!("{at}.json"), p))?;
        if let Some(p) = &r.delay_json {
            check_pointer(p).map_err(|e| bad(format!("{at}.delay_json"), e))?;
        }
        match &r.equals {
            Value::String(s) if s.len() > MAX_RULE_TEXT => {
                return Err(bad(
                    format!("{at}.equals"),
                    format!("longer than {MAX_RULE_TEXT} bytes"),
                ));
            }
            Value::String(_) | Value::Number(_) | Value::Bool(_) => {}
            _ => {
                return Err(bad(
                    format!("{at}.equals"),
                    "a string, number or boolean (the field's value, compared exactly)",
                ));
            }
        }
    }
    for (i, r) in header.iter().enumerate() {
        let at = path("header", r.name.as_deref(), i);
        check_common(
            &at,
            r.name.as_deref(),
            r.verdict,
            r.delay_header.is_some(),
            "delay_header",
            &r.status,
        )?;
        for (key, h) in [
            ("header", Some(&r.header)),
            ("delay_header", r.delay_header.as_ref()),
        ] {
            let Some(h) = h else { continue };
            if h.len() > MAX_RULE_TEXT || HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(bad(
                    format!("{at}.{key}"),
                    format!("{} is not a header name", crate::echo::clip(h)),
                ));
            }
        }
        if r.equals.trim().is_empty() || r.equals.len() > MAX_RULE_TEXT {
            return Err(bad(
                format!("{at}.equals"),
                format!("the header's value: 1 to {MAX_RULE_TEXT} bytes"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
