//! Tests of user-written body and header rules.

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, StatusCode};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use super::*;
use crate::classify::{Classifier, ClassifyOverrides, Observation, Verdict};
use crate::retry_after::DelayReason;

fn overrides(v: serde_json::Value) -> ClassifyOverrides {
    serde_json::from_value(v).unwrap()
}

/// The issue's rule, as the providers file writes it (TOML tables, here as JSON).
fn issue_rule() -> ClassifyOverrides {
    overrides(json!({"body": [{
        "json": "/errors/0/extensions/code",
        "equals": "THROTTLED",
        "verdict": "throttle",
        "delay_json": "/retry_after"
    }]}))
}

fn classify(
    o: &ClassifyOverrides,
    status: u16,
    h: &[(&'static str, &'static str)],
    body: &str,
) -> Verdict {
    let mut headers = HeaderMap::new();
    for (k, v) in h {
        headers.append(*k, HeaderValue::from_static(v));
    }
    let c = Classifier::default().with_overrides(o.clone());
    let obs = Observation::Http {
        status: StatusCode::from_u16(status).unwrap(),
        headers: &headers,
        body: body.as_bytes(),
    };
    c.classify(
        &obs,
        UNIX_EPOCH + Duration::from_secs(1_750_000_000),
        &mut ChaCha8Rng::seed_from_u64(1),
    )
}

#[test]
fn a_body_rule_decides_with_the_delay_it_points_at() {
    let o = issue_rule();
    o.validate().unwrap();
    let body = r#"{"errors":[{"extensions":{"code":"THROTTLED"}}],"retry_after":"1.5s"}"#;
    let v = classify(&o, 200, &[], body);
    assert_eq!(
        (v.class, v.reason.as_str()),
        (VerdictClass::Throttle, "http_200_rule_body_1")
    );
    let d = v.retry_after.unwrap();
    assert_eq!(
        (d.delay, d.reason),
        (Duration::from_millis(1500), DelayReason::Honoured)
    );
    assert_eq!(d.raw.as_deref(), Some("retry_after=\"1.5s\""));
    // Another code, or no JSON: the rule does not match.
    for body in [
        r#"{"errors":[{"extensions":{"code":"BAD_INPUT"}}]}"#,
        "THROTTLED",
    ] {
        let v = classify(&o, 200, &[], body);
        assert_eq!(v.class, VerdictClass::Success, "{body}");
    }
    // Another index: not the rule (the pointer names element 0), the built-in shape.
    let v = classify(
        &o,
        200,
        &[],
        r#"{"errors":[{"x":1},{"extensions":{"code":"THROTTLED"}}]}"#,
    );
    assert_eq!(v.reason, "http_200_graphql_throttled");
    // An unreadable delay is never zero.
    let v = classify(
        &o,
        200,
        &[],
        r#"{"errors":[{"extensions":{"code":"THROTTLED"}}],"retry_after":-1}"#,
    );
    assert_eq!(v.retry_after.unwrap().reason, DelayReason::Unparseable);
}

#[test]
fn rules_come_before_status_overrides_and_vendor_shapes_and_keep_their_order() {
    let mut o = overrides(json!({
        "http": {"403": "terminal"},
        "body": [
            {"name": "sf_concurrent", "json": "/0/errorCode", "equals": "REQUEST_LIMIT_EXCEEDED",
             "verdict": "out_of_quota", "status": [403]},
            {"json": "/0/errorCode", "equals": "REQUEST_LIMIT_EXCEEDED", "verdict": "retry"}
        ]
    }));
    o.validate().unwrap();
    let body = r#"[{"message":"x","errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#;
    let v = classify(&o, 403, &[], body);
    assert_eq!(
        (v.class, v.reason.as_str()),
        (VerdictClass::OutOfQuota, "http_403_rule_sf_concurrent")
    );
    assert_eq!(v.retry_after, None);
    // The status filter: on a 400 the second rule applies.
    let v = classify(&o, 400, &[], body);
    assert_eq!(
        (v.class, v.reason.as_str()),
        (VerdictClass::Retry, "http_400_rule_body_2")
    );
    // Without rules the status override decides; a number and a boolean compare exactly.
    o.body.clear();
    assert_eq!(classify(&o, 403, &[], body).reason, "http_403_override");
    let o = overrides(json!({"body": [
        {"json": "/error/code", "equals": 4, "verdict": "throttle"},
        {"json": "/ok", "equals": false, "verdict": "retry"}
    ]}));
    assert_eq!(
        classify(&o, 400, &[], r#"{"error":{"code":4}}"#).class,
        VerdictClass::Throttle
    );
    assert_eq!(
        classify(&o, 400, &[], r#"{"error":{"code":"4"}}"#).class,
        VerdictClass::Terminal
    );
    assert_eq!(
        classify(&o, 200, &[], r#"{"ok":false}"#).class,
        VerdictClass::Retry
    );
}

#[test]
fn a_header_rule_with_its_delay_header() {
    let o = overrides(json!({"header": [{
        "name": "busy", "header": "X-Error-Kind", "equals": "rate-limited",
        "verdict": "throttle", "delay_header": "x-wait"
    }]}));
    o.validate().unwrap();
    let v = classify(
        &o,
        400,
        &[("x-error-kind", " rate-limited "), ("x-wait", "6m0s")],
        "",
    );
    assert_eq!(
        (v.class, v.reason.as_str()),
        (VerdictClass::Throttle, "http_400_rule_busy")
    );
    assert_eq!(v.retry_after.unwrap().delay, Duration::from_secs(360));
    // Not the whole value: no match.
    let v = classify(&o, 400, &[("x-error-kind", "rate-limited, maybe")], "");
    assert_eq!(v.class, VerdictClass::Terminal);
}

#[test]
fn bad_rules_are_refused_naming_the_rule_and_key() {
    let cases = [
        (
            json!({"body": [{"json": "errors/0", "equals": "x", "verdict": "throttle"}]}),
            "classify.body[1].json",
            "JSON pointer",
        ),
        (
            json!({"body": [{"json": "/a~2b", "equals": "x", "verdict": "throttle"}]}),
            "classify.body[1].json",
            "RFC 6901",
        ),
        (
            json!({"body": [{"json": "/a", "equals": "x", "verdict": "throttle"}, {"name": "t", "json": "/a", "equals": ["x"], "verdict": "throttle"}]}),
            "classify.body.t.equals",
            "string, number or boolean",
        ),
        (
            json!({"body": [{"json": "/a", "equals": "x", "verdict": "terminal", "delay_json": "/d"}]}),
            "classify.body[1].delay_json",
            "waits for nothing",
        ),
        (
            json!({"body": [{"json": "/a", "equals": "x", "verdict": "throttle", "delay_json": "d"}]}),
            "classify.body[1].delay_json",
            "JSON pointer",
        ),
        (
            json!({"body": [{"json": "/a", "equals": "x", "verdict": "throttle", "status": [99]}]}),
            "classify.body[1].status",
            "99",
        ),
        (
            json!({"body": [{"name": "Bad Name", "json": "/a", "equals": "x", "verdict": "throttle"}]}),
            "classify.body[1].name",
            "a-z",
        ),
        (
            json!({"header": [{"header": "bad header", "equals": "x", "verdict": "throttle"}]}),
            "classify.header[1].header",
            "not a header name",
        ),
        (
            json!({"header": [{"header": "x-a", "equals": " ", "verdict": "throttle"}]}),
            "classify.header[1].equals",
            "1 to",
        ),
        (
            json!({"header": [{"header": "x-a", "equals": "x", "verdict": "out_of_quota", "delay_header": "x-d"}]}),
            "classify.header[1].delay_header",
            "waits for nothing",
        ),
    ];
    for (v, setting, problem) in cases {
        let e = overrides(v.clone()).validate().unwrap_err();
        assert_eq!(e.setting(), setting, "{v}");
        assert!(e.to_string().contains(problem), "{v}: {e}");
    }
    let many: Vec<_> = (0..=MAX_RULES)
        .map(|_| json!({"json": "/a", "equals": 1, "verdict": "retry"}))
        .collect();
    let e = overrides(json!({ "body": many })).validate().unwrap_err();
    assert!(e.to_string().contains("at most 64"), "{e}");
    // Unknown keys and verdicts are refused when the file is read.
    let e = serde_json::from_value::<ClassifyOverrides>(
        json!({"body": [{"json": "/a", "equals": 1, "verdict": "slow"}]}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("out_of_quota"), "{e}");
    let e = serde_json::from_value::<ClassifyOverrides>(
        json!({"body": [{"jsn": "/a", "equals": 1, "verdict": "retry"}]}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("jsn"), "{e}");
}
