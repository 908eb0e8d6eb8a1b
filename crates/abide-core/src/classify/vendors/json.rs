//! JSON error shapes of widely used APIs, compared field by field.

use serde_json::Value;

use super::finding::{BodyDelay, Finding};

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Slack Web API: `{"ok": false, "error": "ratelimited"}` (also `rate_limited`, the
/// per-channel message limit), often with status `200`.
///
/// Sources: <https://api.slack.com/apis/rate-limits> and
/// <https://api.slack.com/methods/chat.postMessage#errors>.
pub fn slack(json: &Value) -> Option<Finding> {
    if json.get("ok").and_then(Value::as_bool) != Some(false) {
        return None;
    }
    match str_at(json, "error")? {
        "ratelimited" | "rate_limited" => Some(Finding::throttle("slack_ratelimited")),
        _ => None,
    }
}

/// Salesforce REST API: an error array with `errorCode` `REQUEST_LIMIT_EXCEEDED` (status
/// `403`), sent for both the concurrent-request and the rolling 24-hour request limit;
/// both recover without a person, so both are a throttle (our backoff, no delay given).
///
/// Source: <https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/errorcodes.htm>.
pub fn salesforce(json: &Value) -> Option<Finding> {
    json.as_array()?
        .iter()
        .any(|e| str_at(e, "errorCode") == Some("REQUEST_LIMIT_EXCEEDED"))
        .then(|| Finding::throttle("salesforce_request_limit_exceeded"))
}

/// Google APIs (JSON error format with `error.errors[]`): domain `usageLimits` with reason
/// `rateLimitExceeded` or `userRateLimitExceeded` is a throttle (status `403` or `429`);
/// reason `dailyLimitExceeded` or `quotaExceeded` (any domain: YouTube says
/// `youtube.quota`) is out of quota until the daily reset. Other reasons
/// (`storageQuotaExceeded`, `forbidden`) are left to the status.
///
/// Sources: <https://developers.google.com/drive/api/guides/handle-errors> (sections
/// "403: User rate limit exceeded", "403: Daily limit exceeded") and
/// <https://developers.google.com/youtube/v3/docs/errors>.
pub fn google(json: &Value) -> Option<Finding> {
    let error = json.get("error")?;
    let errors = error.get("errors")?.as_array()?;
    for e in errors {
        let reason = str_at(e, "reason");
        let domain = str_at(e, "domain");
        match (domain, reason) {
            (Some("usageLimits"), Some("rateLimitExceeded")) => {
                return Some(Finding::throttle("google_rate_limit_exceeded"));
            }
            (Some("usageLimits"), Some("userRateLimitExceeded")) => {
                return Some(Finding::throttle("google_user_rate_limit_exceeded"));
            }
            (Some(_), Some("dailyLimitExceeded")) => {
                return Some(Finding::out_of_quota("google_daily_limit_exceeded"));
            }
            (Some(_), Some("quotaExceeded")) => {
                return Some(Finding::out_of_quota("google_quota_exceeded"));
            }
            _ => {}
        }
    }
    None
}

/// Google's `google.rpc.RetryInfo` in `error.details[]`: `retryDelay` as a protobuf
/// `Duration` in JSON (`"30s"`).
///
/// Source: <https://cloud.google.com/apis/design/errors#error_details> and
/// <https://github.com/googleapis/googleapis/blob/master/google/rpc/error_details.proto>.
pub fn google_retry_info(json: &Value) -> Option<BodyDelay> {
    let details = json.pointer("/error/details")?.as_array()?;
    details
        .iter()
        .filter(|d| str_at(d, "@type") == Some("type.googleapis.com/google.rpc.RetryInfo"))
        .find_map(|d| {
            BodyDelay::from_json("error.details.RetryInfo.retryDelay", d.get("retryDelay")?)
        })
}

/// Meta's throttling error codes: 4 (application), 17 (user), 32 (page), 613 (custom
/// rate limit) and the Business Use Case codes 80000–80014.
///
/// Source: <https://developers.facebook.com/docs/graph-api/overview/rate-limiting/> and
/// <https://developers.facebook.com/docs/graph-api/guides/error-handling/>.
pub const META_THROTTLE_CODES: [u64; 4] = [4, 17, 32, 613];

/// Meta Graph API: `error.code` one of [`META_THROTTLE_CODES`] or 80000–80014, in an error
/// that is Meta's by its shape (an `error.type` string such as `OAuthException`, or an
/// `error.fbtrace_id`); status `400` or `403`.
pub fn meta(json: &Value) -> Option<Finding> {
    let error = json.get("error")?;
    let code = error.get("code")?.as_u64()?;
    let metas = str_at(error, "type").is_some() || str_at(error, "fbtrace_id").is_some();
    let throttling = META_THROTTLE_CODES.contains(&code) || (80_000..=80_014).contains(&code);
    (metas && throttling).then(|| Finding::throttle(format!("meta_code_{code}")))
}

/// OpenAI API: `error.code` or `error.type` `insufficient_quota` (status `429`): the
/// account is out of credit, not rate limited; retrying cannot help.
///
/// Source: <https://platform.openai.com/docs/guides/error-codes#api-errors>.
pub fn openai(json: &Value) -> Option<Finding> {
    let error = json.get("error")?;
    let said = |k| str_at(error, k) == Some("insufficient_quota");
    (said("code") || said("type")).then(|| Finding::out_of_quota("openai_insufficient_quota"))
}
