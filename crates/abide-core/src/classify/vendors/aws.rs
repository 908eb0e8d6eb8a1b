//! Cloud error codes: AWS throttling errors, S3's `SlowDown`, Azure Storage's `ServerBusy`.
//!
//! An AWS error code is read where its protocol puts it, never searched for:
//! - the `x-amzn-ErrorType` header (`ThrottlingException:http://internal.amazon.com/...`:
//!   the code is what precedes `:`);
//! - the JSON body's `__type` (`com.amazonaws.dynamodb.v20120810#ThrottlingException`:
//!   the code is what follows `#`), or its `code` when `__type` is absent;
//! - the XML body's `<Error><Code>` (S3 and the Query protocols: `<Error>`,
//!   `<ErrorResponse><Error>`, EC2's `<Response><Errors><Error>`).
//!
//! Sources: Smithy AWS JSON 1.1 protocol, "Operation error serialization"
//! (<https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html#operation-error-serialization>);
//! the AWS SDKs' retry behaviour, throttling errors
//! (<https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html>, the list
//! in `aws-sdk-go` `aws/request/retryer.go`); S3 error responses
//! (<https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html>, `SlowDown`, 503);
//! Azure Storage common error codes
//! (<https://learn.microsoft.com/en-us/rest/api/storageservices/common-rest-api-error-codes>,
//! `ServerBusy`, 503; the code is also in `x-ms-error-code`).

use http::HeaderMap;
use serde_json::Value;

use super::finding::Finding;

/// AWS error codes that mean "slow down" (the AWS SDKs retry them as throttling errors).
/// `LimitExceededException` is left out: several services use it for a count of resources.
pub const AWS_THROTTLE_CODES: [&str; 13] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

/// Longest error code read, in bytes.
const MAX_CODE: usize = 128;

/// A throttle told by an AWS or Azure Storage error code (header, JSON or XML body).
pub fn find(headers: &HeaderMap, body: &[u8], json: Option<&Value>) -> Option<Finding> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if header("x-ms-error-code") == Some("ServerBusy") {
        return Some(Finding::throttle("azure_server_busy"));
    }
    let from_header = header("x-amzn-errortype").map(|v| v.split(':').next().unwrap_or(v));
    let from_json = || {
        let j = json?;
        let t = j
            .get("__type")
            .or_else(|| j.get("code"))
            .and_then(Value::as_str)?;
        Some(t.rsplit('#').next().unwrap_or(t))
    };
    let xml = xml_error_code(body);
    if xml == Some("ServerBusy") {
        return Some(Finding::throttle("azure_server_busy"));
    }
    let code = from_header.or_else(from_json).or(xml)?;
    let known = AWS_THROTTLE_CODES.iter().find(|c| **c == code)?;
    Some(Finding::throttle(format!("aws_{}", snake(known))))
}

/// `ThrottlingException` → `throttling_exception`.
fn snake(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 4);
    let mut prev_lower = false;
    for c in code.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The text of the first `<Code>` inside an `<Error>` element, when the document's root
/// element is `Error`, `ErrorResponse` or `Response` (S3, Azure Storage, the AWS Query
/// protocols, EC2). A prolog (`<?xml ...?>`) and leading whitespace are skipped; the root
/// may carry attributes (a namespace), the `<Error>` and `<Code>` inside it carry none.
pub fn xml_error_code(body: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(utf8_prefix(body)).ok()?;
    let text = text.trim_start_matches('\u{feff}').trim_start();
    let mut rest = text;
    if rest.starts_with("<?xml") {
        rest = rest[rest.find("?>")? + 2..].trim_start();
    }
    let root = ["Error", "ErrorResponse", "Response"]
        .into_iter()
        .find(|r| opens(rest, r))?;
    let inside = if root == "Error" {
        rest
    } else {
        &rest[rest.find("<Error>")?..]
    };
    let start = inside.find("<Code>")? + "<Code>".len();
    let len = inside[start..].find("</Code>")?;
    let code = inside[start..start + len].trim();
    (!code.is_empty() && code.len() <= MAX_CODE && !code.contains('<')).then_some(code)
}

/// `s` begins with a start tag `<name>` or `<name attr...>`.
fn opens(s: &str, name: &str) -> bool {
    s.strip_prefix('<')
        .and_then(|t| t.strip_prefix(name))
        .and_then(|t| t.chars().next())
        .is_some_and(|c| c == '>' || c.is_ascii_whitespace())
}

/// The longest prefix of `body` that is valid UTF-8 (a cut inside a character at the end
/// of a kept prefix must not hide the rest).
fn utf8_prefix(body: &[u8]) -> &[u8] {
    match std::str::from_utf8(body) {
        Ok(_) => body,
        Err(e) => &body[..e.valid_up_to()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_codes_by_structure() {
        let s3 = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>X</RequestId></Error>";
        assert_eq!(xml_error_code(s3), Some("SlowDown"));
        let query = b"<ErrorResponse xmlns=\"x\"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error></ErrorResponse>";
        assert_eq!(xml_error_code(query), Some("Throttling"));
        let query = b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code></Error></ErrorResponse>";
        assert_eq!(xml_error_code(query), Some("Throttling"));
        let ec2 = b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>x</RequestID></Response>";
        assert_eq!(xml_error_code(ec2), Some("RequestLimitExceeded"));
        for not in [
            &b"<html><body>SlowDown</body></html>"[..],
            b"<Error><Message>SlowDown</Message></Error>",
            b"<Error><Code></Code></Error>",
            b"<Error><Code>SlowDown",
            b"<Errors><Error><Code>SlowDown</Code></Error></Errors>",
            b"<ErrorX><Code>SlowDown</Code></ErrorX>",
            b"{\"Code\":\"SlowDown\"}",
            b"",
        ] {
            assert_eq!(
                xml_error_code(not),
                None,
                "{}",
                String::from_utf8_lossy(not)
            );
        }
    }

    #[test]
    fn snake_case_codes() {
        assert_eq!(snake("ThrottlingException"), "throttling_exception");
        assert_eq!(snake("SlowDown"), "slow_down");
        assert_eq!(snake("EC2ThrottledException"), "ec2_throttled_exception");
    }
}
