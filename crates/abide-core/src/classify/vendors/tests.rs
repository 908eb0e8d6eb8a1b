//! Vectors from the vendors' documented examples (each cites its page), and negatives:
//! answers that mention "rate" or "quota" in free text and must stay what the status says.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::classify::{Classifier, Observation, Verdict, VerdictClass};
use crate::retry_after::{DelayReason, RetryAfterPolicy};
use VerdictClass::{OutOfQuota, Retry, Success, Terminal, Throttle};

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

fn classify(status: u16, pairs: &[(&'static str, &'static str)], body: &str) -> Verdict {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_static(v));
    }
    let obs = Observation::Http {
        status: StatusCode::from_u16(status).unwrap(),
        headers: &h,
        body: body.as_bytes(),
    };
    Classifier::default().classify(&obs, now(), &mut ChaCha8Rng::seed_from_u64(3))
}

/// (source, status, headers, body, class, reason).
type Vector = (
    &'static str,
    u16,
    &'static [(&'static str, &'static str)],
    &'static str,
    VerdictClass,
    &'static str,
);

const VECTORS: &[Vector] = &[
    (
        "https://shopify.dev/docs/api/usage/limits#graphql-admin-api-rate-limits",
        200,
        &[],
        super::graphql::SHOPIFY_EXAMPLE,
        Throttle,
        "http_200_graphql_throttled",
    ),
    (
        "https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api",
        200,
        &[],
        r#"{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for user ID 1."}]}"#,
        Throttle,
        "http_200_graphql_rate_limited",
    ),
    (
        "https://api.slack.com/apis/rate-limits",
        200,
        &[],
        r#"{"ok":false,"error":"ratelimited"}"#,
        Throttle,
        "http_200_slack_ratelimited",
    ),
    (
        "https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/errorcodes.htm",
        403,
        &[],
        r#"[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#,
        Throttle,
        "http_403_salesforce_request_limit_exceeded",
    ),
    (
        "https://developers.google.com/drive/api/guides/handle-errors",
        403,
        &[],
        r#"{"error":{"code":403,"message":"Rate Limit Exceeded","errors":[{"domain":"usageLimits","reason":"rateLimitExceeded","message":"Rate Limit Exceeded"}]}}"#,
        Throttle,
        "http_403_google_rate_limit_exceeded",
    ),
    (
        "https://developers.google.com/drive/api/guides/handle-errors",
        403,
        &[],
        r#"{"error":{"errors":[{"domain":"usageLimits","reason":"userRateLimitExceeded","message":"User Rate Limit Exceeded"}],"code":403,"message":"User Rate Limit Exceeded"}}"#,
        Throttle,
        "http_403_google_user_rate_limit_exceeded",
    ),
    (
        "https://developers.google.com/drive/api/guides/handle-errors",
        403,
        &[],
        r#"{"error":{"errors":[{"domain":"usageLimits","reason":"dailyLimitExceeded","message":"Daily Limit Exceeded"}],"code":403,"message":"Daily Limit Exceeded"}}"#,
        OutOfQuota,
        "http_403_google_daily_limit_exceeded",
    ),
    (
        "https://developers.google.com/youtube/v3/docs/errors",
        403,
        &[],
        r#"{"error":{"code":403,"message":"The request cannot be completed because you have exceeded your quota.","errors":[{"message":"...","domain":"youtube.quota","reason":"quotaExceeded"}]}}"#,
        OutOfQuota,
        "http_403_google_quota_exceeded",
    ),
    (
        "https://developers.facebook.com/docs/graph-api/overview/rate-limiting/",
        400,
        &[],
        r#"{"error":{"message":"(#4) Application request limit reached","type":"OAuthException","is_transient":true,"code":4,"fbtrace_id":"A1b2"}}"#,
        Throttle,
        "http_400_meta_code_4",
    ),
    (
        "https://developers.facebook.com/docs/graph-api/overview/rate-limiting/",
        400,
        &[],
        r#"{"error":{"message":"(#17) User request limit reached","type":"OAuthException","code":17,"error_subcode":2446079,"fbtrace_id":"x"}}"#,
        Throttle,
        "http_400_meta_code_17",
    ),
    (
        "https://developers.facebook.com/docs/graph-api/overview/rate-limiting/",
        400,
        &[],
        r#"{"error":{"message":"(#32) Page request limit reached","type":"OAuthException","code":32,"fbtrace_id":"x"}}"#,
        Throttle,
        "http_400_meta_code_32",
    ),
    (
        "https://developers.facebook.com/docs/graph-api/overview/rate-limiting/",
        400,
        &[],
        r#"{"error":{"message":"(#613) Calls to this api have exceeded the rate limit.","type":"OAuthException","code":613,"fbtrace_id":"x"}}"#,
        Throttle,
        "http_400_meta_code_613",
    ),
    (
        "https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html#operation-error-serialization",
        400,
        &[],
        r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate exceeded"}"#,
        Throttle,
        "http_400_aws_throttling_exception",
    ),
    (
        "https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html#operation-error-serialization",
        400,
        &[(
            "x-amzn-errortype",
            "TooManyRequestsException:http://internal.amazon.com/coral/com.amazon.coral.availability/",
        )],
        r#"{"message":"Rate exceeded"}"#,
        Throttle,
        "http_400_aws_too_many_requests_exception",
    ),
    (
        "https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html",
        503,
        &[],
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>",
        Throttle,
        "http_503_aws_slow_down",
    ),
    (
        "https://learn.microsoft.com/en-us/rest/api/storageservices/common-rest-api-error-codes",
        503,
        &[("x-ms-error-code", "ServerBusy")],
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>ServerBusy</Code><Message>Operations per second is over the account limit.</Message></Error>",
        Throttle,
        "http_503_azure_server_busy",
    ),
    (
        "https://platform.openai.com/docs/guides/error-codes#api-errors",
        429,
        &[],
        r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        OutOfQuota,
        "http_429_openai_insufficient_quota",
    ),
];

#[test]
fn documented_vendor_examples() {
    for (source, status, headers, body, class, reason) in VECTORS {
        let v = classify(*status, headers, body);
        assert_eq!((v.class, v.reason.as_str()), (*class, *reason), "{source}");
        if *class == OutOfQuota {
            assert_eq!(
                v.retry_after, None,
                "{source}: out of quota waits on no timer"
            );
        }
    }
}

#[test]
fn shopify_example_waits_about_1_2_s() {
    let v = classify(200, &[], super::graphql::SHOPIFY_EXAMPLE);
    let d = v.retry_after.unwrap();
    assert_eq!(d.reason, DelayReason::Honoured);
    assert!((d.delay.as_secs_f64() - 1.22).abs() < 0.001, "{d:?}");
}

/// Look like the vectors, mean something else: free text that says "rate" or "quota",
/// other error codes, other places. Each stays what its status says.
const NEGATIVES: &[(u16, &str, VerdictClass)] = &[
    // Google Drive: the storage quota is full; no wait helps, a person must free space,
    // but the account is not rate limited either: terminal, as the 403 says.
    (
        403,
        r#"{"error":{"errors":[{"domain":"global","reason":"storageQuotaExceeded","message":"The user's Drive storage quota has been exceeded."}],"code":403,"message":"The user's Drive storage quota has been exceeded."}}"#,
        Terminal,
    ),
    (
        400,
        r#"{"error":{"code":400,"message":"Invalid value for field 'rate': the exchange rate must be positive"}}"#,
        Terminal,
    ),
    (
        400,
        r#"{"message":"rate limit THROTTLED ratelimited SlowDown quotaExceeded"}"#,
        Terminal,
    ),
    (
        403,
        r#"[{"message":"Insufficient access rights on rate object","errorCode":"INSUFFICIENT_ACCESS_OR_READONLY"}]"#,
        Terminal,
    ),
    // Meta's code 100 (invalid parameter) and a code 4 without Meta's shape.
    (
        400,
        r#"{"error":{"message":"(#100) Invalid parameter","type":"OAuthException","code":100,"fbtrace_id":"x"}}"#,
        Terminal,
    ),
    (400, r#"{"error":{"code":4}}"#, Terminal),
    // Slack's other errors, and "ok": true with an error-looking field.
    (200, r#"{"ok":false,"error":"channel_not_found"}"#, Success),
    (200, r#"{"ok":true,"error":"ratelimited"}"#, Success),
    (200, r#"{"ok":"false","error":"ratelimited"}"#, Success),
    // OpenAI's ordinary rate limit is a throttle as the 429 says.
    (
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        Throttle,
    ),
    // An AWS code that is no throttle, and a 503 without a code.
    (
        400,
        r#"{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"rate"}"#,
        Terminal,
    ),
    (503, "<Error><Code>InternalError</Code></Error>", Retry),
    (503, "Service busy, slow down", Retry),
    // A throttle shape cut by the 4 KiB prefix does not parse: left to the status.
    (
        200,
        r#"{"errors":[{"extensions":{"code":"THROTTLED""#,
        Success,
    ),
    // A GraphQL success that reports its cost.
    (
        200,
        r#"{"data":{"shop":{"name":"x"}},"extensions":{"cost":{"requestedQueryCost":1,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":999,"restoreRate":50.0}}}}"#,
        Success,
    ),
];

#[test]
fn free_text_and_other_codes_stay_what_the_status_says() {
    for (status, body, class) in NEGATIVES {
        let v = classify(*status, &[], body);
        assert_eq!(v.class, *class, "{status} {body}");
        assert_eq!(v.reason, format!("http_{status}"), "{body}");
    }
}

#[test]
fn rules_by_status_class() {
    // Salesforce's and Google's shapes are 4xx errors: on a 200 they are no throttle.
    let sf = r#"[{"message":"x","errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#;
    assert_eq!(classify(200, &[], sf).class, Success);
    // An AWS code on a success is the success it says.
    let aws = r#"{"__type":"ThrottlingException"}"#;
    assert_eq!(classify(200, &[], aws).class, Success);
    // A status override still decides outright.
    let c = Classifier::default().with_http(403, Terminal);
    let h = HeaderMap::new();
    let body = r#"[{"errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#;
    let obs = Observation::Http {
        status: StatusCode::FORBIDDEN,
        headers: &h,
        body: body.as_bytes(),
    };
    let v = c.classify(&obs, now(), &mut ChaCha8Rng::seed_from_u64(1));
    assert_eq!(
        (v.class, v.reason.as_str()),
        (Terminal, "http_403_override")
    );
}

#[test]
fn delays_given_only_in_the_body() {
    let secs = |v: &Verdict| v.retry_after.as_ref().map(|d| (d.delay, d.reason));
    let s = Duration::from_secs;
    // Discord: seconds with a fraction, no header.
    let v = classify(
        429,
        &[],
        r#"{"message":"You are being rate limited.","retry_after":64.57,"global":false}"#,
    );
    assert_eq!(
        secs(&v),
        Some((Duration::from_millis(64_570), DelayReason::Honoured))
    );
    // Telegram Bot API: `parameters.retry_after`.
    let v = classify(
        429,
        &[],
        r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 35","parameters":{"retry_after":35}}"#,
    );
    assert_eq!(secs(&v), Some((s(35), DelayReason::Honoured)));
    // Google RetryInfo, a protobuf Duration.
    let v = classify(
        429,
        &[],
        r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}"#,
    );
    assert_eq!(secs(&v), Some((s(30), DelayReason::Honoured)));
    // Go-style durations.
    let v = classify(429, &[], r#"{"retry_after":"6m0s"}"#);
    assert_eq!(secs(&v), Some((s(360), DelayReason::Honoured)));
    let v = classify(429, &[], r#"{"retry_after":"20ms"}"#);
    assert_eq!(secs(&v), Some((s(1), DelayReason::Floored)));
    let v = classify(429, &[], r#"{"retry_after":86400000}"#);
    let (d, reason) = secs(&v).unwrap();
    assert_eq!(reason, DelayReason::Capped);
    // The cap less up to a tenth of it (jitter against a herd at the cap).
    assert!(d <= s(600) && d >= s(540), "{d:?}");
    // Garbage or negative: never zero, the long unparseable wait.
    for body in [
        r#"{"retry_after":-5}"#,
        r#"{"retry_after":"soon"}"#,
        r#"{"retry_after":[]}"#,
    ] {
        let d = classify(429, &[], body).retry_after.unwrap();
        assert_eq!(d.reason, DelayReason::Unparseable, "{body}");
        assert!(d.delay >= s(300), "{body}");
        assert!(d.raw.unwrap().contains("retry_after"), "{body}");
    }
    // A header outranks the body.
    let v = classify(429, &[("retry-after", "7")], r#"{"retry_after":64}"#);
    assert_eq!(secs(&v), Some((s(7), DelayReason::Honoured)));
    // A body delay makes no terminal answer wait, and never upgrades it.
    let v = classify(400, &[], r#"{"retry_after":5}"#);
    assert_eq!((v.class, v.retry_after), (Terminal, None));
}

proptest! {
    /// Whatever the body, nothing panics and every delay lies within [floor, cap].
    #[test]
    fn never_panics_every_delay_clamped(
        status in 100u16..600,
        body in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            "\\{\"retry_after\":(-?[0-9]{0,25}(\\.[0-9]{0,5})?|\"[0-9a-zµ.]{0,12}\")\\}"
                .prop_map(String::into_bytes),
            "\\{\"errors\":\\[\\{\"extensions\":\\{\"code\":\"THROTTLED\"\\}\\}\\],\"extensions\":\\{\"cost\":\\{\"requestedQueryCost\":-?[0-9e.]{1,8},\"throttleStatus\":\\{\"currentlyAvailable\":-?[0-9e.]{1,8},\"restoreRate\":-?[0-9e.]{1,8}\\}\\}\\}\\}"
                .prop_map(String::into_bytes),
            "<Error><Code>[A-Za-z<>/]{0,20}</Code></Error>".prop_map(String::into_bytes),
        ],
        seed in any::<u64>(),
    ) {
        let Ok(code) = StatusCode::from_u16(status) else { return Ok(()); };
        let h = HeaderMap::new();
        let obs = Observation::Http { status: code, headers: &h, body: &body };
        let policy = RetryAfterPolicy::default();
        let v = Classifier::default().classify(&obs, now(), &mut ChaCha8Rng::seed_from_u64(seed));
        if let Some(d) = v.retry_after {
            prop_assert!(d.delay >= policy.floor && d.delay <= policy.cap, "{d:?}");
            prop_assert!(v.class.waits());
        }
    }
}

#[test]
fn the_scan_before_parsing_a_success_finds_members_only_in_quotes() {
    use super::mentions_member;
    assert!(mentions_member(br#"{"errors":[]}"#, b"errors"));
    assert!(mentions_member(br#"{ "ok" : false }"#, b"ok"));
    assert!(!mentions_member(
        br#"{"id":"msg_1","note":"no errors ok"}"#,
        b"errors"
    ));
    assert!(!mentions_member(br#"{"okay":true}"#, b"ok"));
    assert!(!mentions_member(b"", b"ok"));
    // A success without those members is not parsed, so it stays a success.
    assert_eq!(classify(202, &[], r#"{"id":"msg_1"}"#).class, Success);
}
