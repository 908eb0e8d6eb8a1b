//! The fake provider in-process, driven by a `ManualClock`.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{Clock, ManualClock};
use abide_provider::{spawn, ProviderConfig, RunningProvider, DEMO_KEY};
use reqwest::{Client, Response, StatusCode};

fn clock() -> ManualClock {
    ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
}

async fn start(toml: &str, clock: &ManualClock) -> RunningProvider {
    let cfg = ProviderConfig::from_toml_str(toml).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    spawn(cfg, clock, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

async fn send(c: &Client, p: &RunningProvider, idem: Option<&str>) -> Response {
    let mut rb = c
        .post(format!("{}/v1/messages", p.url()))
        .bearer_auth(DEMO_KEY)
        .json(&serde_json::json!({"to": "+15550100", "text": "hi"}));
    if let Some(k) = idem {
        rb = rb.header("Idempotency-Key", k);
    }
    rb.send().await.unwrap()
}

fn header(r: &Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

const ONE_PER_SEC: &str = r#"
[limits]
key_rate = "1/s"
account_rate = "100/s"
"#;

#[tokio::test]
async fn accepts_once_per_idempotency_key_and_throttles_honestly() {
    let clock = clock();
    let p = start(ONE_PER_SEC, &clock).await;
    let c = Client::new();
    let first = send(&c, &p, Some("a")).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let id: serde_json::Value = first.json().await.unwrap();
    let again = send(&c, &p, Some("a")).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.json::<serde_json::Value>().await.unwrap(), id);

    clock.advance(Duration::from_millis(800));
    let no = send(&c, &p, Some("b")).await;
    assert_eq!(no.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&no, "retry-after").as_deref(), Some("1"));
    assert_eq!(header(&no, "ratelimit").as_deref(), Some("\"key\";r=0;t=1"));
    assert_eq!(
        header(&no, "ratelimit-policy").as_deref(),
        Some("\"key\";q=1;w=1")
    );
    let body: serde_json::Value = no.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"error": "rate_limited", "reason": "key_rate"})
    );

    clock.advance(Duration::from_millis(200));
    assert_eq!(send(&c, &p, Some("b")).await.status(), StatusCode::ACCEPTED);
    let s = p.stats();
    assert_eq!(
        (s.requests, s.accepted, s.duplicates, s.rejected),
        (4, 2, 1, 1)
    );
    assert_eq!(s.rejected_by_reason["key_rate"], 1);
    p.shutdown().await.unwrap();
}
