//! abide-reqwest against `abide provider` (and a scripted server) on loopback, in virtual
//! time: the provider and the policy share one `ManualClock`, and abide's waits advance it.
//! Each test asserts what the provider saw and how long abide waited.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abide_fake::DEMO_KEY;
use axum::http::StatusCode;
use support::*;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// One request per second per key, burst 1: the second request in a row is throttled.
const ONE_PER_SEC: &str = r#"
[limits]
key_rate = "1/s"
account_rate = "100/s"
"#;

/// The provider's answers also carry `RateLimit: "key";r=0;t=1` when the quota is spent,
/// and abide would wait for the reset instead of being throttled (see the first test). The
/// tests of `Retry-After` quirks switch rate-limit headers off to meet the throttles.
fn quirk_policy(clock: &abide_core::ManualClock) -> abide_reqwest::PolicyBuilder {
    policy(clock).with_rate_limit_headers(false)
}

fn with(extra: &str) -> String {
    format!("{ONE_PER_SEC}\n{extra}")
}

#[tokio::test]
async fn an_exhausted_quota_on_a_success_waits_for_the_reset_instead_of_a_429() {
    let clock = clock();
    let p = provider(ONE_PER_SEC, &clock).await;
    let policy = policy(&clock).build().unwrap();
    let c = client(policy.clone());
    let key = format!("http://127.0.0.1:{}", p.addr().port());
    let (r, _) = post(&c, &p.url(), &clock).await;
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    // The 202 carried RateLimit-Policy "key";q=1;w=1: the host aims at 0.97/s now...
    let target = policy.pacer_snapshot(&key).unwrap().target.unwrap();
    assert!((target - 0.97).abs() < 1e-9, "{target}");
    // ...and RateLimit "key";r=0;t=1: the next request waits for the reset, unthrottled.
    let (r, took) = post(&c, &p.url(), &clock).await;
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    assert!(
        took >= Duration::from_millis(900) && took < SECS(2),
        "{took:?}"
    );
    let s = p.stats();
    assert_eq!((s.requests, s.accepted, s.rejected), (2, 2, 0));
}

#[tokio::test]
async fn delay_seconds_are_honoured() {
    let clock = clock();
    let p = provider(ONE_PER_SEC, &clock).await;
    let c = client(quirk_policy(&clock).build().unwrap());
    post(&c, &p.url(), &clock).await.0.unwrap();
    let (r, took) = post(&c, &p.url(), &clock).await;
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    // 429 with Retry-After: 1 (the wait left, rounded up), then accepted.
    assert!(
        took >= SECS(1) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    let s = p.stats();
    assert_eq!((s.requests, s.accepted, s.rejected), (3, 2, 1));
}

#[tokio::test]
async fn a_switch_to_http_dates_is_followed() {
    let clock = clock();
    let toml = with("[[schedule]]\nat_request = 4\nretry_after = \"imf-fixdate\"\n");
    let p = provider(&toml, &clock).await;
    let c = client(quirk_policy(&clock).build().unwrap());
    let mut took = Vec::new();
    for _ in 0..3 {
        let (r, t) = post(&c, &p.url(), &clock).await;
        assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
        took.push(t);
    }
    let s = p.stats();
    // req 2: 429 "1"; req 4: 429 with an IMF-fixdate about 2 s ahead (whole seconds).
    assert_eq!((s.requests, s.accepted, s.rejected), (5, 3, 2));
    assert!(
        took[1] >= SECS(1) && took[1] < Duration::from_millis(1500),
        "{took:?}"
    );
    assert!(
        took[2] >= SECS(1) && took[2] <= Duration::from_millis(2500),
        "{took:?}"
    );
}

#[tokio::test]
async fn forbidden_with_retry_after_zero_is_a_throttle_that_waits_the_floor() {
    let clock = clock();
    let p = provider(&with("[behaviour]\nthrottle = \"403\"\n"), &clock).await;
    let c = client(quirk_policy(&clock).build().unwrap());
    post(&c, &p.url(), &clock).await.0.unwrap();
    let (r, took) = post(&c, &p.url(), &clock).await;
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    // Retry-After: 0 never means "now": the 1 s floor applies.
    assert!(took >= SECS(1) && took < SECS(2), "{took:?}");
    let s = p.stats();
    assert_eq!((s.requests, s.rejected_by_status.get(&403)), (3, Some(&1)));
}

#[tokio::test]
async fn a_200_that_says_throttled_is_waited_out_not_returned() {
    let clock = clock();
    let p = provider(&with("[behaviour]\nthrottle = \"graphql-200\"\n"), &clock).await;
    let c = client(quirk_policy(&clock).build().unwrap());
    post(&c, &p.url(), &clock).await.0.unwrap();
    let (r, took) = post(&c, &p.url(), &clock).await;
    // The 200 THROTTLED is not handed back: its query cost (about 1 s) is waited out.
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    assert!(took >= SECS(1) && took < SECS(2), "{took:?}");
    let s = p.stats();
    assert_eq!((s.requests, s.accepted), (3, 2));
    assert_eq!(s.rejected_by_status.get(&200), Some(&1));
}

#[tokio::test]
async fn a_day_long_retry_after_is_capped_and_stops_a_caller_that_will_not_wait() {
    let clock = clock();
    let p = provider(&with("[behaviour]\nretry_after = \"huge\"\n"), &clock).await;
    let c = client(quirk_policy(&clock).build().unwrap());
    post(&c, &p.url(), &clock).await.0.unwrap();
    let (r, took) = post(&c, &p.url(), &clock).await;
    let e = stopped(r);
    assert!(e.starts_with("wait_too_long|"), "{e}");
    // Capped at 600 s, less up to a tenth drawn at random (nodes refused together do not
    // resume together).
    let delay = secs_after(&e, "retry delay of ");
    assert!((540.0..=600.0).contains(&delay), "{e}");
    assert!(e.contains("exceeds max_wait 30.0s"), "{e}");
    assert!(
        e.contains("429 Too Many Requests") && e.contains("\"86400\""),
        "{e}"
    );
    assert!(took < SECS(1), "no wait before stopping: {took:?}");
    // The host is paused for the capped wait: the next request is not even sent.
    let (r, _) = post(&c, &p.url(), &clock).await;
    let e = stopped(r);
    let pause = secs_after(&e, "host paused of ");
    assert!((540.0..=600.0).contains(&pause), "{e}");
    assert!(e.contains("0 request(s)"), "{e}");
    assert_eq!(p.stats().requests, 2);
}

#[tokio::test]
async fn a_day_long_retry_after_waits_the_cap_when_the_caller_allows() {
    let clock = clock();
    let p = provider(&with("[behaviour]\nretry_after = \"huge\"\n"), &clock).await;
    let policy = quirk_policy(&clock)
        .with_max_wait(SECS(900))
        .with_max_age(SECS(900))
        .build()
        .unwrap();
    let c = client(policy);
    post(&c, &p.url(), &clock).await.0.unwrap();
    let (r, took) = post(&c, &p.url(), &clock).await;
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    // The cap (600 s) less up to a tenth of it, drawn at random.
    assert!(took >= SECS(540) && took < SECS(601), "{took:?}");
    assert_eq!(p.stats().requests, 3);
}

#[tokio::test]
async fn garbage_retry_after_waits_long_never_zero() {
    let clock = clock();
    let p = provider(&with("[behaviour]\nretry_after = \"garbage\"\n"), &clock).await;
    let c = client(quirk_policy(&clock).build().unwrap());
    post(&c, &p.url(), &clock).await.0.unwrap();
    let e = stopped(post(&c, &p.url(), &clock).await.0);
    assert!(
        e.contains("exceeds max_wait") && e.contains("\"soon-ish\""),
        "{e}"
    );
    assert_eq!(p.stats().requests, 2);

    let clock = support::clock();
    let p = provider(&with("[behaviour]\nretry_after = \"garbage\"\n"), &clock).await;
    let policy = quirk_policy(&clock)
        .with_max_wait(SECS(600))
        .with_max_age(SECS(900));
    let c = client(policy.build().unwrap());
    post(&c, &p.url(), &clock).await.0.unwrap();
    let (r, took) = post(&c, &p.url(), &clock).await;
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    // Unparseable: 5 min plus up to 1 min of jitter.
    assert!(took >= SECS(300) && took <= SECS(361), "{took:?}");
    assert_eq!(p.stats().requests, 3);
}

#[tokio::test]
async fn bursts_of_503_are_retried_with_one_idempotency_key_until_the_cap() {
    let clock = clock();
    let toml = "[limits]\nkey_rate = \"100/s\"\n[behaviour]\nfail_503 = 0.5\n";
    let p = provider(toml, &clock).await;
    let c = client(policy(&clock).build().unwrap());
    for i in 0..10 {
        let (r, took) = post(&c, &p.url(), &clock).await;
        assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
        // Every second request is a 503 without Retry-After: our backoff, at least 1 s.
        if i > 0 {
            assert!(took >= SECS(1) && took <= SECS(30), "{i}: {took:?}");
        }
    }
    let s = p.stats();
    assert_eq!((s.requests, s.accepted, s.duplicates), (19, 10, 0));
    assert_eq!(s.rejected_by_status.get(&503), Some(&9));

    let clock = support::clock();
    let p = provider("[behaviour]\nfail_503 = 1.0\n", &clock).await;
    let c = client(policy(&clock).build().unwrap());
    let e = stopped(post(&c, &p.url(), &clock).await.0);
    assert!(
        e.starts_with("attempt_cap|") && e.contains("503 Service Unavailable"),
        "{e}"
    );
    assert_eq!(p.stats().requests, 4);
}

#[tokio::test]
async fn a_post_without_idempotency_key_is_not_replayed_after_a_503() {
    let clock = clock();
    let p = provider("[behaviour]\nfail_503 = 1.0\n", &clock).await;
    let c = client(policy(&clock).without_idempotency_keys().build().unwrap());
    let e = stopped(post(&c, &p.url(), &clock).await.0);
    assert!(e.starts_with("not_replay_safe|"), "{e}");
    assert_eq!(p.stats().requests, 1);
}

#[tokio::test]
async fn every_attempt_carries_the_same_idempotency_key() {
    // The provider's grace period lets a throttled key's next attempt through: a retry
    // with the same key counts as a grace pass, one with a new key would not.
    let clock = clock();
    let p = provider(&with("[behaviour]\ngrace = true\n"), &clock).await;
    let c = client(quirk_policy(&clock).build().unwrap());
    post(&c, &p.url(), &clock).await.0.unwrap();
    post(&c, &p.url(), &clock).await.0.unwrap();
    let s = p.stats();
    assert_eq!((s.requests, s.grace_passes), (3, 1));

    // A scripted server shows the header itself: a custom name, one value, three attempts.
    let script = Script::default();
    *script.answers.lock().unwrap() = vec![
        (
            StatusCode::SERVICE_UNAVAILABLE,
            vec![("retry-after", "1".into())],
        ),
        (StatusCode::BAD_GATEWAY, vec![]),
        (StatusCode::OK, vec![]),
    ];
    let url = script.clone().serve().await;
    let header = http::HeaderName::from_static("x-request-key");
    let c = client(
        policy(&clock)
            .with_idempotency_header(header)
            .build()
            .unwrap(),
    );
    let r = c.post(&url).body("x").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let keys: Vec<_> = script
        .seen()
        .iter()
        .map(|h| h.get("x-request-key").cloned())
        .collect();
    assert_eq!(keys.len(), 3);
    assert!(
        keys[0].is_some() && keys.iter().all(|k| *k == keys[0]),
        "{keys:?}"
    );
    // A GET is idempotent by definition: no key is invented for it.
    c.get(&url).send().await.unwrap();
    assert!(script.seen().last().unwrap().get("x-request-key").is_none());
}

#[tokio::test]
async fn rate_limit_headers_appearing_and_changing_move_the_target() {
    let clock = clock();
    let script = Script::default();
    let policy_hdr = |q: u32| {
        vec![
            ("ratelimit-policy", format!("\"k\";q={q};w=1")),
            ("ratelimit", "\"k\";r=3;t=1".to_owned()),
        ]
    };
    *script.answers.lock().unwrap() = vec![
        (StatusCode::OK, vec![]),
        (StatusCode::OK, policy_hdr(20)),
        (StatusCode::OK, policy_hdr(4)),
    ];
    let url = script.clone().serve().await;
    let policy = policy(&clock).with_headroom(0.9).build().unwrap();
    let c = client(policy.clone());
    let key = url.clone();
    let mut targets = Vec::new();
    for _ in 0..3 {
        c.get(&url).send().await.unwrap();
        targets.push(policy.pacer_snapshot(&key).unwrap().target);
    }
    assert_eq!(targets[0], None);
    assert!((targets[1].unwrap() - 18.0).abs() < 1e-9, "{targets:?}");
    assert!((targets[2].unwrap() - 3.6).abs() < 1e-9, "{targets:?}");
    // With the headers switched off, they are ignored.
    let off = support::policy(&clock)
        .with_rate_limit_headers(false)
        .build()
        .unwrap();
    let c = client(off.clone());
    c.get(&url).send().await.unwrap();
    assert_eq!(off.pacer_snapshot(&key).unwrap().target, None);
}

#[tokio::test]
async fn a_401_refreshes_credentials_once_through_the_hook() {
    let clock = clock();
    let p = provider(ONE_PER_SEC, &clock).await;
    let calls = Arc::new(AtomicU32::new(0));
    let n = Arc::clone(&calls);
    let fixed = policy(&clock).with_refresh(move || {
        n.fetch_add(1, Ordering::SeqCst);
        async {
            let mut h = http::HeaderMap::new();
            h.insert("authorization", format!("Bearer {DEMO_KEY}").parse()?);
            Ok(h)
        }
    });
    let c = client(fixed.build().unwrap());
    let r = c
        .post(format!("{}/v1/messages", p.url()))
        .bearer_auth("stale")
        .json(&serde_json::json!({"to": "+1", "text": "hi"}))
        .send()
        .await;
    assert_eq!(r.unwrap().status(), StatusCode::ACCEPTED);
    assert_eq!((calls.load(Ordering::SeqCst), p.stats().requests), (1, 2));

    // A hook that does not help: stopped after the second 401, not a third request.
    let wrong = policy(&clock).with_refresh(|| async { Ok(http::HeaderMap::new()) });
    let c = client(wrong.build().unwrap());
    let r = c
        .post(format!("{}/v1/messages", p.url()))
        .bearer_auth("stale")
        .json(&serde_json::json!({"to": "+1", "text": "hi"}))
        .send()
        .await;
    let e = stopped(r);
    assert!(
        e.starts_with("credentials_rejected|") && e.contains("401"),
        "{e}"
    );
    assert_eq!(p.stats().requests, 4);
}

#[tokio::test]
async fn terminal_answers_come_back_as_responses_or_errors_as_configured() {
    let clock = clock();
    let p = provider(ONE_PER_SEC, &clock).await;
    let bad = |c: reqwest_middleware::ClientWithMiddleware| {
        let url = format!("{}/v1/messages", p.url());
        async move {
            c.post(url)
                .bearer_auth(DEMO_KEY)
                .body("not json")
                .send()
                .await
        }
    };
    let r = bad(client(policy(&clock).build().unwrap())).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // The body read to classify it is put back.
    assert!(r.text().await.unwrap().contains("invalid_json"));
    let strict = policy(&clock).with_terminal_as_error(true).build().unwrap();
    let e = stopped(bad(client(strict)).await);
    assert!(
        e.starts_with("terminal|") && e.contains("invalid_json"),
        "{e}"
    );
    assert_eq!(p.stats().requests, 2);
}

#[tokio::test]
async fn deprecation_and_sunset_are_logged_once_per_host() {
    let log = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink = Arc::clone(&log);
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || Writer(Arc::clone(&sink)))
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let clock = clock();
    let script = Script::default();
    *script.answers.lock().unwrap() = vec![(
        StatusCode::OK,
        vec![
            ("deprecation", "@1688169599".into()),
            ("sunset", "Sun, 30 Jun 2024 23:59:59 GMT".into()),
        ],
    )];
    let url = script.clone().serve().await;
    let c = client(policy(&clock).build().unwrap());
    for _ in 0..3 {
        c.get(&url).send().await.unwrap();
    }
    let text = String::from_utf8(log.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("RFC 9745").count(), 1, "{text}");
    assert_eq!(text.matches("RFC 8594").count(), 1, "{text}");
}

struct Writer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Writer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_policy_that_cannot_work_is_refused_by_name() {
    let e = abide_reqwest::Policy::builder()
        .with_max_attempts(0)
        .build();
    assert_eq!(
        e.unwrap_err().to_string(),
        "abide policy: max_attempts: 0 is outside 1..=10000"
    );
    let e = abide_reqwest::Policy::builder().with_headroom(1.5).build();
    assert!(e.unwrap_err().to_string().contains("headroom: 1.5"));
}

/// The seconds written right after `prefix` in `text` ("retry delay of 571.3s ...").
fn secs_after(text: &str, prefix: &str) -> f64 {
    let rest = &text[text
        .find(prefix)
        .unwrap_or_else(|| panic!("no {prefix:?} in {text}"))
        + prefix.len()..];
    let end = rest.find('s').unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {rest:?}"))
}
