//! Tests of the model: request checks, serialisation, time columns.

use super::*;

fn req(path: &str) -> Request {
    Request::post_json(path, serde_json::json!({"to": "+1"}))
}

#[test]
fn paths_never_name_a_host() {
    for p in [
        "https://evil.example/x",
        "//evil.example/x",
        "/\\evil",
        "x/y",
        "",
        "/a/../b",
        "/a b",
        "/redirect?u=http://x",
    ] {
        assert!(req(p).validate().is_err(), "{p:?} accepted");
    }
    for p in ["/", "/v1/messages", "/v1/messages?x=1&y=2"] {
        assert!(req(p).validate().is_ok(), "{p:?} refused");
    }
}

#[test]
fn secret_headers_are_refused() {
    for name in [
        "Authorization",
        "Proxy-Authorization",
        "Cookie",
        "X-Api-Key",
        "X-Auth-Token",
        "X-Goog-Api-Key",
        "Ocp-Apim-Subscription-Key",
        "Private-Token",
        "X-Amz-Security-Token",
        "X-Vault-Token",
        "Api-Key",
        "x-shopify-access-token",
    ] {
        let mut r = req("/m");
        r.headers.insert(name.into(), "t0ken".into());
        let err = r.validate().unwrap_err().to_string();
        assert!(
            err.contains(name) && err.contains("secret"),
            "{name}: {err}"
        );
        assert!(!err.contains("t0ken"), "{err}");
    }
    let mut r = req("/m");
    r.headers.insert("X-Trace".into(), "1".into());
    assert!(r.validate().is_ok());
}

#[test]
fn headers_abide_sets_or_the_connection_owns_are_refused_by_name() {
    for name in [
        "Idempotency-Key",
        "content-length",
        "Transfer-Encoding",
        "Host",
        "Connection",
        "Upgrade",
        "TE",
        "Trailer",
        "Keep-Alive",
        "Proxy-Connection",
        "proxy-foo",
    ] {
        let mut r = req("/m");
        r.headers.insert(name.into(), "x".into());
        let err = r.validate().unwrap_err().to_string();
        assert!(err.contains(name), "{name}: {err}");
    }
    let mut r = req("/m");
    r.headers.insert("Tenant".into(), "1".into());
    assert!(
        r.validate().is_ok(),
        "a name merely starting like 'TE' is fine"
    );
}

#[test]
fn bodies_over_one_mib_are_refused_with_the_limit() {
    let mut r = req("/m");
    r.body = Some(Body::Text("x".repeat(MAX_BODY_BYTES)));
    assert!(r.validate().is_ok());
    r.body = Some(Body::Text("x".repeat(MAX_BODY_BYTES + 1)));
    let err = r.validate().unwrap_err().to_string();
    assert!(err.contains("1048576"), "{err}");
    let big = serde_json::json!({"text": "x".repeat(MAX_BODY_BYTES)});
    let err = Request::post_json("/m", big).validate().unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
}

#[test]
fn methods_names_and_values_are_bounded_and_echoes_clipped() {
    let big = "X".repeat(50_000_000);
    let mut r = req("/m");
    r.method = http::Method::from_bytes(big.as_bytes()).unwrap();
    let err = r.validate().unwrap_err().to_string();
    assert!(
        err.len() < 500 && err.contains("longer than 32"),
        "{err:.300}"
    );
    let mut r = req("/m");
    r.headers.insert(big.clone(), "v".into());
    let err = r.validate().unwrap_err().to_string();
    assert!(
        err.len() < 500 && err.contains("longer than 256"),
        "{err:.300}"
    );
    let mut r = req("/m");
    r.headers.insert("X-Big".into(), big.clone());
    let err = r.validate().unwrap_err().to_string();
    assert!(
        err.len() < 500 && err.contains("limit is 8192"),
        "{err:.300}"
    );
    let err = NewItem::new(big.clone(), req("/m")).validate().unwrap_err();
    let err = err.to_string();
    assert!(
        err.len() < 500 && err.contains("longer than 64"),
        "{err:.300}"
    );
    let err = req(&format!("/{big}")).validate().unwrap_err().to_string();
    assert!(err.len() < 500 && err.contains("too-long"), "{err:.300}");
    let mut r = req("/m");
    r.method = parse_method("UPDATEREDIRECTREF").unwrap();
    assert!(r.validate().is_ok());
    for bad in ["post", "", "PO ST", "GET\n"] {
        let err = parse_method(bad).unwrap_err().to_string();
        assert!(
            err.contains("not an upper-case HTTP method"),
            "{bad:?}: {err}"
        );
    }
    let err = parse_method(&big).unwrap_err().to_string();
    assert!(
        err.len() < 500 && err.contains("longer than 32"),
        "{err:.300}"
    );
    // Read and written by its name, checked when read.
    let json = serde_json::to_value(req("/m")).unwrap();
    assert_eq!(json["method"], "POST");
    let mut lower = json.clone();
    lower["method"] = "post".into();
    assert!(serde_json::from_value::<Request>(lower).is_err());
    assert_eq!(serde_json::from_value::<Request>(json).unwrap(), req("/m"));
}

#[test]
fn idempotency_keys_are_visible_ascii() {
    let with = |k: &str| {
        NewItem::new("p", req("/m"))
            .with_idempotency_key(k)
            .validate()
    };
    for bad in ["", "a b", "tab\there", "é", &"k".repeat(256)] {
        let err = with(bad).unwrap_err().to_string();
        assert!(err.contains("visible ASCII"), "{bad:?}: {err}");
    }
    for good in ["a", "order-42", "!~", &"k".repeat(255)] {
        assert!(with(good).is_ok(), "{good:?}");
    }
}

#[test]
fn item_ids_are_v7_from_the_given_time() {
    let t = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
    let id = new_item_id(t);
    let u = Uuid::parse_str(&id).ok();
    assert_eq!(u.map(|u| u.get_version_num()), Some(7));
    let (secs, _) = u
        .and_then(|u| u.get_timestamp())
        .map(|ts| ts.to_unix())
        .unwrap_or_default();
    assert_eq!(secs, 1_750_000_000);
}

#[test]
fn moved_by_names_round_trip_and_unknown_ones_are_named() {
    for m in MovedBy::ALL {
        assert_eq!(m.as_str().parse::<MovedBy>(), Ok(m));
        assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
    }
    let err = "failed_over_from:x".parse::<MovedBy>().unwrap_err();
    assert!(err.to_string().contains("failed_over_from:x"), "{err}");
}

#[test]
fn times_serialise_as_rfc3339_and_durations_as_milliseconds() {
    let t = UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
    let item = Item {
        id: "i".into(),
        provider: "p".into(),
        current_provider: "p".into(),
        request: req("/m"),
        idempotency_key: "k".into(),
        created_at: t,
        state: State::Pending,
        attempts: 1,
        window_attempts: 1,
        window_start: t,
        next_attempt_at: t + Duration::from_secs(2),
        last_provider_code: None,
        reason: None,
        moved_by: None,
        lease_owner: None,
        lease_expires_at: None,
        message_id: None,
    };
    let v = serde_json::to_value(&item).unwrap();
    assert_eq!(v["created_at"], "2025-06-15T15:06:40.123Z");
    assert_eq!(v["next_attempt_at"], "2025-06-15T15:06:42.123Z");
    assert_eq!(v["lease_expires_at"], serde_json::Value::Null);
    assert!(
        v.get("moved_by").is_none(),
        "JSON unchanged for unmoved items"
    );
    let moved = Item {
        moved_by: Some(MovedBy::LeaseExpired),
        ..item
    };
    let v = serde_json::to_value(&moved).unwrap();
    assert_eq!(v["moved_by"], "lease_expired");
    let a = StoredAttempt {
        item_id: "i".into(),
        attempt_no: 1,
        idempotency_key: "k".into(),
        record: AttemptRecord {
            at: t,
            provider: "p".into(),
            remote: RemoteCode::Http(429),
            verdict_class: abide_core::VerdictClass::Throttle,
            delay: Some(Duration::from_millis(1500)),
            delay_reason: Some(DelayReason::Honoured),
            latency: Duration::from_micros(12_700),
        },
    };
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(v["at"], "2025-06-15T15:06:40.123Z");
    assert_eq!(v["delay_ms"], 1500);
    assert_eq!(v["latency_ms"], 12);
    assert_eq!(v["remote"], serde_json::json!({"http": 429}));
    assert_eq!(v["verdict_class"], "throttle");
    assert_eq!(v["delay_reason"], "honoured");
}

#[test]
fn ms_round_trip() {
    let t = UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
    assert_eq!(from_ms(to_ms(t)), t);
}

#[test]
fn tunnel_and_echo_methods_are_refused_for_a_provider_call() {
    for m in ["CONNECT", "TRACE"] {
        let mut r = req("/m");
        r.method = http::Method::from_bytes(m.as_bytes()).unwrap();
        let err = r.validate().unwrap_err().to_string();
        assert!(err.contains(&format!("method {m} is not one")), "{err}");
    }
    for m in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"] {
        let mut r = req("/m");
        r.method = http::Method::from_bytes(m.as_bytes()).unwrap();
        assert!(r.validate().is_ok(), "{m}");
    }
}

#[test]
fn a_bad_header_value_names_the_byte_and_where_never_the_value() {
    use crate::model::headers::value_fault;
    assert_eq!(
        value_fault("Bearer sk-1\n").as_deref(),
        Some("contains a line feed (0x0A) at byte 11")
    );
    assert_eq!(
        value_fault("a\rb").as_deref(),
        Some("contains a carriage return (0x0D) at byte 1")
    );
    assert_eq!(
        value_fault("\u{0}").as_deref(),
        Some("contains a NUL byte (0x00) at byte 0")
    );
    assert_eq!(
        value_fault("x\u{7f}").as_deref(),
        Some("contains a DEL (0x7F) at byte 1")
    );
    assert_eq!(
        value_fault("x\u{1b}").as_deref(),
        Some("contains a control byte (0x1B) at byte 1")
    );
    assert_eq!(value_fault("tab\tand space ok"), None);
    let mut r = req("/m");
    r.headers
        .insert("X-Trace-Id".into(), "abc\r\nX-Evil: 1".into());
    let err = r.validate().unwrap_err().to_string();
    assert!(
        err.contains("\"X-Trace-Id\"") && err.contains("carriage return (0x0D) at byte 3"),
        "{err}"
    );
    assert!(!err.contains("abc") && !err.contains("Evil"), "{err}");
}
