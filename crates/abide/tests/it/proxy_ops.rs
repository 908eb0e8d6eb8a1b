//! `abide proxy` operated: a full queue, credentials, the token beyond loopback, SIGTERM,
//! and two proxies sharing one limit through Redis. No assertion on timing.

#![allow(clippy::unwrap_used)]

use crate::support::proxy::*;
use crate::support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Two proxies on the Redis at `redis`, each with 40 callers at once, against a provider
/// limited to 20/s (burst 5): `prefixes` are their coordination key prefixes (the same: one shared
/// limit). `during` runs once the provider has seen `after` requests. The provider's stats
/// after every caller was answered, and each proxy's `abide_coordination_mode` line that
/// is on followed by its `abide_coordination_nodes` line.
async fn two_proxies_with(
    redis: &str,
    prefixes: [&str; 2],
    after: u64,
    during: impl FnOnce(),
) -> (abide_fake::StatsSnapshot, Vec<String>) {
    const N: usize = 40;
    let p = start_provider(provider_config(20, 5)).await;
    let mut proxies = Vec::new();
    for prefix in prefixes {
        let tables = format!(
            "[coordination]\nredis_url = \"{redis}\"\nkey_prefix = \"{prefix}\"\nexpected_nodes = 2\n"
        );
        // `[coordination]` is a top-level table: after the provider's keys.
        proxies.push(proxy_with(&p, "rate_hint = 10.0", &tables, &[]).await);
    }
    let callers = async {
        tokio::join!(
            post_many(&proxies[0].url, N, "60"),
            post_many(&proxies[1].url, N, "60")
        )
    };
    let meanwhile = async {
        wait_until("the provider to see the first requests", || {
            p.stats().requests >= after
        })
        .await;
        during();
    };
    let ((a, b), ()) = tokio::join!(callers, meanwhile);
    assert!(all_accepted(&a) && all_accepted(&b), "{a:?} {b:?}");
    let s = p.stats();
    assert_eq!(s.accepted, 2 * N as u64, "{s:?}");
    let mut nodes = Vec::new();
    for px in &proxies {
        let m = metrics(&px.url).await;
        // The mode that is on, then the nodes: "...mode=\"redis\"} 1 ...nodes{...} 2".
        let line = |prefix: &str, on: &str| {
            m.lines()
                .find(|l| l.starts_with(prefix) && l.ends_with(on))
                .unwrap_or_else(|| panic!("{m}"))
                .to_owned()
        };
        let mode = line("abide_coordination_mode{", " 1");
        nodes.push(format!("{mode} {}", line("abide_coordination_nodes{", "")));
    }
    (s, nodes)
}

async fn two_proxies(prefixes: [&str; 2]) -> (abide_fake::StatsSnapshot, Vec<String>) {
    two_proxies_with(services::REDIS, prefixes, 0, || {}).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_redis_share_one_limit() {
    if !services::redis_here("two_proxies_on_one_redis_share_one_limit") {
        return;
    }
    let prefix = format!("abide-test-proxy-{}", std::process::id());
    let (s, nodes) = two_proxies([&prefix, &prefix]).await;
    for n in &nodes {
        assert!(
            n.contains("mode=\"redis\"") && n.ends_with(" 2"),
            "{nodes:?}"
        );
    }
    // The nodes line is what shows the sharing. Apart, each would aim at 0.97 of the
    // advertised 20/s, twice the limit together, until the 429s taught it; shared, the pair
    // stays under it, but for a stray refusal when other tests load the 2 cores (a late
    // slot taken with the next one is a burst).
    let throttled = provider_429_per_item(&s, 80);
    assert!(throttled <= 0.025, "{throttled} 429s per message: {s:?}");
}

/// A child process killed when dropped (a failed test leaves no Redis behind).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lost_mid_run_each_proxy_falls_back_to_its_share_and_nothing_is_lost() {
    // A Redis of this test's own, so that it can be killed without touching the shared one.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let spawned = std::process::Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn();
    let Ok(redis) = spawned else {
        assert!(
            !services::required(),
            "ABIDE_REQUIRE_SERVICES=1 but no redis-server"
        );
        println!("SKIPPED: redis_lost_mid_run: no redis-server binary");
        return;
    };
    let mut redis = Killed(redis);
    let url = format!("redis://127.0.0.1:{port}");
    wait_until("the test's Redis to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    let prefix = format!("abide-test-proxy-lost-{}", std::process::id());
    let (s, nodes) = two_proxies_with(&url, [&prefix, &prefix], 20, || {
        redis.0.kill().unwrap();
        redis.0.wait().unwrap();
    })
    .await;
    // Every caller was answered 202 and every message accepted once (checked inside); the
    // fallback share (the pace / the 2 nodes last seen) keeps the pair under the limit.
    println!("after Redis was lost: {nodes:?}; provider {s:?}");
    let throttled = provider_429_per_item(&s, 80);
    assert!(throttled <= 0.1, "{throttled} 429s per message: {s:?}");
    for n in &nodes {
        assert!(
            !n.contains("mode=\"redis\""),
            "still coordinated after Redis died: {nodes:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_is_answered_429_at_once() {
    // Each answer takes 3 s, so the first two callers stay inside while the rest arrive.
    let mut cfg = provider_config(100, 100);
    cfg.latency_ms = 3000;
    let p = start_provider(cfg).await;
    let px = proxy(&p, "", &["--max-waiting", "2"]).await;
    let c = client();
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let (c, url) = (c.clone(), format!("{}/sms/v1/messages", px.url));
            tokio::spawn(async move {
                let r = c
                    .post(url)
                    .json(&serde_json::json!({"to": format!("+1{i}"), "text": "hi"}))
                    .send()
                    .await
                    .unwrap();
                let stopped = r.headers().get("abide-stopped").cloned();
                let ra = r.headers().get("retry-after").cloned();
                (r.status().as_u16(), stopped, ra)
            })
        })
        .collect();
    let mut full = 0;
    for t in tasks {
        let (status, stopped, ra) = tokio::time::timeout(RUN_BOUND, t).await.unwrap().unwrap();
        match status {
            202 => {}
            429 => {
                assert_eq!(stopped.unwrap(), "queue_full");
                let ra: u64 = ra.unwrap().to_str().unwrap().parse().unwrap();
                assert!(ra >= 1);
                full += 1;
            }
            s => panic!("status {s}"),
        }
    }
    assert!(full >= 1, "no caller found the queue full");
    assert_eq!(p.stats().requests, 6 - full, "{:?}", p.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_past_the_memory_bound_are_answered_429_unread() {
    let p = start_provider(provider_config(100, 100)).await;
    let px = proxy(&p, "", &["--max-buffered-total", "64"]).await;
    let c = client();
    let send = |text: String| {
        c.post(format!("{}/sms/v1/messages", px.url))
            .json(&serde_json::json!({"to": "+15550100", "text": text}))
            .send()
    };
    assert_eq!(send("hi".into()).await.unwrap().status(), 202);
    let r = send("x".repeat(100)).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["abide-stopped"], "queue_full");
    assert!(r.text().await.unwrap().contains("max_buffered_total"));
    assert_eq!(p.stats().requests, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_env_the_client_s_authorization_passes_through() {
    let p = start_provider(provider_config(100, 100)).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "providers.toml",
        &format!("[[provider]]\nname = \"sms\"\nbase_url = \"{}\"\n", p.url()),
    );
    let mut child = start(abide(&[
        "proxy",
        "--config",
        cfg.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = first.strip_prefix("listening on ").unwrap();
    let c = client();
    let send = |auth: Option<&str>| {
        let mut r = c
            .post(format!("{url}/sms/v1/messages"))
            .json(&serde_json::json!({"to": "+15550100", "text": "hi"}));
        if let Some(a) = auth {
            r = r.bearer_auth(a);
        }
        r.send()
    };
    assert_eq!(send(None).await.unwrap().status(), 401);
    assert_eq!(
        send(Some(abide_fake::DEMO_KEY)).await.unwrap().status(),
        202
    );
    // A body over the 1 MiB buffering bound streams through once.
    let big = "x".repeat(1_500_000);
    let r = c
        .post(format!("{url}/sms/v1/messages"))
        .bearer_auth(abide_fake::DEMO_KEY)
        .json(&serde_json::json!({"to": "+15550100", "text": big}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    assert_eq!(p.stats().accepted, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_memory_bound_of_zero_is_refused_at_start_naming_the_flag() {
    // With 0 bytes every request would be answered 429 `queue_full` for ever, and clients
    // would retry without end.
    let p = start_provider(provider_config(100, 100)).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "providers.toml",
        &provider_toml("sms", &p.url(), "", ""),
    );
    let cfg = cfg.to_str().unwrap();
    let o = run(abide(&[
        "proxy",
        "--config",
        cfg,
        "--listen",
        "127.0.0.1:0",
        "--max-buffered-total",
        "0",
    ]))
    .await;
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
    let text = show(&o);
    assert!(text.contains("--max-buffered-total"), "{text}");
    assert!(!text.contains("providers.toml: --max"), "{text}");
    assert_eq!(p.stats().requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_beyond_loopback_needs_a_token_sent_as_proxy_authorization() {
    let p = start_provider(provider_config(100, 100)).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "providers.toml",
        &provider_toml("sms", &p.url(), "", ""),
    );
    let cfg = cfg.to_str().unwrap();
    let o = run(abide(&["proxy", "--config", cfg, "--listen", "0.0.0.0:0"])).await;
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(show(&o).contains("--token-env"), "{}", show(&o));
    let mut cmd = abide(&[
        "proxy",
        "--config",
        cfg,
        "--listen",
        "0.0.0.0:0",
        "--token-env",
        "ABIDE_TEST_PROXY_TOKEN",
    ]);
    cmd.env("ABIDE_TEST_PROXY_TOKEN", "s3cret-proxy-token");
    let mut child = start(cmd);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let port = first.rsplit(':').next().unwrap();
    let url = format!("http://127.0.0.1:{port}/sms/v1/messages");
    let c = client();
    let body = serde_json::json!({"to": "+15550100", "text": "hi"});
    for token in [None, Some("s3cret-proxy-tokem")] {
        let mut r = c.post(&url).json(&body);
        if let Some(t) = token {
            r = r.header("proxy-authorization", format!("Bearer {t}"));
        }
        assert_eq!(r.send().await.unwrap().status(), 401, "{token:?}");
    }
    let r = c
        .post(&url)
        .header("proxy-authorization", "Bearer s3cret-proxy-token")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    assert_eq!(p.stats().requests, 1);
    // The proxy's own routes: health for anyone; metrics and stats (provider names, paces,
    // pauses) with the token, in either header.
    let own = |route: &str| format!("http://127.0.0.1:{port}/_abide/{route}");
    assert_eq!(c.get(own("healthz")).send().await.unwrap().status(), 200);
    for route in ["metrics", "stats"] {
        let r = c.get(own(route)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{route}");
        for (field, scheme) in [
            ("proxy-authorization", "Bearer"),
            ("authorization", "bearer"),
        ] {
            let r = c
                .get(own(route))
                .header(field, format!("{scheme} s3cret-proxy-token"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{route} with {field}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_the_requests_inside_then_exits() {
    let mut cfg = provider_config(100, 100);
    cfg.latency_ms = 1500;
    let p = start_provider(cfg).await;
    let mut px = proxy(&p, "", &[]).await;
    let c = client();
    let url = format!("{}/sms/v1/messages", px.url);
    let inside = tokio::spawn(async move {
        c.post(url)
            .json(&serde_json::json!({"to": "+15550100", "text": "hi"}))
            .send()
            .await
            .unwrap()
            .status()
    });
    wait_until("the request on the wire", || p.stats().in_flight == 1).await;
    sigterm(&px.child);
    let status = tokio::time::timeout(RUN_BOUND, inside)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 202);
    let exit = tokio::time::timeout(RUN_BOUND, px.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
