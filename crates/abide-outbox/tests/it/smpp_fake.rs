//! Acceptance (issue 13): the dispatcher over SMPP against `abide provider --smpp`, the
//! fake SMSC, in-process on loopback: real TCP, real SQLite, real time kept to seconds.
//! The SMSC checks exactly-once by the idempotency key in TLV 0x1400 and counts repeats.

use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{spawn_listeners, Listeners, ProviderConfig as FakeConfig, RunningProvider};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, NewItem, Progress, Request, SqliteStore,
    StaticCredentials, TransportStats,
};
use serde_json::json;

const PASSWORD: &str = "s3cret";

/// The fake SMSC: 1,000 submits/s per bind (0x58 beyond), at most `concurrency`
/// outstanding (0x14 beyond), receipts 20 ms after acceptance, and `schedule` quirks.
async fn smsc(concurrency: u32, schedule: &str) -> RunningProvider {
    let toml = format!(
        r#"
        [limits]
        key_rate = "1000/s"
        key_burst = 50
        account_rate = "10000/s"
        key_concurrency = {concurrency}
        [smpp]
        receipt_delay_ms = 20
        accounts = [{{ system_id = "abide", password = "{PASSWORD}", account = "acme" }}]
        {schedule}
        "#
    );
    let cfg = FakeConfig::from_toml_str(&toml).unwrap();
    let listen = Listeners {
        http: None,
        smpp: Some("127.0.0.1:0".parse().unwrap()),
    };
    spawn_listeners(cfg, Arc::new(SystemClock), listen)
        .await
        .unwrap()
}

fn config(addr: &str, window: usize) -> Config {
    Config::from_toml_str(&format!(
        r#"
        [[provider]]
        name = "smsc"
        transport = "smpp"
        address = "{addr}"
        system_id = "abide"
        password_env = "IT_FAKE_SMSC_PASSWORD"
        window = {window}
        source_addr = "ACME"
        pdu_timeout = 2
        rate_hint = 1500
        [provider.pacer]
        throttle_pause_ms = 100
        max_throttle_pause_secs = 1
        [provider.retry]
        max_attempts = 100
        "#
    ))
    .unwrap()
}

fn opts() -> DispatcherOptions {
    DispatcherOptions {
        maintenance_interval: Duration::from_millis(100),
        idle_poll: Duration::from_millis(50),
        seed: Some(21),
        credentials: Some(Arc::new(
            StaticCredentials::new().with("IT_FAKE_SMSC_PASSWORD", PASSWORD),
        )),
        ..DispatcherOptions::default()
    }
}

fn sms(n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| {
            let body = json!({"to": format!("+4915{i:08}"), "text": format!("Your code is {i}")});
            NewItem::new("smsc", Request::post_json("/", body))
                .with_idempotency_key(format!("otp-{i}"))
        })
        .collect()
}

/// Run until every item is finished and `receipts` receipts are stored, within `within`.
async fn run(d: &Dispatcher<SqliteStore>, receipts: u64, within: Duration) -> Progress {
    let watcher = d.clone();
    let done = async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let p = watcher.progress().await.unwrap();
            if p.counts.active() == 0 && p.receipts.total() >= receipts {
                return;
            }
        }
    };
    match tokio::time::timeout(within, d.run_until(done)).await {
        Ok(p) => p.unwrap(),
        Err(_) => panic!(
            "not done within {within:?}: {:?}",
            d.progress().await.unwrap()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_sms_through_a_throttling_smsc_exactly_once_with_every_receipt() {
    const N: usize = 2_000;
    // Beyond the rate limit (0x58) and a window of 32 against a concurrency of 28 (0x14),
    // 0.2 % of submits refused whatever the load: 0x58 up to the 1,000th, 0x14 after it.
    // Every connection dropped at the 700th submit, answers outstanding.
    let p = smsc(
        28,
        "[behaviour]\ncongestion = 0.002\n\
         [[schedule]]\nat_request = 700\ndrop_connections = true\n\
         [[schedule]]\nat_request = 1000\nsmpp_status = 20",
    )
    .await;
    let addr = p.smpp_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("o.db")).await.unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let d = Dispatcher::new(store, config(&addr, 32), clock, opts()).unwrap();
    for chunk in sms(N).chunks(500) {
        d.enqueue(chunk).await.unwrap();
    }
    let progress = run(&d, N as u64, Duration::from_secs(90)).await;
    d.close().await;
    let saw = p.stats().smpp.unwrap();
    let ours = *progress.providers[0]
        .transport
        .as_ref()
        .and_then(TransportStats::smpp)
        .unwrap();
    println!(
        "{:?} {:?}\nours {ours:?}\nsmsc accepted {} repeats {} throttled {} by status {:?} binds {:?} dropped {:?}",
        progress.elapsed,
        progress.totals,
        saw.accepted,
        saw.repeats,
        saw.throttled,
        saw.responses_by_status,
        saw.binds,
        saw.connections_dropped
    );

    // What abide decided: everything accepted, nothing failed or deferred by a throttle.
    let c = progress.counts;
    assert_eq!(
        (c.submitted, c.failed, c.deferred),
        (N as u64, 0, 0),
        "{c:?}"
    );
    // What the SMSC saw: each message accepted once; both throttle codes; repeats only of
    // submits whose answer was lost with the connection (at most a window), once each.
    assert_eq!(saw.accepted, N as u64);
    let status = |s: &str| saw.responses_by_status.get(s).copied().unwrap_or(0);
    assert!(status("0x00000058") > 0, "{:?}", saw.responses_by_status);
    assert!(status("0x00000014") > 0, "{:?}", saw.responses_by_status);
    assert!(saw.repeats <= 32, "{} repeats", saw.repeats);
    assert!(saw.repeats_by_key.values().all(|&n| n == 1));
    assert_eq!(saw.content_repeats, 0, "every submit_sm carried its key");
    assert!(saw.binds.get("transceiver").copied().unwrap_or(0) >= 2);
    assert!(ours.connections_lost >= 1 && ours.binds >= 2, "{ours:?}");
    // Receipts: one per accepted message, each mapped back to its item, including items
    // throttled first; none unmatched.
    let r = progress.receipts;
    assert_eq!((r.delivered, r.unmatched), (N as u64, 0), "{r:?}");
    assert!(progress.totals.throttled > 0);
    p.shutdown().await.unwrap();
}
