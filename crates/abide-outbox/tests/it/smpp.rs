//! The dispatcher over SMPP against a tiny loopback SMSC (`support::smsc`): real TCP,
//! real SQLite, real time kept to seconds (short throttle pauses).

use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, NewItem, Request, SqliteStore, State, StaticCredentials,
    Store, TransportStats,
};
use serde_json::json;

use crate::support::smsc::{Smsc, PASSWORD};

/// `rate_hint` above the SMSC's limit: throttles from the start (SMPP advertises no
/// limit, so without a hint the pacer climbs from its cold start for seconds).
fn config(addr: &str, window: usize) -> Config {
    Config::from_toml_str(&format!(
        r#"
        [[provider]]
        name = "smsc"
        transport = "smpp"
        address = "{addr}"
        system_id = "abide"
        password_env = "IT_SMSC_PASSWORD"
        window = {window}
        source_addr = "ACME"
        pdu_timeout = 2
        rate_hint = 1500
        [provider.pacer]
        throttle_pause_ms = 100
        max_throttle_pause_secs = 1
        "#
    ))
    .unwrap()
}

fn sms(n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| {
            let body = json!({"to": format!("+4917{i:08}"), "text": format!("code {i}")});
            NewItem::new("smsc", Request::post_json("/", body))
                .with_idempotency_key(format!("sms-{i}"))
        })
        .collect()
}

fn opts() -> DispatcherOptions {
    DispatcherOptions {
        maintenance_interval: Duration::from_millis(100),
        idle_poll: Duration::from_millis(50),
        seed: Some(13),
        credentials: Some(Arc::new(
            StaticCredentials::new().with("IT_SMSC_PASSWORD", PASSWORD),
        )),
        ..DispatcherOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sms_is_accepted_once_throttles_never_fail_and_every_receipt_maps_back() {
    const N: usize = 2_000;
    // 0x58 / 0x14 beyond 1,000/s; the connection drops at the 700th submit, unanswered.
    let smsc = Smsc::spawn(1_000.0, 700).await;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("o.db")).await.unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let d = Dispatcher::new(store, config(&smsc.addr, 32), clock, opts()).unwrap();
    for chunk in sms(N).chunks(500) {
        d.enqueue(chunk).await.unwrap();
    }
    let watcher = d.clone();
    let run = d.run_until(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let p = watcher.progress().await.unwrap();
            if p.counts.active() == 0 && p.receipts.total() >= N as u64 {
                return;
            }
        }
    });
    let p = match tokio::time::timeout(Duration::from_secs(60), run).await {
        Ok(p) => p.unwrap(),
        Err(_) => panic!("not done within 60 s: {:?}", d.progress().await.unwrap()),
    };
    d.close().await;
    println!(
        "{:?} {:?}\n{:?}",
        p.elapsed, p.totals, p.providers[0].transport
    );

    assert_eq!(p.counts.submitted, N as u64, "{:?}", p.counts);
    assert_eq!(p.counts.failed, 0, "a throttle never fails an item");
    let books = std::mem::take(&mut *smsc.books());
    assert!(
        books.throttle_codes.len() == 2,
        "the SMSC throttled with both codes: {:?}",
        books.throttle_codes
    );
    assert_eq!(books.per_key.len(), N, "every message reached the SMSC");
    // The submit lost with the connection may have been accepted before the drop; its
    // resend (same key) is then a repeat the SMSC recognises. Nothing else repeats.
    let repeats: usize = books.per_key.values().map(|n| n - 1).sum();
    assert!(repeats <= 1, "{repeats} repeats");
    assert_eq!(books.binds, 2, "bound, dropped, bound again");
    assert_eq!(books.unbinds, 1, "unbound on close");
    // Every accepted message's receipt is stored and matched, including those of items
    // throttled first.
    assert_eq!(p.receipts.delivered, N as u64, "{:?}", p.receipts);
    assert_eq!(p.receipts.unmatched, 0);
    // Acknowledged only once stored, never refused; receipts whose answer was due on the
    // dropped connection were stored but not acknowledged (an SMSC delivers them again).
    assert_eq!(books.receipts_refused, 0);
    assert!(books.receipts_acked > N - 200, "{}", books.receipts_acked);
    let throttled_first = d
        .store()
        .list(&abide_outbox::ListFilter {
            state: Some(State::Submitted),
            limit: N,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.attempts > 1)
        .collect::<Vec<_>>();
    assert!(throttled_first.len() >= 2);
    for it in throttled_first.iter().take(20) {
        assert!(it.message_id.is_some());
        let r = d.store().receipt_of(&it.id).await.unwrap();
        assert!(
            r.is_some(),
            "receipt of {} (attempts {})",
            it.id,
            it.attempts
        );
    }
    let smpp = *p.providers[0]
        .transport
        .as_ref()
        .and_then(TransportStats::smpp)
        .unwrap();
    assert_eq!((smpp.binds, smpp.connections_lost), (2, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_sms_is_refused_at_enqueue_and_nothing_is_stored() {
    let d = Dispatcher::new(
        SqliteStore::open(":memory:").await.unwrap(),
        config("127.0.0.1:9", 4),
        Arc::new(SystemClock),
        opts(),
    )
    .unwrap();
    let mut items = sms(3);
    items[1].request = Request::post_json("/", json!({"to": "+49", "text": "😀"}));
    let err = d.enqueue(&items).await.unwrap_err().to_string();
    assert!(err.contains("outside UCS-2"), "{err}");
    assert_eq!(d.store().counts_by_state(None).await.unwrap().total(), 0);
}
