//! Shared by the proxy tests: an `abide proxy` process in front of a fake provider, and
//! callers that send through it.

use std::time::Duration;

use abide_fake::{ProviderConfig, Rate, RetryAfterStyle, RunningProvider, ThrottleStyle};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use super::{abide, provider_config, provider_toml, start, write, RUN_BOUND};

/// A proxy process and its base URL.
pub struct Proxy {
    pub child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

/// Start `abide proxy` for provider `sms` at `p` (with `extra` provider keys), plus
/// `flags`.
pub async fn proxy(p: &RunningProvider, extra: &str, flags: &[&str]) -> Proxy {
    proxy_with(p, extra, "", flags).await
}

/// [`proxy`] with provider sub-tables `tables`.
pub async fn proxy_with(p: &RunningProvider, extra: &str, tables: &str, flags: &[&str]) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "providers.toml",
        &provider_toml("sms", &p.url(), extra, tables),
    );
    let mut args = vec![
        "proxy",
        "--config",
        cfg.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(flags);
    let mut child = start(abide(&args));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_else(|| panic!("abide proxy printed nothing"));
    let url = first.strip_prefix("listening on ").unwrap().to_owned();
    Proxy {
        child,
        url,
        _dir: dir,
    }
}

/// A provider at `per` intervals for `count` requests, burst `burst`, throttling as
/// `throttle` with `Retry-After` as `ra`.
pub fn quirky(
    count: u32,
    per: Duration,
    burst: u32,
    throttle: ThrottleStyle,
    ra: RetryAfterStyle,
) -> ProviderConfig {
    let mut c = provider_config(count, burst);
    c.limits.key_rate = Some(Rate { count, per });
    c.behaviour.throttle = throttle;
    c.behaviour.retry_after = ra;
    c
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// POST `n` distinct messages at once through the proxy; the statuses the clients got.
pub async fn post_many(base: &str, n: usize, max_wait: &str) -> Vec<u16> {
    let c = client();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (c, url, w) = (
                c.clone(),
                format!("{base}/sms/v1/messages"),
                max_wait.to_owned(),
            );
            tokio::spawn(async move {
                c.post(url)
                    .header("abide-max-wait", w)
                    .json(&serde_json::json!({"to": format!("+1555{i:07}"), "text": "hi"}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(tokio::time::timeout(RUN_BOUND, t).await.unwrap().unwrap());
    }
    out
}

pub fn all_accepted(statuses: &[u16]) -> bool {
    statuses.iter().all(|&s| s == 202)
}

/// The proxy's `/_abide/metrics`.
pub async fn metrics(base: &str) -> String {
    client()
        .get(format!("{base}/_abide/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
