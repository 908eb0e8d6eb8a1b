//! SMPP end to end: items per second claimed from SQLite, sent as `submit_sm` over one
//! loopback bind to the fake SMSC (`abide provider --smpp`, on its own thread), answered,
//! and committed; and, against a rate-limited SMSC, throttles per message once converged.
//!
//! ```text
//! cargo bench -p abide-outbox --bench smpp -- --window 64                # throughput
//! cargo bench -p abide-outbox --bench smpp -- --window 10 --rate 100 --items 6000
//! ```
//!
//! "Converged" is the second half of the deliveries: throttles heard after the
//! `items/2`-th delivery, per message delivered after it.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{spawn_listeners, Listeners, ProviderConfig as FakeConfig, SmppStats};
use abide_outbox::{
    Config, Dispatcher, DispatcherOptions, NewItem, Request, SqliteStore, StaticCredentials,
};
use support::Args;

const USAGE: &str = "\
smpp: submit_sm end to end on SQLite over one loopback bind to the fake SMSC

cargo bench -p abide-outbox --bench smpp -- [OPTIONS]
  --items N       SMS to enqueue and deliver (default 20000)
  --window N      outstanding submit_sm and senders (default 64)
  --rate R        the SMSC's limit, submit_sm per second (default 0: unlimited); over it
                  0x58, over --window outstanding 0x14
  --rate-hint R   the pacer's start, per second (default: 1000000 unlimited, none limited)
  --workers N     tokio worker threads of the outbox runtime (default 2)";

const PASSWORD: &str = "bench-pw";

struct SmscThread {
    addr: String,
    stop: tokio::sync::oneshot::Sender<()>,
    join: std::thread::JoinHandle<SmppStats>,
}

fn start_smsc(rate: u32, window: usize) -> SmscThread {
    let limits = if rate == 0 {
        String::new()
    } else {
        format!(
            "key_rate = \"{rate}/s\"\nkey_burst = {}\nkey_concurrency = {window}\n",
            (rate / 10).max(1)
        )
    };
    let toml = format!(
        "[limits]\n{limits}account_rate = \"1000000/s\"\n[smpp]\nreceipts = \"never\"\n\
         window_cap = 10000\naccounts = [{{ system_id = \"bench\", password = \"{PASSWORD}\" }}]\n"
    );
    let mut cfg = FakeConfig::from_toml_str(&toml).expect("smsc config");
    if rate == 0 {
        cfg.limits.key_rate = None;
        cfg.limits.key_burst = None;
        cfg.limits.account_rate = None;
        cfg.limits.account_burst = None;
        cfg.limits.key_concurrency = None;
        cfg.limits.account_concurrency = None;
    }
    cfg.latency_ms = 0;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let join = std::thread::Builder::new()
        .name("smsc".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("smsc runtime");
            rt.block_on(async move {
                let listen = Listeners {
                    http: None,
                    smpp: Some("127.0.0.1:0".parse().unwrap()),
                };
                let p = spawn_listeners(cfg, Arc::new(SystemClock), listen)
                    .await
                    .expect("smsc starts");
                addr_tx.send(p.smpp_addr().unwrap().to_string()).unwrap();
                let _ = stop_rx.await;
                p.stats().smpp.unwrap_or_default()
            })
        })
        .expect("smsc thread");
    let addr = addr_rx.recv().expect("smsc addr");
    SmscThread { addr, stop, join }
}

fn sms(n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| {
            let body =
                serde_json::json!({"to": format!("+4915{i:08}"), "text": "your code is 123456"});
            NewItem::new("smsc", Request::post_json("/", body))
                .with_idempotency_key(format!("b-{i}"))
        })
        .collect()
}

fn main() {
    let args = Args::parse(USAGE);
    support::only_under_cargo_bench(&args, "smpp");
    let items: usize = args.get("items", 20_000, USAGE);
    let window: usize = args.get("window", 64, USAGE);
    let rate: u32 = args.get("rate", 0, USAGE);
    let workers: usize = args.get("workers", 2, USAGE);
    let hint = match (args.opt("rate-hint"), rate) {
        (Some(h), _) => format!("rate_hint = {h}\n"),
        (None, 0) => "rate_hint = 1000000.0\n".to_owned(),
        (None, _) => String::new(),
    };
    let smsc = start_smsc(rate, window);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = Config::from_toml_str(&format!(
        "[[provider]]\nname = \"smsc\"\ntransport = \"smpp\"\naddress = \"{}\"\n\
         system_id = \"bench\"\npassword_env = \"ABIDE_BENCH_SMSC\"\nwindow = {window}\n\
         source_addr = \"ABIDE\"\n{hint}",
        smsc.addr
    ))
    .expect("config");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (elapsed, progress, half) = rt.block_on(async {
        let store = SqliteStore::open(tmp.path().join("bench.db"))
            .await
            .expect("store");
        let opts = DispatcherOptions {
            seed: Some(1),
            credentials: Some(Arc::new(
                StaticCredentials::new().with("ABIDE_BENCH_SMSC", PASSWORD),
            )),
            ..DispatcherOptions::default()
        };
        let d = Dispatcher::new(store, config, Arc::clone(&clock), opts).expect("dispatcher");
        for chunk in sms(items).chunks(5_000) {
            d.enqueue(chunk).await.expect("enqueue");
        }
        let half = Arc::new(std::sync::Mutex::new(None));
        let t0 = clock.monotonic();
        let stop = {
            let (d, half) = (d.clone(), Arc::clone(&half));
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let t = d.totals();
                    if t.delivered >= (items / 2) as u64 {
                        half.lock().unwrap().get_or_insert(t);
                    }
                    if t.delivered >= items as u64 {
                        return;
                    }
                }
            }
        };
        let progress = d.run_until(stop).await.expect("run");
        let elapsed = clock.monotonic() - t0;
        d.close().await;
        let half = half.lock().unwrap().expect("half way");
        (elapsed, progress, half)
    });
    drop(rt);
    let _ = smsc.stop.send(());
    let saw = smsc.join.join().expect("smsc thread");

    let t = progress.totals;
    let second_half = t.delivered - half.delivered;
    let throttles_converged = (t.throttled - half.throttled) as f64 / second_half.max(1) as f64;
    println!(
        "smpp bench: SQLite, one bind, window {window}, SMSC limit {}, release={}",
        if rate == 0 {
            "none".to_owned()
        } else {
            format!("{rate}/s")
        },
        !cfg!(debug_assertions)
    );
    println!(
        "  delivered {} in {:.3} s = {:.0} SMS/s; attempts {}, throttled {} ({:.4}/message; {:.4} in the second half)",
        t.delivered,
        elapsed.as_secs_f64(),
        t.delivered as f64 / elapsed.as_secs_f64(),
        t.attempts,
        t.throttled,
        t.throttled as f64 / t.delivered.max(1) as f64,
        throttles_converged
    );
    println!(
        "  SMSC: accepted {} repeats {} throttled {} by status {:?}",
        saw.accepted, saw.repeats, saw.throttled, saw.responses_by_status
    );
    println!(
        "RESULT window={window} rate={rate} items={items} secs={:.3} sms_per_s={:.0} throttles_per_msg={:.4} converged={:.4} pace_end={:.1}",
        elapsed.as_secs_f64(),
        t.delivered as f64 / elapsed.as_secs_f64(),
        t.throttled as f64 / t.delivered.max(1) as f64,
        throttles_converged,
        progress.providers[0].rate
    );
    if saw.accepted != items as u64 || saw.repeats != 0 {
        eprintln!("FAILED: every SMS must be accepted once");
        std::process::exit(1);
    }
}
