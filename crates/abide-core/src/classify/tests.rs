//! Tests of the classifier.

use super::*;
use crate::retry_after::DelayReason;
use http::HeaderValue;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::de::IntoDeserializer;
use std::time::{Duration, UNIX_EPOCH};
use VerdictClass::{RefreshCredentials, Retry, Success, Terminal, Throttle, Unknown};

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_static(v));
    }
    h
}

fn http_with(c: &Classifier, status: u16, h: &HeaderMap) -> Verdict {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let obs = Observation::Http {
        status: StatusCode::from_u16(status).unwrap(),
        headers: h,
        body: b"",
    };
    c.classify(&obs, now(), &mut rng)
}

fn http(status: u16, pairs: &[(&'static str, &'static str)]) -> Verdict {
    http_with(&Classifier::default(), status, &headers(pairs))
}

fn smpp_with(c: &Classifier, code: u32) -> Verdict {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    c.classify(
        &Observation::Smpp {
            command_status: code,
        },
        now(),
        &mut rng,
    )
}

#[test]
fn http_default_table_without_headers() {
    let table = [
        (100, Unknown),
        (200, Success),
        (202, Success),
        (204, Success),
        (301, Terminal),
        (304, Terminal),
        (307, Terminal),
        (400, Terminal),
        (401, RefreshCredentials),
        (403, Terminal),
        (404, Terminal),
        (405, Terminal),
        (408, Retry),
        (409, Terminal),
        (410, Terminal),
        (418, Terminal),
        (422, Terminal),
        (425, Retry),
        (429, Throttle),
        (451, Terminal),
        (500, Retry),
        (502, Retry),
        (503, Retry),
        (504, Retry),
        (507, Retry),
        (599, Retry),
        (600, Unknown),
        (999, Unknown),
    ];
    for (status, class) in table {
        let v = http(status, &[]);
        assert_eq!(v.class, class, "status {status}");
        assert_eq!(v.reason, format!("http_{status}"));
        assert_eq!(v.retry_after, None);
        assert_eq!(v.rate_limit, None);
    }
}

#[test]
fn a_4xx_with_any_retry_after_is_a_throttle_not_terminal() {
    for value in ["0", "30", "86400", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"] {
        for status in [400, 403, 404, 409, 422, 451] {
            let v = http(status, &[("retry-after", value)]);
            assert_eq!(v.class, Throttle, "{status} with Retry-After {value:?}");
            assert_eq!(v.reason, format!("http_{status}_retry_after"));
            let ra = v.retry_after.expect("retry_after kept");
            assert!(ra.delay >= Duration::from_secs(1), "{ra:?}");
            assert_eq!(ra.raw.as_deref(), Some(value));
        }
    }
    let garbage = http(403, &[("retry-after", "soon")]).retry_after.unwrap();
    assert_eq!(garbage.reason, DelayReason::Unparseable);
    assert!(garbage.delay >= Duration::from_secs(300));
    // 401 stays a credential problem even when it says when to come back.
    assert_eq!(http(401, &[("retry-after", "5")]).class, RefreshCredentials);
}

#[test]
fn retry_after_is_kept_except_on_success_and_terminal() {
    let v = http(429, &[("retry-after", "30")]);
    assert_eq!((v.class, v.reason.as_str()), (Throttle, "http_429"));
    assert_eq!(v.retry_after.unwrap().delay, Duration::from_secs(30));
    let v = http(503, &[("retry-after", "120")]);
    assert_eq!(
        (v.class, v.reason.as_str()),
        (Throttle, "http_503_retry_after")
    );
    assert_eq!(v.retry_after.unwrap().delay, Duration::from_secs(120));
    let v = http(502, &[("retry-after", "7")]);
    assert_eq!(v.class, Retry);
    assert_eq!(v.retry_after.unwrap().delay, Duration::from_secs(7));
    assert_eq!(http(200, &[("retry-after", "7")]).retry_after, None);
    let c = Classifier::default().with_http(404, Terminal);
    let v = http_with(&c, 404, &headers(&[("retry-after", "7")]));
    assert_eq!((v.class, v.retry_after), (Terminal, None));
    assert_eq!(v.reason, "http_404_override");
}

#[test]
fn exhausted_rate_limit_turns_a_4xx_into_a_throttle() {
    let exhausted = [
        ("x-ratelimit-limit", "100"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "30"),
    ];
    let v = http(403, &exhausted);
    assert_eq!(v.class, Throttle);
    assert_eq!(v.reason, "http_403_rate_limit_exhausted");
    assert!(v.rate_limit.as_ref().unwrap().exhausted());
    let v = http(503, &exhausted);
    assert_eq!(
        (v.class, v.reason.as_str()),
        (Throttle, "http_503_rate_limit_exhausted")
    );
    // Quota left: the status decides; the headers are still reported, on success too.
    let ok = [("x-ratelimit-limit", "100"), ("x-ratelimit-remaining", "5")];
    assert_eq!(http(403, &ok).class, Terminal);
    let v = http(200, &ok);
    assert_eq!(v.class, Success);
    assert_eq!(v.rate_limit.unwrap().remaining, Some(5));
}

#[test]
fn smpp_codes() {
    let c = Classifier::default();
    let cases = [
        (smpp::ESME_ROK, Success, "smpp_0x00_ok"),
        (smpp::ESME_RTHROTTLED, Throttle, "smpp_0x58_throttled"),
        (smpp::ESME_RMSGQFUL, Throttle, "smpp_0x14_msgqful"),
        (smpp::ESME_RSYSERR, Retry, "smpp_0x08_syserr"),
        (smpp::ESME_RINVSRCADR, Terminal, "smpp_0x0a_invsrcadr"),
        (smpp::ESME_RINVDSTADR, Terminal, "smpp_0x0b_invdstadr"),
        (smpp::ESME_RINVMSGLEN, Terminal, "smpp_0x01_invmsglen"),
        (smpp::ESME_RINVEXPIRY, Terminal, "smpp_0x62_invexpiry"),
        (smpp::ESME_RINVSCHED, Terminal, "smpp_0x61_invsched"),
        (
            smpp::ESME_RINVPASWD,
            RefreshCredentials,
            "smpp_0x0e_invpaswd",
        ),
        (smpp::ESME_RSUBMITFAIL, Unknown, "smpp_0x45_submitfail"),
        (0x400, Unknown, "smpp_0x400_unrecognised"),
        (u32::MAX, Unknown, "smpp_0xffffffff_unrecognised"),
    ];
    for (code, class, reason) in cases {
        let v = smpp_with(&c, code);
        assert_eq!((v.class, v.reason.as_str()), (class, reason), "0x{code:x}");
    }
    let c = c.with_smpp(smpp::ESME_RSUBMITFAIL, Retry);
    let v = smpp_with(&c, 0x45);
    assert_eq!(
        (v.class, v.reason.as_str()),
        (Retry, "smpp_0x45_submitfail_override")
    );
}

#[test]
fn transport_failures() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let c = Classifier::default();
    let mut t = |f| c.classify(&Observation::Transport(f), now(), &mut rng);
    let v = t(TransportFailure::Connect);
    assert_eq!((v.class, v.reason.as_str()), (Retry, "connect_error"));
    let v = t(TransportFailure::AfterSend { replay_safe: true });
    assert_eq!(
        (v.class, v.reason.as_str()),
        (Retry, "timeout_after_send_replay_safe")
    );
    let v = t(TransportFailure::AfterSend { replay_safe: false });
    assert_eq!(
        (v.class, v.reason.as_str()),
        (Terminal, "timeout_after_send_not_replay_safe")
    );
}

type De = serde::de::value::Error;

fn overrides(
    http: &[(&'static str, &'static str)],
    smpp: &[(&'static str, &'static str)],
) -> Result<ClassifyOverrides, De> {
    let mut outer: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    outer.insert("http", http.iter().copied().collect());
    outer.insert("smpp", smpp.iter().copied().collect());
    ClassifyOverrides::deserialize(IntoDeserializer::<De>::into_deserializer(outer))
}

#[test]
fn overrides_deserialise_from_string_keys() {
    let o = overrides(
        &[("409", "retry"), ("403", "throttle")],
        &[("0x45", "retry"), ("88", "terminal")],
    )
    .unwrap();
    assert_eq!(o.http.get(&409), Some(&Retry));
    assert_eq!(o.http.get(&403), Some(&Throttle));
    assert_eq!(o.smpp.get(&0x45), Some(&Retry));
    assert_eq!(o.smpp.get(&88), Some(&Terminal));
    let c = Classifier::default().with_overrides(o);
    assert_eq!(http_with(&c, 409, &HeaderMap::new()).class, Retry);
    assert_eq!(smpp_with(&c, 0x58).class, Terminal);

    assert!(overrides(&[("abc", "retry")], &[]).is_err());
    assert!(overrides(&[("70000", "retry")], &[]).is_err());
    let e = overrides(&[("70000", "retry")], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an HTTP status code (100-599)"), "{e}");
    // A u16 outside 100-599 parses, and the validator refuses it naming the setting, as
    // it does 999.
    let o = overrides(&[("42", "retry")], &[]).unwrap();
    let e = o.validate().unwrap_err().to_string();
    assert!(
        e.contains("classify.http.42") && e.contains("100-599"),
        "{e}"
    );
    assert!(overrides(&[("409", "maybe")], &[]).is_err());
    assert!(overrides(&[], &[("0xZZ", "retry")]).is_err());
}
