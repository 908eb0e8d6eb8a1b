//! Throttles that are not a 429: vendor error shapes recognised by structure.
//!
//! Many APIs say "slow down" with a status that means something else: GraphQL APIs answer
//! `200` with an error list, chat APIs `200` with `"ok": false`, social-graph and cloud
//! APIs `400` with an error code, quota-style limits `403`, object stores `503` with an
//! XML code. And the opposite: a `429` that says the account is out of quota or credit
//! ([`VerdictClass::OutOfQuota`](crate::classify::VerdictClass::OutOfQuota): retrying on a timer cannot help).
//!
//! Every rule here reads **parsed structure** — a JSON field at a known place, an XML
//! `<Error><Code>`, a vendor header — and compares it **exactly** with a documented
//! value, so a body that merely contains "rate" or "quota" in free text stays what its
//! status says (a storage quota is still terminal). Only the first
//! [`MAX_CLASSIFY_BODY`](super::MAX_CLASSIFY_BODY) bytes are read; a body cut there does
//! not parse and is left to the status.
//!
//! | shape | status | verdict | module, source |
//! |---|---|---|---|
//! | GraphQL `errors[].extensions.code == "THROTTLED"` (Shopify), delay from the query cost | any | throttle | [`graphql`] |
//! | GraphQL `errors[].type == "RATE_LIMITED"` (GitHub) | any | throttle | [`graphql`] |
//! | `{"ok": false, "error": "ratelimited"}` (Slack) | any | throttle | [`json`] |
//! | `[{"errorCode": "REQUEST_LIMIT_EXCEEDED"}]` (Salesforce) | 4xx | throttle | [`json`] |
//! | `error.errors[]` `usageLimits` / `rateLimitExceeded`, `userRateLimitExceeded` (Google) | 4xx | throttle | [`json`] |
//! | `error.errors[].reason` `dailyLimitExceeded`, `quotaExceeded` (Google) | 4xx | out of quota | [`json`] |
//! | `error.code` 4, 17, 32, 613, 80000–80014 with `error.type` or `fbtrace_id` (Meta Graph) | 4xx | throttle | [`json`] |
//! | `error.code` or `error.type == "insufficient_quota"` (OpenAI) | 4xx | out of quota | [`json`] |
//! | AWS throttling error codes in `x-amzn-ErrorType`, JSON `__type` or XML `<Code>` | 4xx, 5xx | throttle | [`aws`] |
//! | Azure Storage `ServerBusy` in `x-ms-error-code` or XML `<Code>` | 4xx, 5xx | throttle | [`aws`] |
//!
//! # Delay given in the body
//! When no header names a delay, the body may ([`body_delay`]): a top-level `retry_after`
//! (Discord: seconds as a number; a string is read as delay-seconds or a Go-style duration,
//! see [`super::duration`]), Telegram's `parameters.retry_after`, Google's
//! `google.rpc.RetryInfo.retryDelay` (`"30s"`), or Shopify's cost model. Each passes the
//! classifier's [`RetryAfterPolicy`](crate::RetryAfterPolicy) floor and cap; a value that
//! is present but unreadable is an unparseable delay (a long jittered wait, logged raw).

use http::HeaderMap;
use serde_json::Value;

pub mod aws;
mod finding;
pub mod graphql;
pub mod json;

pub use finding::{BodyDelay, Finding};

/// The body parsed as JSON, when it is a JSON object or array (leading whitespace and a
/// UTF-8 byte order mark allowed) and complete within the bytes given.
pub fn parse_json(body: &[u8]) -> Option<Value> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let start = body.iter().position(|b| !b.is_ascii_whitespace())?;
    if !matches!(body[start], b'{' | b'[') {
        return None;
    }
    serde_json::from_slice(&body[start..]).ok()
}

/// Whether `body` holds the text `"<name>"` (a JSON member of that name, or a string
/// equal to it): a cheap test before parsing, never a verdict.
pub fn mentions_member(body: &[u8], name: &[u8]) -> bool {
    let n = name.len() + 2;
    body.len() >= n
        && body
            .windows(n)
            .any(|w| w[0] == b'"' && w[n - 1] == b'"' && &w[1..n - 1] == name)
}

/// What the built-in vendor rules make of one HTTP answer: `status`, its `headers`, the
/// start of its `body` and that body parsed (`json`, from [`parse_json`]). The first rule
/// that matches wins; `None` leaves the answer to its status.
pub fn find(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    json: Option<&Value>,
) -> Option<Finding> {
    let error_status = (400..=599).contains(&status);
    let client_error = (400..=499).contains(&status);
    if let Some(j) = json {
        if let Some(f) = graphql::find(j) {
            return Some(f);
        }
        if let Some(f) = json::slack(j) {
            return Some(f);
        }
        if client_error {
            let found = json::salesforce(j)
                .or_else(|| json::google(j))
                .or_else(|| json::meta(j))
                .or_else(|| json::openai(j));
            if found.is_some() {
                return found;
            }
        }
    }
    if error_status {
        return aws::find(headers, body, json);
    }
    None
}

/// A delay the body gives without a header (see the [module docs](self)), before any
/// clamp; `None` when the body names none.
pub fn body_delay(json: &Value) -> Option<BodyDelay> {
    if let Some(v) = json.get("retry_after") {
        return BodyDelay::from_json("retry_after", v);
    }
    if let Some(v) = json.pointer("/parameters/retry_after") {
        return BodyDelay::from_json("parameters.retry_after", v);
    }
    json::google_retry_info(json)
}

#[cfg(test)]
mod tests;
