//! `abide proxy` end to end: a real proxy process in front of a fake provider on loopback,
//! each of the provider's quirks answered as the proxy's clients need, and what the
//! provider saw counted. No assertion on timing.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::proxy::*;
use crate::support::*;
use abide_fake::{RetryAfterStyle, ThrottleStyle};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_an_http_date_is_waited_out_and_every_caller_is_accepted_once() {
    // 4 per second, burst 1: concurrent callers exceed it at once.
    let p = start_provider(quirky(
        4,
        Duration::from_secs(1),
        1,
        ThrottleStyle::Http429,
        RetryAfterStyle::ImfFixdate,
    ))
    .await;
    let px = proxy(&p, "", &[]).await;
    let got = post_many(&px.url, 8, "60").await;
    assert!(all_accepted(&got), "{got:?}");
    let s = p.stats();
    assert_eq!(s.accepted, 8, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_with_retry_after_0_is_a_throttle_floored_and_retried() {
    let p = start_provider(quirky(
        4,
        Duration::from_secs(1),
        1,
        ThrottleStyle::Http403,
        RetryAfterStyle::Zero,
    ))
    .await;
    let px = proxy(&p, "", &[]).await;
    let got = post_many(&px.url, 6, "60").await;
    assert!(all_accepted(&got), "{got:?}");
    let s = p.stats();
    assert_eq!(s.accepted, 6, "{s:?}");
    // Floored at 1 s, never a hot loop: far fewer refusals than a retry-now client makes.
    let refused = s.rejected_by_status.get(&403).copied().unwrap_or(0);
    assert!(refused <= 12, "{refused} 403s for 6 messages: {s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_86400_is_capped_and_answered_429_within_the_callers_budget() {
    // One request per hour: the second is throttled with `Retry-After: 86400`.
    let p = start_provider(quirky(
        1,
        Duration::from_secs(3600),
        1,
        ThrottleStyle::Http429,
        RetryAfterStyle::Huge,
    ))
    .await;
    // Not told the limit in advance: the proxy must learn it from the 429.
    let px = proxy_with(
        &p,
        "",
        "[provider.pacer]\nuse_rate_limit_headers = false",
        &[],
    )
    .await;
    assert_eq!(post_many(&px.url, 1, "5").await, vec![202]);
    let r = client()
        .post(format!("{}/sms/v1/messages", px.url))
        .header("abide-max-wait", "5")
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["abide-stopped"], "wait_too_long");
    let ra: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // The cap (10 min by default), not the day the provider asked for.
    assert!((1..=600).contains(&ra), "Retry-After {ra}");
    assert!(r.headers().contains_key("ratelimit"), "{:?}", r.headers());
    // The proxy tried once, saw the day, and did not try again.
    assert_eq!(p.stats().requests, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_host_holds_forty_concurrent_callers_and_releases_them_at_the_pace() {
    const N: usize = 40;
    let p = start_provider(quirky(
        20,
        Duration::from_secs(1),
        5,
        ThrottleStyle::Http429,
        RetryAfterStyle::Seconds,
    ))
    .await;
    let px = proxy(&p, "", &[]).await;
    let got = post_many(&px.url, N, "60").await;
    assert!(all_accepted(&got), "{got:?}");
    let s = p.stats();
    assert_eq!(s.accepted, N as u64, "{s:?}");
    // Held in the proxy, not sent into the limit: a 429 per message would be 40.
    let throttled = provider_429_per_item(&s, N);
    assert!(throttled <= 0.25, "{throttled} 429s per message: {s:?}");
    let m = client()
        .get(format!("{}/_abide/metrics", px.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains(&format!(
            "abide_proxy_answers_total{{provider=\"sms\",status=\"202\"}} {N}"
        )),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_past_abide_max_wait_is_answered_429_with_retry_after() {
    // One request per 30 s, honest delay-seconds.
    let p = start_provider(quirky(
        1,
        Duration::from_secs(30),
        1,
        ThrottleStyle::Http429,
        RetryAfterStyle::Seconds,
    ))
    .await;
    let px = proxy(&p, "", &[]).await;
    let got = post_many(&px.url, 3, "1").await;
    assert_eq!(got.iter().filter(|&&s| s == 202).count(), 1, "{got:?}");
    assert_eq!(got.iter().filter(|&&s| s == 429).count(), 2, "{got:?}");
    // Once the proxy knows the pause, a caller is answered from it without a request.
    let before = p.stats().requests;
    let r = client()
        .post(format!("{}/sms/v1/messages", px.url))
        .header("abide-max-wait", "1")
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let ra: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ra >= 1);
    assert_eq!(p.stats().requests, before, "sent into a known pause");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_without_a_key_that_timed_out_is_not_replayed() {
    // Each answer takes 3 s; the proxy gives up on an attempt after 0.2 s.
    let mut cfg = provider_config(100, 100);
    cfg.latency_ms = 3000;
    let p = start_provider(cfg).await;
    let px = proxy(&p, "timeout_secs = 0.2", &[]).await;
    let c = client();
    let r = c
        .post(format!("{}/sms/v1/messages", px.url))
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let body = r.text().await.unwrap();
    assert!(body.contains("may have been acted on"), "{body}");
    assert_eq!(p.stats().requests, 1, "replayed");
    // With an Idempotency-Key the same POST is safe to send again: replayed, and answered
    // by the provider's idempotency (the original's answer) or, out of attempts, 504.
    let r = c
        .post(format!("{}/sms/v1/messages", px.url))
        .header("idempotency-key", "order-42")
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert!([202, 504].contains(&r.status().as_u16()), "{r:?}");
    assert!(p.stats().requests >= 3, "not replayed: {:?}", p.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaping_paths_unknown_providers_pages_and_connect_are_refused_saying_why() {
    let p = start_provider(provider_config(100, 100)).await;
    let px = proxy(&p, "", &[]).await;
    let c = client();
    // Sent as written (an HTTP client library would resolve the dots before sending).
    for path in [
        "/sms/%2e%2e/_stats",
        "/sms/..;/_stats",
        "/sms/v1/%252e%252e/x",
        "/sms/../_stats",
    ] {
        let answer = raw_get(&px.url, path).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("rule dot-segment"), "{path}: {answer}");
    }
    let r = c.get(format!("{}/nope/v1", px.url)).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().contains("configured: sms"));
    // A web page's request (it names its origin), and a DNS-rebound name in Host: the proxy
    // would add the provider's credential for them, so neither goes upstream.
    let page = c
        .post(format!("{}/sms/v1/messages", px.url))
        .header("origin", "http://evil.example")
        .header("content-type", "text/plain")
        .body(r#"{"to":"+1","text":"csrf"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 403);
    assert_eq!(page.headers()["abide-stopped"], "browser_request");
    let rebound = c
        .post(format!("{}/sms/v1/messages", px.url))
        .header("host", "attacker.example")
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 421);
    // TRACE would echo the request back, the credential the proxy adds included: refused,
    // as is any method an API call is not made with.
    for m in ["TRACE", "TRACK"] {
        let m = reqwest::Method::from_bytes(m.as_bytes()).unwrap();
        let r = c
            .request(m.clone(), format!("{}/sms/v1/messages", px.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{m}");
        assert_eq!(r.headers()["abide-stopped"], "method_not_forwarded");
        assert!(r.headers()["allow"].to_str().unwrap().contains("POST"));
    }
    assert_eq!(p.stats().requests, 0);
    // CONNECT through the proxy: 501, and the reverse route named.
    let tunnel = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(&px.url).unwrap())
        .build()
        .unwrap();
    let e = tunnel
        .get("https://127.0.0.1:9/x")
        .send()
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("501") || e.is_connect(), "{e:?}");
    // Absolute form (HTTP_PROXY) to the provider's origin is routed to it.
    let fwd = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(&px.url).unwrap())
        .build()
        .unwrap();
    let r = fwd
        .post(format!("{}/v1/messages", p.url()))
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    assert_eq!(p.stats().accepted, 1);
    // Through the proxy, not around it.
    let m = metrics(&px.url).await;
    assert!(
        m.contains("abide_proxy_answers_total{provider=\"sms\",status=\"202\"} 1"),
        "{m}"
    );
    // What the upstream said and what the session decides, under `abide serve`'s names
    // and labels.
    assert!(
        m.contains("abide_remote_responses_total{provider=\"sms\",remote=\"http_202\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("abide_remote_responses_total{provider=\"sms\",remote=\"http_429\"} 0"),
        "{m}"
    );
    for name in [
        "abide_provider_pace_requests_per_second",
        "abide_provider_throttle_ratio",
        "abide_provider_pause_remaining_seconds",
        "abide_coordination_nodes",
    ] {
        assert!(
            m.contains(&format!("{name}{{provider=\"sms\",node=\"")),
            "{name}: {m}"
        );
    }
    for l in m.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = l.split_once(' ').unwrap();
        assert!(
            name.starts_with("abide_proxy_")
                || abide_proxy::metric_names::SHARED.contains(&(name, kind)),
            "{name} {kind}: neither the proxy's own nor a name shared with serve"
        );
    }
}

/// `GET path` written byte for byte on a fresh connection; the whole answer as text.
async fn raw_get(base: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.strip_prefix("http://").unwrap();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(RUN_BOUND, s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Peak resident memory of process `pid`, in KiB (`VmHWM`, Linux).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_response_streams_through_without_being_held_whole() {
    const BYTES: u64 = 50_000_000;
    let p = start_provider(provider_config(100, 100)).await;
    let px = proxy(&p, "", &[]).await;
    let mut r = client()
        .get(format!("{}/sms/v1/export?bytes={BYTES}", px.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut got = 0u64;
    while let Some(chunk) = tokio::time::timeout(RUN_BOUND, r.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        got += chunk.len() as u64;
    }
    assert_eq!(got, BYTES);
    // Streamed: the proxy's peak memory stays well under the body's size.
    if let Some(kib) = px.child.id().and_then(peak_rss_kib) {
        println!("proxy peak RSS after a {BYTES}-byte response: {kib} KiB");
        assert!(kib < 40_000, "peak RSS {kib} KiB for a {BYTES}-byte body");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_obsolete_date_forms_are_waited_out_and_garbage_means_a_long_wait() {
    for ra in [RetryAfterStyle::Rfc850, RetryAfterStyle::Asctime] {
        let p = start_provider(quirky(
            4,
            Duration::from_secs(1),
            1,
            ThrottleStyle::Http429,
            ra,
        ))
        .await;
        let px = proxy(&p, "", &[]).await;
        let got = post_many(&px.url, 6, "60").await;
        assert!(all_accepted(&got), "{ra:?}: {got:?}");
        assert_eq!(p.stats().accepted, 6, "{ra:?}");
    }
    // `Retry-After: soon-ish`: confusion never means zero. The proxy would wait minutes, so
    // a caller with a 5 s budget is told to come back that much later, not at once.
    let p = start_provider(quirky(
        1,
        Duration::from_secs(3600),
        1,
        ThrottleStyle::Http429,
        RetryAfterStyle::Garbage,
    ))
    .await;
    let px = proxy(&p, "", &[]).await;
    assert_eq!(post_many(&px.url, 1, "5").await, vec![202]);
    let r = client()
        .post(format!("{}/sms/v1/messages", px.url))
        .header("abide-max-wait", "5")
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let ra: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ra >= 60, "Retry-After {ra} after an unparseable one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_burst_is_retried_for_posts_that_carry_an_idempotency_key() {
    // Every 4th request is a 503 without Retry-After: ambiguous, so only keyed POSTs are
    // sent again.
    let mut cfg = provider_config(100, 100);
    cfg.behaviour.fail_503 = 0.25;
    let p = start_provider(cfg).await;
    let px = proxy(&p, "", &[]).await;
    let c = client();
    for i in 0..8 {
        let r = c
            .post(format!("{}/sms/v1/messages", px.url))
            .header("idempotency-key", format!("burst-{i}"))
            .json(&serde_json::json!({"to": format!("+1{i}"), "text": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "message {i}");
    }
    let s = p.stats();
    assert_eq!(s.accepted, 8, "{s:?}");
    assert!(s.requests > 8, "no 503 was retried: {s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_s_own_429_reaches_the_caller_once_attempts_ran_out() {
    // One request per hour, `Retry-After: 0` (floored to 1 s by the proxy), two attempts.
    let p = start_provider(quirky(
        1,
        Duration::from_secs(3600),
        1,
        ThrottleStyle::Http429,
        RetryAfterStyle::Zero,
    ))
    .await;
    // Learning from the 429s alone (the 202's fields would say "an hour", a wait too long).
    let tables =
        "[provider.retry]\nmax_attempts = 2\n[provider.pacer]\nuse_rate_limit_headers = false";
    let px = proxy_with(&p, "", tables, &[]).await;
    assert_eq!(post_many(&px.url, 1, "60").await, vec![202]);
    let r = client()
        .post(format!("{}/sms/v1/messages", px.url))
        .header("abide-max-wait", "60")
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    // The provider's answer as it came (its body and Retry-After), not the proxy's own.
    assert!(
        !r.headers().contains_key("abide-stopped"),
        "{:?}",
        r.headers()
    );
    assert_eq!(r.headers()["retry-after"], "0");
    assert_eq!(p.stats().requests, 3, "{:?}", p.stats());
}
