//! `abide provider` driven from the outside: the real binary on loopback, a plain HTTP
//! client, and only what a client can see (statuses, headers, bodies, `/_stats`).
//!
//! Time-driven behaviour is scheduled by request number (`@#N`) so nothing waits.

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, SystemTime};

use reqwest::{Client, Response, StatusCode};
use serde_json::{json, Value};

use crate::support::services::redis_here;
use crate::support::{provider_process, ProviderProcess};

/// A running `abide provider` and a client for it.
struct Provider {
    /// Held for its `Drop`, which ends the process.
    _process: ProviderProcess,
    url: String,
    client: Client,
}

fn start(args: &[&str]) -> Provider {
    let process = provider_process(args);
    let client = Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    Provider {
        url: process.url.clone(),
        _process: process,
        client,
    }
}

impl Provider {
    async fn send_as(&self, key: &str, idem: &str) -> Response {
        self.client
            .post(format!("{}/v1/messages", self.url))
            .bearer_auth(key)
            .header("Idempotency-Key", idem)
            .json(&json!({"to": "+15550100", "text": "hello"}))
            .send()
            .await
            .unwrap()
    }

    async fn send(&self, idem: &str) -> Response {
        self.send_as("demo-key", idem).await
    }

    async fn stats(&self) -> Value {
        let r = self
            .client
            .get(format!("{}/_stats", self.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        r.json().await.unwrap()
    }

    async fn quota(&self, key: Option<&str>) -> Response {
        let mut rb = self.client.get(format!("{}/v1/quota", self.url));
        if let Some(k) = key {
            rb = rb.bearer_auth(k);
        }
        rb.send().await.unwrap()
    }
}

fn header(r: &Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

#[allow(clippy::disallowed_methods)] // compares the provider's wall clock with ours
fn wall_now() -> SystemTime {
    SystemTime::now()
}

fn assert_date_about_an_hour_ahead(v: &str) {
    let at = httpdate::parse_http_date(v).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    let ahead = at.duration_since(wall_now()).unwrap();
    assert!(
        ahead > Duration::from_secs(3500) && ahead <= Duration::from_secs(3700),
        "{v}"
    );
}

#[test]
fn help_documents_every_behaviour() {
    let out = Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(["provider", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "POST /v1/messages",
        "Idempotency-Key",
        "GET /v1/quota",
        "GET /_stats",
        "--key-rate",
        "--account-rate",
        "--key-burst",
        "--key-concurrency",
        "--account-concurrency",
        "--lease",
        "--latency",
        "--algorithm",
        "gcra",
        "fixed-window",
        "sliding-window",
        "algorithm = ",
        "--config",
        "retry-after=STYLE",
        "imf-fixdate",
        "rfc850",
        "asctime",
        "zero",
        "huge",
        "garbage",
        "absent",
        "throttle=STYLE",
        "Retry-After: 0",
        "smpp-200",
        "smpp-429",
        "smpp-status",
        "fail-503",
        "grace=on",
        "--abuse-threshold",
        "--suspend-for",
        "@WHEN",
        "#N",
        "[[schedule]]",
    ] {
        assert!(help.contains(needle), "--help does not mention {needle:?}");
    }
}

#[tokio::test]
async fn retry_after_forms_follow_the_schedule_and_quota_is_free() {
    let p = start(&[
        "--key-rate",
        "1/1h",
        "--account-rate",
        "off",
        "--key-concurrency",
        "off",
        "--behaviour",
        "retry-after=imf-fixdate@#3",
        "--behaviour",
        "retry-after=rfc850@#4",
        "--behaviour",
        "retry-after=asctime@#5",
        "--behaviour",
        "retry-after=zero@#6",
        "--behaviour",
        "retry-after=huge@#7",
        "--behaviour",
        "retry-after=garbage@#8",
        "--behaviour",
        "retry-after=absent@#9",
    ]);
    assert_eq!(p.send("m1").await.status(), StatusCode::ACCEPTED);

    // 2: the honest form: delay-seconds rounded up, RateLimit fields, reason only.
    let r = p.send("m2").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("3600"));
    assert_eq!(
        header(&r, "ratelimit-policy").as_deref(),
        Some("\"key\";q=1;w=3600")
    );
    assert_eq!(
        header(&r, "ratelimit").as_deref(),
        Some("\"key\";r=0;t=3600")
    );
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"error": "rate_limited", "reason": "key_rate"})
    );

    // The quota endpoint answers while exhausted, and asking twice changes nothing.
    let before = p.stats().await;
    for _ in 0..2 {
        let q = p.quota(Some("demo-key")).await;
        assert_eq!(q.status(), StatusCode::OK);
        assert_eq!(
            header(&q, "ratelimit").as_deref(),
            Some("\"key\";r=0;t=3600")
        );
        let body: Value = q.json().await.unwrap();
        assert_eq!(body["gates"][0]["category"], "key_rate");
        assert_eq!(body["gates"][0]["remaining"], 0);
    }
    assert_eq!(p.quota(None).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(p.stats().await["requests"], before["requests"]);

    let r = p.send("m3").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let v = header(&r, "retry-after").unwrap();
    assert!(
        v.ends_with(" GMT") && v.as_bytes()[3] == b',',
        "IMF-fixdate: {v}"
    );
    assert_date_about_an_hour_ahead(&v);

    let v = header(&p.send("m4").await, "retry-after").unwrap();
    assert!(
        v.split(',').next().unwrap().len() > 3 && v.contains('-'),
        "RFC 850: {v}"
    );
    assert_date_about_an_hour_ahead(&v);

    let v = header(&p.send("m5").await, "retry-after").unwrap();
    assert!(!v.contains("GMT") && !v.contains(','), "asctime: {v}");
    assert_date_about_an_hour_ahead(&v);

    for (idem, want) in [
        ("m6", Some("0")),
        ("m7", Some("86400")),
        ("m8", Some("soon-ish")),
        ("m9", None),
    ] {
        let r = p.send(idem).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&r, "retry-after").as_deref(), want, "{idem}");
        // Only the honest style advertises RateLimit fields.
        assert_eq!(header(&r, "ratelimit"), None);
    }

    let s = p.stats().await;
    assert_eq!(s["requests"], 9);
    assert_eq!(s["accepted"], 1);
    assert_eq!(s["rejected"], 8);
    assert_eq!(s["rejected_by_status"]["429"], 8);
    assert_eq!(s["rejected_by_reason"]["key_rate"], 8);
    let hist = s["histogram"].as_array().unwrap();
    let total: u64 = hist.iter().map(|b| b["requests"].as_u64().unwrap()).sum();
    let throttled: u64 = hist.iter().map(|b| b["throttled"].as_u64().unwrap()).sum();
    assert_eq!((total, throttled), (9, 8));
}

#[tokio::test]
async fn throttle_styles_from_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("provider.toml");
    std::fs::write(
        &path,
        r#"
        [limits]
        key_rate = "1/1h"
        account_rate = "100/s"
        key_concurrency = 2
        [[schedule]]
        at_request = 3
        throttle = "403"
        [[schedule]]
        at_request = 4
        throttle = "smpp-200"
        [[schedule]]
        at_request = 5
        throttle = "smpp-429"
        [[schedule]]
        at_request = 6
        smpp_status = 20
        "#,
    )
    .unwrap();
    let p = start(&["--config", path.to_str().unwrap()]);
    assert_eq!(p.send("t1").await.status(), StatusCode::ACCEPTED);
    assert_eq!(p.send("t2").await.status(), StatusCode::TOO_MANY_REQUESTS);

    let r = p.send("t3").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("0"));
    assert!(r.bytes().await.unwrap().is_empty());

    let r = p.send("t4").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"command_status": 88})
    );

    let r = p.send("t5").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(header(&r, "retry-after").is_some());
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"command_status": 88})
    );

    let r = p.send("t6").await;
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"command_status": 20})
    );

    let s = p.stats().await;
    assert_eq!(
        s["rejected_by_status"],
        json!({"200": 1, "403": 1, "429": 3})
    );
    assert_eq!(s["accepted"], 1);
}

#[tokio::test]
async fn duplicates_503_bursts_and_bad_requests() {
    let p = start(&[
        "--behaviour",
        "fail-503=0.5@#3",
        "--behaviour",
        "fail-503=0@#7",
    ]);
    let a: Value = p.send("dup").await.json().await.unwrap();
    let r = p.send("dup").await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        a,
        "a duplicate gets the original answer"
    );

    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for i in 3..=8 {
            v.push(p.send(&format!("f{i}")).await.status().as_u16());
        }
        v
    };
    assert_eq!(statuses, [202, 503, 202, 503, 202, 202]);

    assert_eq!(
        p.send_as("wrong-key", "x").await.status(),
        StatusCode::UNAUTHORIZED
    );
    let r = p
        .client
        .post(format!("{}/v1/messages", p.url))
        .bearer_auth("demo-key")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    let s = p.stats().await;
    assert_eq!(s["accepted"], 5);
    assert_eq!(s["duplicates"], 1);
    assert_eq!(
        s["rejected_by_reason"],
        json!({"unavailable": 2, "unauthenticated": 1, "bad_request": 1})
    );
    assert_eq!(
        s["rejected_by_status"],
        json!({"503": 2, "401": 1, "400": 1})
    );
}

#[tokio::test]
async fn grace_period_then_enforcement() {
    let p = start(&[
        "--key-rate",
        "1/1h",
        "--behaviour",
        "grace=on",
        "--behaviour",
        "grace=off@#5",
    ]);
    assert_eq!(p.send("g1").await.status(), StatusCode::ACCEPTED);
    // During grace: the 429 is sent, but the retry of the same message succeeds.
    assert_eq!(p.send("g2").await.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(p.send("g2").await.status(), StatusCode::ACCEPTED);
    assert_eq!(p.send("g3").await.status(), StatusCode::TOO_MANY_REQUESTS);
    // Request 5: grace is over, the retry is refused.
    assert_eq!(p.send("g3").await.status(), StatusCode::TOO_MANY_REQUESTS);
    let s = p.stats().await;
    assert_eq!(s["grace_passes"], 1);
    assert_eq!(s["accepted"], 2);
    assert_eq!(s["rejected_by_status"]["429"], 3);
}

/// Suspends k1 (after 3 throttles, for 24 h) and returns the provider and k1's next answer.
async fn suspend_k1(extra: &[&str]) -> (Provider, Response) {
    let mut args = vec![
        "--api-key",
        "k1:acme",
        "--api-key",
        "k2:acme",
        "--key-rate",
        "1/1h",
        "--account-rate",
        "off",
        "--abuse-threshold",
        "3",
        "--abuse-window",
        "1m",
        "--suspend-for",
        "24h",
    ];
    args.extend_from_slice(extra);
    let p = start(&args);
    assert_eq!(p.send_as("k1", "a1").await.status(), StatusCode::ACCEPTED);
    for i in 2..=4 {
        let r = p.send_as("k1", &format!("a{i}")).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    let r = p.send_as("k1", "a5").await;
    (p, r)
}

/// By default a suspension is honest: its Retry-After is the remaining suspension, rounded up.
#[tokio::test]
async fn a_suspension_says_how_long_by_default() {
    let (p, r) = suspend_k1(&[]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("86400"));
    assert_eq!(p.stats().await["suspensions"], 1);
}

#[tokio::test]
async fn abuse_protection_suspends_only_the_hammering_key() {
    let (p, r) = suspend_k1(&["--suspension-style", "bare-403"]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&r, "retry-after"), None);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"error": "suspended"})
    );
    assert_eq!(p.send_as("k2", "b1").await.status(), StatusCode::ACCEPTED);
    // The default demo key is replaced by --api-key.
    assert_eq!(
        p.send_as("demo-key", "c1").await.status(),
        StatusCode::UNAUTHORIZED
    );
    let s = p.stats().await;
    assert_eq!(s["suspensions"], 1);
    assert_eq!(s["rejected_by_reason"]["suspended"], 1);
}

#[tokio::test]
async fn concurrency_limit_and_in_flight_duplicates() {
    let p = start(&["--key-concurrency", "1", "--latency", "30s"]);
    let slow = {
        let (client, url) = (p.client.clone(), p.url.clone());
        tokio::spawn(async move {
            client
                .post(format!("{url}/v1/messages"))
                .bearer_auth("demo-key")
                .header("Idempotency-Key", "slow")
                .json(&json!({"text": "slow"}))
                .send()
                .await
        })
    };
    let mut in_flight = false;
    for _ in 0..500 {
        if p.stats().await["in_flight"] == 1 {
            in_flight = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(in_flight, "the slow request never arrived");

    let r = p.send("other").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1"));
    assert_eq!(header(&r, "ratelimit").as_deref(), Some("\"conc\";r=0;t=1"));
    assert_eq!(r.json::<Value>().await.unwrap()["reason"], "concurrency");

    // The same message again while the first is still being processed: answered from the
    // idempotency record, not accepted twice.
    let r = p.send("slow").await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let s = p.stats().await;
    assert_eq!(
        (s["accepted"].clone(), s["duplicates"].clone()),
        (json!(1), json!(1))
    );
    slow.abort();
}

#[tokio::test]
async fn header_styles_draft_6_and_x_ratelimit() {
    for (style, names) in [
        (
            "draft-6",
            &[
                "ratelimit-policy",
                "ratelimit-limit",
                "ratelimit-remaining",
                "ratelimit-reset",
            ][..],
        ),
        (
            "x-ratelimit",
            &[
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-reset",
            ][..],
        ),
    ] {
        let p = start(&[
            "--headers",
            style,
            "--key-rate",
            "1/1h",
            "--account-rate",
            "off",
            "--key-concurrency",
            "off",
            "--behaviour",
            "retry-after=absent",
        ]);
        let ok = p.send("s1").await;
        assert_eq!(ok.status(), StatusCode::ACCEPTED);
        let refused = p.send("s2").await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        for r in [&ok, &refused] {
            for n in names {
                assert!(header(r, n).is_some(), "{style}: no {n} on {}", r.status());
            }
            assert_eq!(header(r, "ratelimit"), None, "{style}");
        }
        assert_eq!(header(&refused, "retry-after"), None, "{style}");
        let remaining = if style == "draft-6" {
            "ratelimit-remaining"
        } else {
            "x-ratelimit-remaining"
        };
        assert_eq!(header(&refused, remaining).as_deref(), Some("0"));
        if style == "x-ratelimit" {
            // Epoch seconds, about an hour ahead.
            let reset: u64 = header(&refused, "x-ratelimit-reset")
                .unwrap()
                .parse()
                .unwrap();
            assert!(reset > 1_700_000_000, "{reset}");
        } else {
            assert_eq!(
                header(&refused, "ratelimit-policy").as_deref(),
                Some("1;w=3600")
            );
            assert_eq!(header(&refused, "ratelimit-reset").as_deref(), Some("3600"));
        }
    }
}

#[tokio::test]
async fn window_algorithms_take_a_whole_quota_in_a_burst() {
    // GCRA with burst 1 would refuse the second request and ask for 1200 s (one interval);
    // the window algorithms ignore the burst, take all 3, then wait for their window.
    for (algorithm, retry_after) in [("fixed-window", "3600"), ("sliding-window", "4800")] {
        let p = start(&[
            "--key-rate",
            "3/1h",
            "--key-burst",
            "1",
            "--account-rate",
            "off",
            "--key-concurrency",
            "off",
            "--algorithm",
            algorithm,
        ]);
        for i in 0..3 {
            let r = p.send(&format!("m{i}")).await;
            assert_eq!(r.status(), StatusCode::ACCEPTED, "{algorithm} #{i}");
        }
        let r = p.send("m3").await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{algorithm}");
        // Sliding: the current window ends in 3600 s, then its weight must fall to 2 of 3,
        // another 1200 s.
        assert_eq!(header(&r, "retry-after").as_deref(), Some(retry_after));
        assert_eq!(
            header(&r, "ratelimit-policy").as_deref(),
            Some("\"key\";q=3;w=3600")
        );
        assert_eq!(
            header(&r, "ratelimit").as_deref(),
            Some(format!("\"key\";r=0;t={retry_after}").as_str())
        );
        assert_eq!(
            r.json::<Value>().await.unwrap(),
            json!({"error": "rate_limited", "reason": "key_rate"})
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(["provider", "--algorithm", "leaky-bucket"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("leaky-bucket"));
}

#[tokio::test]
async fn two_providers_on_one_redis_enforce_one_limit() {
    if !redis_here("two_providers_on_one_redis_enforce_one_limit") {
        return;
    }
    // Other tests and engineers share this Redis: a prefix of this run's own.
    let prefix = format!(
        "abide-test:provider:{}:{}",
        std::process::id(),
        wall_now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let args = [
        "--key-rate",
        "5/1h",
        "--account-rate",
        "off",
        "--key-concurrency",
        "2",
        "--redis",
        "redis://127.0.0.1:6379",
        "--redis-prefix",
        &prefix,
    ];
    let (a, b) = (start(&args), start(&args));
    let mut accepted = 0;
    for i in 0..20 {
        let p = if i % 2 == 0 { &a } else { &b };
        let r = p.send(&format!("m{i}")).await;
        match r.status() {
            StatusCode::ACCEPTED => accepted += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                // 5 per hour with a burst of 5: the next one in 720 s, whichever instance.
                assert_eq!(header(&r, "retry-after").as_deref(), Some("720"), "#{i}");
                assert_eq!(
                    header(&r, "ratelimit-policy").as_deref(),
                    Some("\"key\";q=5;w=3600")
                );
                assert_eq!(
                    r.json::<Value>().await.unwrap(),
                    json!({"error": "rate_limited", "reason": "key_rate"})
                );
            }
            s => panic!("#{i}: unexpected {s}"),
        }
    }
    // limit + burst would allow 10 in the first hour; both instances together took the
    // burst once, not once each.
    assert_eq!(accepted, 5);
    let (sa, sb) = (a.stats().await, b.stats().await);
    assert_eq!(
        sa["accepted"].as_u64().unwrap() + sb["accepted"].as_u64().unwrap(),
        5
    );
    assert_eq!(sa["in_flight"], 0);
}
