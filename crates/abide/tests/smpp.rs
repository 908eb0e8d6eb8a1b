//! `abide send` over SMPP against the fake SMSC (`abide provider --smpp`, in-process on
//! loopback): kill -9 mid-window and resume, receipts in `abide status`.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use abide_core::SystemClock;
use abide_provider::{spawn_listeners, Listeners, ProviderConfig, RunningProvider};
use support::*;

/// The fake SMSC: `rate` submits/s per bind, each answer held `slow_ms`, receipts 10 ms
/// after acceptance; the bind password is the demo key the `abide` children get in
/// [`TOKEN_ENV`].
async fn smsc(rate: u32, slow_ms: u64) -> RunningProvider {
    let toml = format!(
        r#"
        [limits]
        key_rate = "{rate}/s"
        key_burst = 30
        account_rate = "10000/s"
        [behaviour]
        slow_ms = {slow_ms}
        [smpp]
        receipt_delay_ms = 10
        accounts = [{{ system_id = "abide", password = "{}", account = "acme" }}]
        "#,
        abide_provider::DEMO_KEY
    );
    let listen = Listeners {
        http: None,
        smpp: Some("127.0.0.1:0".parse().unwrap()),
    };
    spawn_listeners(
        ProviderConfig::from_toml_str(&toml).unwrap(),
        Arc::new(SystemClock),
        listen,
    )
    .await
    .unwrap()
}

/// A providers file for the SMSC at `p` and `n` SMS lines for it.
fn files(p: &RunningProvider, n: usize) -> Files {
    let toml = format!(
        "[[provider]]\nname = \"sms\"\ntransport = \"smpp\"\naddress = \"{}\"\n\
         system_id = \"abide\"\npassword_env = \"{TOKEN_ENV}\"\nwindow = 20\n\
         source_addr = \"ACME\"\npdu_timeout = 2\nrate_hint = 300.0\n\
         [provider.budget]\nmin_per_sec = 100\n",
        p.smpp_addr().unwrap()
    );
    let f = Files::new(&toml, 0);
    let lines: String = (0..n)
        .map(|i| {
            format!(
                "{{\"provider\":\"sms\",\"path\":\"/\",\"body\":{{\"to\":\"+4915{i:08}\",\"text\":\"code {i}\"}}}}\n"
            )
        })
        .collect();
    write(f.dir.path(), "in.jsonl", &lines);
    f
}

fn smpp_stats(p: &RunningProvider) -> abide_provider::SmppStats {
    p.stats().smpp.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_window_then_the_next_run_resends_only_unanswered_submits() {
    const N: usize = 1000;
    // Answers held 5 ms: submits are outstanding (a window of 20) when the kill lands.
    let p = smsc(300, 5).await;
    let f = files(&p, N);

    let mut first = start(f.send());
    wait_until("the SMSC to accept a quarter", || {
        smpp_stats(&p).accepted >= (N / 4) as u64
    })
    .await;
    first.start_kill().unwrap(); // SIGKILL: no unbind, leases left behind
    assert!(!first.wait().await.unwrap().success());
    let at_kill = smpp_stats(&p);
    assert!(at_kill.accepted < N as u64, "finished first: {at_kill:?}");
    let st = run(abide(&["status", "--db", &f.db, "--json"])).await;
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let unrecorded = st["counts"]["in_flight"].as_u64().unwrap();

    let second = run(f.send_with(&["--json", "--quiet", "--receipt-wait", "20s"])).await;
    assert_eq!(second.status.code(), Some(0), "{}", show(&second));
    let s = smpp_stats(&p);
    println!(
        "at the kill: accepted {}, unrecorded {unrecorded}; after: accepted {}, repeats {}",
        at_kill.accepted, s.accepted, s.repeats
    );
    // Every message accepted once; a repeat (same key in TLV 0x1400, answered with the
    // first message_id) only of a submit whose answer the dead run never recorded.
    assert_eq!(s.accepted, N as u64, "{s:?}");
    assert!(
        s.repeats <= unrecorded,
        "{} repeats, {unrecorded} unrecorded at the kill: {s:?}",
        s.repeats
    );
    assert_eq!(s.content_repeats, 0);
    let r = report(&second);
    let out = &r["outbox"];
    assert_eq!(out["counts"]["submitted"], N as u64, "{}", show(&second));
    assert_eq!(out["counts"]["failed"], 0);
    // Every receipt stored and mapped to its item, those of the dead run's messages too
    // (acknowledged by it before the kill, or delivered again at the new bind).
    assert_eq!(
        out["receipts"]["delivered"], N as u64,
        "{}",
        out["receipts"]
    );
    assert_eq!(out["receipts"]["unmatched"], 0, "{}", out["receipts"]);
    assert_eq!(out["remote_counts"]["smpp_0x00"], N as u64);
    assert_eq!(r["providers"][0]["smpp"]["binds"], 1, "{r}");
    // The password is the demo key: never printed.
    assert!(!String::from_utf8_lossy(&second.stderr).contains(abide_provider::DEMO_KEY));
    assert!(!String::from_utf8_lossy(&second.stdout).contains(abide_provider::DEMO_KEY));

    // `abide status` shows the receipts, and `--list submitted` the message ids.
    let st = run(abide(&["status", "--db", &f.db])).await;
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(text.contains("delivery receipts"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("delivered") && l.contains(&N.to_string())),
        "{text}"
    );
    let list = run(abide(&[
        "status",
        "--db",
        &f.db,
        "--list",
        "submitted",
        "--limit",
        "3",
        "--json",
    ]))
    .await;
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    for it in list["items"].as_array().unwrap() {
        assert_eq!(it["receipt"], "delivered", "{it}");
        assert_eq!(it["message_id"].as_str().unwrap().len(), 10, "{it}");
    }
    p.shutdown().await.unwrap();
}

/// examples/smpp.toml and examples/sms.jsonl work as the README says, against the fake
/// SMSC's defaults (only the address differs: a free port here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smpp_example_files_deliver_with_receipts() {
    let listen = Listeners {
        http: None,
        smpp: Some("127.0.0.1:0".parse().unwrap()),
    };
    let mut cfg = ProviderConfig::default();
    cfg.smpp.receipt_delay_ms = 10;
    let p = spawn_listeners(cfg, Arc::new(SystemClock), listen)
        .await
        .unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
    let toml = std::fs::read_to_string(format!("{root}smpp.toml"))
        .unwrap()
        .replace("127.0.0.1:2775", &p.smpp_addr().unwrap().to_string());
    let f = Files::new(&toml, 0);
    let input = format!("{root}sms.jsonl");
    let mut send = abide(&[
        "send",
        "--config",
        f.cfg.to_str().unwrap(),
        "--db",
        &f.db,
        "--json",
        "--quiet",
        "--receipt-wait",
        "20s",
        &input,
    ]);
    send.env("ABIDE_SMSC_PASSWORD", abide_provider::DEMO_PASSWORD);
    let out = run(send).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r = report(&out);
    assert_eq!(r["outbox"]["counts"]["submitted"], 20, "{r}");
    assert_eq!(r["outbox"]["receipts"]["delivered"], 20, "{r}");
    // Four lines need UCS-2 (an en dash); the SMSC accepted all twenty once.
    assert_eq!(smpp_stats(&p).accepted, 20);
    assert_eq!(smpp_stats(&p).repeats, 0);
    p.shutdown().await.unwrap();
}
