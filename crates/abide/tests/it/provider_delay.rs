//! `abide provider --gate-mode delay` on loopback: the real binary, a plain HTTP client.
//!
//! The rate is 2/s (one slot every 500 ms) so that requests sent together arrive well
//! within one interval even on a loaded machine; the test waits at most a few slots of real
//! time (the provider serves held requests on its own clock).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};

use crate::support::services::redis_here;
use crate::support::{provider_process, ProviderProcess};

fn start(args: &[&str]) -> ProviderProcess {
    let base = [
        "--key-rate",
        "2/s",
        "--key-burst",
        "1",
        "--account-rate",
        "off",
        "--key-concurrency",
        "off",
    ];
    provider_process(&[&base[..], args].concat())
}

fn client(timeout: Duration) -> Client {
    Client::builder().timeout(timeout).build().unwrap()
}

async fn send(c: &Client, url: &str, idem: &str) -> reqwest::Result<reqwest::Response> {
    c.post(format!("{url}/v1/messages"))
        .bearer_auth("demo-key")
        .header("Idempotency-Key", idem)
        .json(&json!({"to": "+15550100", "text": "hello"}))
        .send()
        .await
}

async fn stats(url: &str) -> Value {
    let r = client(Duration::from_secs(10))
        .get(format!("{url}/_stats"))
        .send()
        .await
        .unwrap();
    r.json().await.unwrap()
}

/// Eight requests at once: statuses, and the Retry-After of each 429.
async fn burst_of_eight(url: &str) -> (usize, Vec<u64>) {
    let c = client(Duration::from_secs(10));
    let sends: Vec<_> = (0..8)
        .map(|i| {
            let c = c.clone();
            let url = url.to_owned();
            tokio::spawn(async move { send(&c, &url, &format!("m{i}")).await.unwrap() })
        })
        .collect();
    let mut accepted = 0;
    let mut retry_after = Vec::new();
    for t in sends {
        let r = t.await.unwrap();
        match r.status() {
            StatusCode::ACCEPTED => accepted += 1,
            StatusCode::TOO_MANY_REQUESTS => retry_after.push(
                r.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap(),
            ),
            s => panic!("unexpected {s}"),
        }
    }
    (accepted, retry_after)
}

#[tokio::test]
async fn delay_mode_holds_what_fits_and_refuses_the_rest_honestly() {
    let p = start(&[
        "--gate-mode",
        "delay",
        "--delay-burst",
        "3",
        "--max-delay",
        "5s",
    ]);
    let (accepted, retry_after) = burst_of_eight(&p.url).await;
    // One at once, three held (500, 1000, 1500 ms), four refused: the next free slot is
    // 2 s away or more, and Retry-After says so.
    assert_eq!((accepted, retry_after.len()), (4, 4), "{retry_after:?}");
    assert!(retry_after.iter().all(|s| *s >= 2), "{retry_after:?}");
    let s = stats(&p.url).await;
    assert_eq!(s["delayed"], 3, "{s}");
    assert!(s["delay_ms"].as_u64().unwrap() >= 2900, "{s}");
    assert_eq!(s["rejected_by_reason"]["key_rate"], 4, "{s}");

    let p = start(&["--gate-mode", "refuse"]);
    let (accepted, retry_after) = burst_of_eight(&p.url).await;
    assert_eq!((accepted, retry_after.len()), (1, 7));
    assert_eq!(stats(&p.url).await["delayed"], 0);
}

#[tokio::test]
async fn a_client_that_hangs_up_while_held_gives_its_slot_to_the_next() {
    let p = start(&[
        "--gate-mode",
        "delay",
        "--delay-burst",
        "1",
        "--max-delay",
        "5s",
    ]);
    let c = client(Duration::from_secs(10));
    assert_eq!(
        send(&c, &p.url, "a").await.unwrap().status(),
        StatusCode::ACCEPTED
    );
    // Held for 500 ms, but this client gives up after 100 ms and closes its connection.
    let impatient = client(Duration::from_millis(100));
    assert!(send(&impatient, &p.url, "b").await.is_err());
    drop(impatient);
    // The provider notices the closed connection and frees the slot.
    let mut abandoned = Value::Null;
    for _ in 0..40 {
        abandoned = stats(&p.url).await["abandoned"].clone();
        if abandoned == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(abandoned, 1);
    // Without the give-back this one would be refused (the only waiting place was taken).
    let r = send(&c, &p.url, "c").await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let s = stats(&p.url).await;
    assert_eq!(
        (s["delayed"].clone(), s["abandoned"].clone()),
        (json!(1), json!(1)),
        "{s}"
    );
}

#[tokio::test]
async fn two_providers_on_one_redis_hold_requests_behind_one_schedule() {
    if !redis_here("two_providers_on_one_redis_hold_requests_behind_one_schedule") {
        return;
    }
    // Other tests and engineers share this Redis: a prefix of this run's own.
    let prefix = format!("abide-test:provider-delay:{}", std::process::id());
    let args = [
        "--gate-mode",
        "delay",
        "--delay-burst",
        "3",
        "--max-delay",
        "5s",
        "--redis",
        "redis://127.0.0.1:6379",
        "--redis-prefix",
        &prefix,
    ];
    let (p, q) = (start(&args), start(&args));
    let c = client(Duration::from_secs(10));
    let sends: Vec<_> = (0..8)
        .map(|i| {
            let c = c.clone();
            let url = if i % 2 == 0 { &p.url } else { &q.url }.clone();
            tokio::spawn(async move { send(&c, &url, &format!("m{i}")).await.unwrap().status() })
        })
        .collect();
    let mut accepted = 0;
    for t in sends {
        if t.await.unwrap() == StatusCode::ACCEPTED {
            accepted += 1;
        }
    }
    // As one provider: one at once, three held, four refused, whichever instance asked.
    assert_eq!(accepted, 4);
    let (sp, sq) = (stats(&p.url).await, stats(&q.url).await);
    let delayed = sp["delayed"].as_u64().unwrap() + sq["delayed"].as_u64().unwrap();
    assert_eq!(delayed, 3, "{sp} {sq}");
}
