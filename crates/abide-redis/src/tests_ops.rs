//! The operations view (who is seen, who paused, the shared rate), clear errors for a
//! refused Redis, and a node starting while Redis is down. Against the Redis on
//! 127.0.0.1:6379 (skipped with `SKIPPED:` when absent, failing under
//! `ABIDE_REQUIRE_SERVICES=1`), a closed port, and a redis-server of the test's own with
//! `--requirepass` on a free port (skipped when `redis-server` is not installed).

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use abide_core::{
    Classifier, Clock, Coordination, CoordinationMode, ManualClock, Observation, Pacer,
    PacerConfig, Reservation, RetryBudgetConfig, SystemClock,
};

use super::*;

const URL: &str = "redis://127.0.0.1:6379";

fn prefix(test: &str) -> String {
    format!("abide-test:{test}:{}", uuid::Uuid::new_v4().simple())
}

/// Whether the shared Redis answers; prints why a test is skipped when it does not.
async fn redis_up(test: &str) -> bool {
    match probe(URL, Duration::from_secs(3)).await {
        Ok(()) => true,
        Err(e) if std::env::var("ABIDE_REQUIRE_SERVICES").as_deref() != Ok("1") => {
            println!("SKIPPED: {test}: no Redis at {URL} ({e})");
            false
        }
        Err(e) => panic!("ABIDE_REQUIRE_SERVICES=1 but Redis at {URL} is unreachable: {e}"),
    }
}

fn pacer(rate: f64, clock: &dyn Clock) -> Pacer {
    Pacer::new(
        PacerConfig {
            initial_rate: rate,
            ..PacerConfig::default()
        },
        clock.monotonic(),
    )
}

fn start(
    url: &str,
    prefix: &str,
    node: &str,
    expected: u32,
    clock: Arc<dyn Clock>,
) -> RedisCoordination {
    let target = CoordinationTarget {
        url: url.into(),
        prefix: prefix.into(),
        node: node.into(),
        expected_nodes: expected,
    };
    let budget = RetryBudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec: 0,
        retry_ratio: 0.0,
    };
    RedisCoordination::start(&target, "sms", 60.0, 1.0, budget, clock).unwrap()
}

/// Poll `done` every 10 ms, at most 3 s (bounded; not a timing assertion).
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..300 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

#[tokio::test]
async fn status_and_the_shared_view_name_the_nodes_the_pause_and_who_set_it() {
    if !redis_up("ops view").await {
        return;
    }
    let key = prefix("opsview");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let a = start(URL, &key, "node-a", 2, Arc::clone(&clock));
    let b = start(URL, &key, "node-b", 2, Arc::clone(&clock));
    let (pa, pb) = (pacer(60.0, &*clock), pacer(60.0, &*clock));
    let mono = || clock.monotonic();
    // Demand, so both sync and learn of each other.
    let _ = (a.reserve(&pa, mono(), None), b.reserve(&pb, mono(), None));
    let both = |c: &RedisCoordination, p: &Pacer| {
        let s = c.status(p, mono());
        s.mode == CoordinationMode::Redis && s.peers.len() == 2
    };
    assert!(eventually(|| both(&a, &pa) && both(&b, &pb)).await);
    let s = b.status(&pb, mono());
    assert!(!s.nodes_assumed && s.fallback_for.is_none(), "{s:?}");
    let names: Vec<&str> = s.peers.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(names, ["node-a", "node-b"]);
    assert!(
        s.peers
            .iter()
            .all(|p| p.last_seen_ago < Duration::from_secs(2)),
        "{s:?}"
    );
    // Node a hears a 429 with Retry-After: 30 and shares its pause and rate.
    let headers = http::HeaderMap::from_iter([(http::header::RETRY_AFTER, "30".parse().unwrap())]);
    let obs = Observation::Http {
        status: http::StatusCode::TOO_MANY_REQUESTS,
        headers: &headers,
        body: b"",
    };
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
    let v = Classifier::default().classify(&obs, clock.now(), &mut rng);
    pa.on_verdict(mono(), &v);
    a.push(&pa, mono());
    let told = || {
        let s = b.status(&pb, mono());
        s.pause_by.as_deref() == Some("node-a") && s.shared_rate.is_some()
    };
    assert!(eventually(told).await, "{:?}", b.status(&pb, mono()));
    assert!(b
        .status(&pb, mono())
        .paused_until
        .is_some_and(|u| u > mono() + Duration::from_secs(25)));
    // The same from outside any node (abide status --redis).
    let limits = look(URL, &key, Duration::from_secs(2)).await.unwrap();
    assert_eq!(limits.len(), 1, "{limits:?}");
    let l = &limits[0];
    assert_eq!(l.key, format!("{key}:sms"));
    assert_eq!((l.node_count, l.nodes.len()), (2, 2), "{l:?}");
    assert_eq!(l.pause_by.as_deref(), Some("node-a"));
    let until = l.paused_until.unwrap();
    assert!(until > clock.now() + Duration::from_secs(25), "{l:?}");
    assert!(l.rate.is_some(), "{l:?}");
    assert!(l.nodes.iter().all(|n| n.mode == "redis"), "{l:?}");
}

#[tokio::test]
async fn a_refused_password_or_database_is_a_config_error_naming_the_url_redacted() {
    // Not installed: nothing to refuse. The closed port is unreachable either way.
    match probe("redis://:hunter2@127.0.0.1:1", Duration::from_secs(1)).await {
        Err(ProbeError::Unreachable { url, .. }) => assert!(!url.contains("hunter2"), "{url}"),
        other => panic!("{other:?}"),
    }
    if !redis_up("refused").await {
        return;
    }
    // Redis 7 without requirepass answers AUTH with a password with an error ("called
    // without any password configured"), not with OK: a wrong password in the URL.
    let e = probe("redis://:hunter2@127.0.0.1:6379", Duration::from_secs(2))
        .await
        .unwrap_err();
    let ProbeError::Config { url, message } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(url, "redis://:***@127.0.0.1:6379");
    assert!(message.contains("password"), "{message}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    // A user and password pair it does not know: WRONGPASS (redis-rs reads it as
    // "Password authentication failed").
    let e = probe(
        "redis://nobody:hunter2@127.0.0.1:6379",
        Duration::from_secs(2),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&e, ProbeError::Config { message, .. } if message.contains("authentication failed")),
        "{e:?}"
    );
    // A database the server does not have.
    let e = probe("redis://127.0.0.1:6379/999", Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProbeError::Config { message, .. } if message.contains("database number")),
        "{e:?}"
    );
}

/// A redis-server of this test's own, with a password, on a free port; killed on drop.
struct OwnRedis {
    child: std::process::Child,
    port: u16,
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// `redis-server` on `port` with `args`, or `None` (printing `SKIPPED:`) if it cannot run.
fn own_redis(port: u16, args: &[&str]) -> Option<OwnRedis> {
    let port_s = port.to_string();
    let child = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port_s,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(args)
        .stdout(std::process::Stdio::null())
        .spawn();
    match child {
        Ok(child) => Some(OwnRedis { child, port }),
        Err(e) => {
            println!("SKIPPED: no redis-server to run ({e})");
            None
        }
    }
}

#[tokio::test]
async fn a_server_with_requirepass_refuses_a_wrong_password_and_takes_the_right_one() {
    let Some(r) = own_redis(free_port(), &["--requirepass", "right-one"]) else {
        return;
    };
    let good = format!("redis://:right-one@127.0.0.1:{}", r.port);
    // Bounded wait for it to listen (not a timing assertion).
    let mut up = false;
    for _ in 0..100 {
        if probe(&good, Duration::from_secs(1)).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(up, "own redis-server on {} never answered", r.port);
    let bad = format!("redis://:wrong-one@127.0.0.1:{}", r.port);
    let e = probe(&bad, Duration::from_secs(2)).await.unwrap_err();
    let ProbeError::Config { url, message } = &e else {
        panic!("{e:?}")
    };
    assert!(
        message.contains("authentication failed")
            && message.contains("check the user and password"),
        "{message}"
    );
    assert!(
        !url.contains("wrong-one") && !message.contains("wrong-one"),
        "{e}"
    );
    // No password at all: NOAUTH on the first command.
    let none = format!("redis://127.0.0.1:{}", r.port);
    let e = probe(&none, Duration::from_secs(2)).await.unwrap_err();
    assert!(
        matches!(&e, ProbeError::Config { message, .. } if message.contains("NOAUTH")),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_node_starting_while_redis_is_down_sends_only_its_assumed_share_and_says_so() {
    // Port 1 on loopback: nothing listens. Three nodes expected, 60/s: 20/s each.
    let clock = Arc::new(ManualClock::new(UNIX_EPOCH));
    let c = start(
        "redis://127.0.0.1:1",
        &prefix("cold"),
        "a",
        3,
        clock.clone() as Arc<dyn Clock>,
    );
    let p = pacer(60.0, &*clock);
    assert!(
        eventually(|| c.status(&p, clock.monotonic()).mode == CoordinationMode::Fallback).await
    );
    let t0 = clock.monotonic();
    let slots: Vec<_> = (0..4)
        .map(|_| match c.reserve(&p, t0, None) {
            Reservation::Slot(at) => at - t0,
            r => panic!("{r:?}"),
        })
        .collect();
    let ms = Duration::from_millis;
    assert_eq!(
        slots,
        [ms(0), ms(50), ms(100), ms(150)],
        "a third of 60/s, not all of it"
    );
    clock.advance(Duration::from_secs(7));
    let s = c.status(&p, clock.monotonic());
    assert_eq!((s.nodes, s.nodes_assumed), (3, true), "{s:?}");
    assert!(
        (s.share - 1.0 / 3.0).abs() < 1e-9,
        "the share it sends: {s:?}"
    );
    assert!(
        s.fallback_for.is_some_and(|d| d >= Duration::from_secs(7)),
        "{s:?}"
    );
    // Never alone at full rate, even with a count of 0 configured by mistake (floor 1).
    let lone = start(
        "redis://127.0.0.1:1",
        &prefix("cold"),
        "b",
        0,
        clock.clone() as Arc<dyn Clock>,
    );
    assert!(
        eventually(|| lone.status(&p, clock.monotonic()).mode == CoordinationMode::Fallback).await
    );
    assert_eq!(lone.status(&p, clock.monotonic()).nodes, 1);
}

#[tokio::test]
async fn a_node_that_started_with_redis_down_joins_when_it_answers() {
    // An own redis-server that is not started yet: the port is free, nothing listens.
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let c = start(&url, &prefix("join"), "late", 4, Arc::clone(&clock));
    let p = pacer(60.0, &*clock);
    let _ = c.reserve(&p, clock.monotonic(), None);
    assert!(
        eventually(|| c.status(&p, clock.monotonic()).mode == CoordinationMode::Fallback).await
    );
    assert_eq!(c.status(&p, clock.monotonic()).nodes, 4);
    let Some(_r) = own_redis(port, &[]) else {
        return;
    };
    let joined = || {
        let _ = c.reserve(&p, clock.monotonic(), None);
        let s = c.status(&p, clock.monotonic());
        s.mode == CoordinationMode::Redis && !s.nodes_assumed
    };
    assert!(
        eventually(joined).await,
        "{:?}",
        c.status(&p, clock.monotonic())
    );
    let s = c.status(&p, clock.monotonic());
    assert_eq!(
        s.nodes, 1,
        "the heartbeats count, not the assumption: {s:?}"
    );
    assert!(s.fallback_for.is_none());
}

#[tokio::test]
async fn after_an_outage_a_node_falls_back_then_returns_to_redis_mode() {
    // An own redis-server (never the shared one): stopped and started again on its port.
    let port = free_port();
    let Some(first) = own_redis(port, &[]) else {
        return;
    };
    let url = format!("redis://127.0.0.1:{port}");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let c = start(&url, &prefix("outage"), "n", 2, Arc::clone(&clock));
    let p = pacer(60.0, &*clock);
    let mode = || {
        let _ = c.reserve(&p, clock.monotonic(), None);
        c.status(&p, clock.monotonic()).mode
    };
    // Joined: in redis mode by a sync (not the mode it starts in), nodes counted.
    let joined =
        || mode() == CoordinationMode::Redis && !c.status(&p, clock.monotonic()).nodes_assumed;
    assert!(eventually(joined).await);
    drop(first);
    assert!(eventually(|| mode() == CoordinationMode::Fallback).await);
    let s = c.status(&p, clock.monotonic());
    assert!(s.fallback_for.is_some() && !s.nodes_assumed, "{s:?}");
    let Some(_second) = own_redis(port, &[]) else {
        return;
    };
    assert!(
        eventually(|| mode() == CoordinationMode::Redis).await,
        "{:?}",
        c.status(&p, clock.monotonic())
    );
    assert!(c.status(&p, clock.monotonic()).fallback_for.is_none());
}

#[test]
fn the_limit_key_follows_the_credential_through_a_digest_never_the_credential() {
    let a = limit_key("sms", Some("key-of-account-1"));
    let b = limit_key("sms", Some("key-of-account-1"));
    let c = limit_key("sms", Some("key-of-account-2"));
    assert_eq!(a, b, "the same key: one limit");
    assert_ne!(a, c, "another key: another limit");
    assert!(a.starts_with("sms:") && a.len() == "sms:".len() + 16, "{a}");
    assert!(!a.contains("account"), "{a}");
    // No credential known: the provider's name alone, as before.
    assert_eq!(limit_key("sms", None), "sms");
    assert_eq!(limit_key("sms", Some("")), "sms");
}
