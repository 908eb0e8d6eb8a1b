//! Throttles in the shapes real APIs send them, most not a 429: so the outbox, the
//! in-process clients and the proxy can be tested end to end against each (abide-core's
//! `classify::vendors` reads them). Each answer carries no `Retry-After` and no rate-limit
//! header, as the vendor's does; where the vendor's shape can carry the wait (Shopify's
//! query cost, Discord's `retry_after`), it says the real one.
//!
//! | style | answer | source |
//! |---|---|---|
//! | `graphql-200` | 200, `errors[].extensions.code = "THROTTLED"`, `extensions.cost` whose (requested − available) ÷ restoreRate is the wait | <https://shopify.dev/docs/api/usage/limits#graphql-admin-api-rate-limits> |
//! | `salesforce-403` | 403, `[{"errorCode": "REQUEST_LIMIT_EXCEEDED"}]` | <https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/errorcodes.htm> |
//! | `google-403` | 403, `error.errors[]` `usageLimits` / `userRateLimitExceeded` | <https://developers.google.com/drive/api/guides/handle-errors> |
//! | `slack-200` | 200, `{"ok": false, "error": "ratelimited"}` | <https://api.slack.com/apis/rate-limits> |
//! | `meta-400` | 400, `error.code = 4`, `OAuthException` | <https://developers.facebook.com/docs/graph-api/overview/rate-limiting/> |
//! | `aws-400` | 400, `x-amzn-ErrorType` and `__type` `ThrottlingException` | <https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html> |
//! | `s3-503` | 503, XML `<Error><Code>SlowDown</Code>` | <https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html> |
//! | `azure-503` | 503, `x-ms-error-code` and XML `ServerBusy` | <https://learn.microsoft.com/en-us/rest/api/storageservices/common-rest-api-error-codes> |
//! | `quota-429` | 429, `error.code = "insufficient_quota"`: out of credit, not a rate limit | <https://platform.openai.com/docs/guides/error-codes#api-errors> |
//! | `discord-429` | 429 without `Retry-After`, the wait as the body's `retry_after` seconds | <https://discord.com/developers/docs/topics/rate-limits> |

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::config::ThrottleStyle;

/// Points per second restored in the GraphQL cost model we answer with.
const RESTORE_RATE: f64 = 50.0;

/// The answer to a throttled request in a vendor's shape, `wait` being the real time until
/// it would be admitted; `None` for the styles that are not a vendor's.
pub(crate) fn answer(style: ThrottleStyle, wait: Duration) -> Option<(StatusCode, Response)> {
    let json = |status: StatusCode, body: serde_json::Value| {
        (status, (status, axum::Json(body)).into_response())
    };
    let xml = |code: &str, message: &str| {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
             <Message>{message}</Message><RequestId>fake</RequestId></Error>"
        );
        let mut res = (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        (StatusCode::SERVICE_UNAVAILABLE, res)
    };
    Some(match style {
        ThrottleStyle::Http429
        | ThrottleStyle::Http403
        | ThrottleStyle::Smpp200
        | ThrottleStyle::Smpp429 => return None,
        ThrottleStyle::Graphql200 => {
            // Nothing available: the query fits after requested ÷ restoreRate, the wait
            // rounded up to a whole point.
            let requested = (wait.as_secs_f64() * RESTORE_RATE).ceil().max(1.0);
            json(
                StatusCode::OK,
                serde_json::json!({
                    "errors": [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}],
                    "extensions": {"cost": {
                        "requestedQueryCost": requested,
                        "actualQueryCost": null,
                        "throttleStatus": {
                            "maximumAvailable": 1000.0,
                            "currentlyAvailable": 0,
                            "restoreRate": RESTORE_RATE,
                        }
                    }}
                }),
            )
        }
        ThrottleStyle::Salesforce403 => json(
            StatusCode::FORBIDDEN,
            serde_json::json!([{
                "message": "ConcurrentRequests (Concurrent API Requests) Limit exceeded.",
                "errorCode": "REQUEST_LIMIT_EXCEEDED"
            }]),
        ),
        ThrottleStyle::Google403 => json(
            StatusCode::FORBIDDEN,
            serde_json::json!({"error": {
                "code": 403,
                "message": "User Rate Limit Exceeded",
                "errors": [{
                    "domain": "usageLimits",
                    "reason": "userRateLimitExceeded",
                    "message": "User Rate Limit Exceeded"
                }]
            }}),
        ),
        ThrottleStyle::Slack200 => json(
            StatusCode::OK,
            serde_json::json!({"ok": false, "error": "ratelimited"}),
        ),
        ThrottleStyle::Meta400 => json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {
                "message": "(#4) Application request limit reached",
                "type": "OAuthException",
                "is_transient": true,
                "code": 4,
                "fbtrace_id": "fake"
            }}),
        ),
        ThrottleStyle::Aws400 => {
            let (status, mut res) = json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"__type": "ThrottlingException", "message": "Rate exceeded"}),
            );
            res.headers_mut().insert(
                "x-amzn-errortype",
                HeaderValue::from_static("ThrottlingException:http://internal.amazon.com/"),
            );
            (status, res)
        }
        ThrottleStyle::S3503 => xml("SlowDown", "Please reduce your request rate."),
        ThrottleStyle::Azure503 => {
            let (status, mut res) = xml(
                "ServerBusy",
                "Operations per second is over the account limit.",
            );
            res.headers_mut()
                .insert("x-ms-error-code", HeaderValue::from_static("ServerBusy"));
            (status, res)
        }
        ThrottleStyle::Quota429 => json(
            StatusCode::TOO_MANY_REQUESTS,
            serde_json::json!({"error": {
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota",
                "param": null,
                "code": "insufficient_quota"
            }}),
        ),
        ThrottleStyle::Discord429 => json(
            StatusCode::TOO_MANY_REQUESTS,
            serde_json::json!({
                "message": "You are being rate limited.",
                "retry_after": (wait.as_secs_f64() * 1000.0).ceil() / 1000.0,
                "global": false
            }),
        ),
    })
}
