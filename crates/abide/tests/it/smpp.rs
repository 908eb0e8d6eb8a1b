//! `abide send` over SMPP against the fake SMSC (`abide provider --smpp`, in-process on
//! loopback): kill -9 mid-window and resume, receipts in `abide status`.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::*;
use abide_core::SystemClock;
use abide_fake::{spawn_listeners, Listeners, ProviderConfig, RunningProvider};

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
        abide_fake::DEMO_KEY
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

fn smpp_stats(p: &RunningProvider) -> abide_fake::SmppStats {
    p.stats().smpp.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_window_then_the_next_run_resends_only_unanswered_submits() {
    const N: usize = 1000;
    // Answers held 5 ms: submits are outstanding (a window of 20) when the kill lands.
    let p = smsc(300, 5).await;
    let f = files(&p, N);

    let mut first = start(f.send());
    wait_until_while_running(&mut first, "the SMSC to accept a quarter", || {
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
    assert!(!String::from_utf8_lossy(&second.stderr).contains(abide_fake::DEMO_KEY));
    assert!(!String::from_utf8_lossy(&second.stdout).contains(abide_fake::DEMO_KEY));

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

/// examples/smpp.toml and examples/sms.jsonl work as docs/smpp.md says, against the fake
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
    send.env("ABIDE_SMSC_PASSWORD", abide_fake::DEMO_PASSWORD);
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

/// A wrong password: the SMSC answers the one bind `ESME_RINVPASWD`; `send` stops with
/// exit 4 naming the status and the field (never the value), binds no second time, and
/// every item waits in the outbox for the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_stops_send_at_once_and_keeps_every_item() {
    const N: usize = 50;
    let p = smsc(300, 0).await;
    let f = files(&p, N);
    let mut send = f.send();
    send.env(TOKEN_ENV, "nope1234");
    let out = run(send).await;
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ESME_RINVPASWD"), "{err}");
    assert!(
        err.contains("password_env") && err.contains(TOKEN_ENV),
        "{err}"
    );
    assert!(!show(&out).contains("nope1234"), "the password is shown");
    let r = report(&out);
    assert_eq!(r["outcome"], "provider_suspended", "{r}");
    let why = r["providers"][0]["suspended"].as_str().unwrap();
    assert!(why.contains("ESME_RINVPASWD"), "{why}");
    assert_eq!(r["providers"][0]["smpp"]["binds"], 0, "{r}");
    // No item is charged an attempt: senders wait for the bind before marking one sent.
    assert_eq!(r["run"]["attempts"], 0, "{r}");
    assert_eq!(r["outbox"]["remote_counts"], serde_json::json!({}), "{r}");
    let c = &r["outbox"]["counts"];
    assert_eq!(c["submitted"], 0, "{c}");
    assert_eq!(c["failed"], 0, "{c}");
    assert_eq!(c["deferred"], 0, "{c}");
    let waiting = ["queued", "pending", "in_flight"]
        .iter()
        .map(|s| c[s].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(waiting, N as u64, "{c}");
    let s = smpp_stats(&p);
    assert_eq!(s.pdus_received.get("bind_transceiver"), Some(&1), "{s:?}");
    assert_eq!(s.accepted, 0);
    // The next run, with the right password, delivers them all.
    let again = run(f.send()).await;
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    assert_eq!(smpp_stats(&p).accepted, N as u64);
    p.shutdown().await.unwrap();
}

/// A password longer than SMPP 3.4 allows (8 characters) is refused before anything is
/// enqueued, naming the variable, never showing the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_password_is_refused_at_load_naming_the_variable() {
    let p = smsc(300, 0).await;
    let f = files(&p, 3);
    let mut send = f.send();
    send.env(TOKEN_ENV, "ninechars");
    let out = run(send).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("password_env") && err.contains(TOKEN_ENV),
        "{err}"
    );
    assert!(err.contains("SMPP 3.4"), "{err}");
    assert!(!show(&out).contains("ninechars"), "the password is shown");
    assert!(!f.db_exists(), "a refused run created the outbox");
    assert_eq!(smpp_stats(&p).pdus_received.get("bind_transceiver"), None);
    p.shutdown().await.unwrap();
}

/// `abide serve` with a wrong password: the provider is suspended after one bind,
/// `/v1/stats` says why, items posted later wait `QUEUED`, and no bind follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_suspends_a_provider_whose_bind_is_refused_and_says_why() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let p = smsc(300, 0).await;
    let f = files(&p, 0);
    let mut cmd = abide(&[
        "serve",
        "--config",
        f.cfg.to_str().unwrap(),
        "--db",
        &f.db,
        "--listen",
        "127.0.0.1:0",
        "--token-env",
        "ABIDE_TEST_API_TOKEN",
    ]);
    cmd.env("ABIDE_TEST_API_TOKEN", "s3cret-token")
        .env(TOKEN_ENV, "nope1234");
    let mut child = start(cmd);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = first.strip_prefix("listening on ").unwrap().to_owned();
    let c = reqwest::Client::new();
    let stats = || async {
        c.get(format!("{base}/v1/stats"))
            .bearer_auth("s3cret-token")
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()
    };
    let mut why = None;
    for _ in 0..(RUN_BOUND.as_millis() / 50) {
        let v = stats().await;
        if let Some(s) = v["providers"][0]["suspended"].as_str() {
            why = Some(s.to_owned());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let why = why.expect("/v1/stats never said the provider is suspended");
    assert!(
        why.contains("ESME_RINVPASWD") && why.contains("password_env"),
        "{why}"
    );
    let items: Vec<serde_json::Value> = (0..3)
        .map(|i| serde_json::json!({"provider": "sms", "path": "/", "body": {"to": format!("+4915{i:08}"), "text": "hi"}}))
        .collect();
    let r = c
        .post(format!("{base}/v1/items"))
        .bearer_auth("s3cret-token")
        .json(&items)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    // Two refreshes of the live view later, the items still wait and no bind followed.
    let mut seen = 0;
    for _ in 0..(RUN_BOUND.as_millis() / 50) {
        let v = stats().await;
        if v["counts"]["queued"] == 3 {
            seen += 1;
            if seen == 3 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(seen, 3, "{}", stats().await);
    let s = smpp_stats(&p);
    assert_eq!(s.pdus_received.get("bind_transceiver"), Some(&1), "{s:?}");
    let m = c.get(format!("{base}/metrics")).send().await.unwrap();
    let text = m.text().await.unwrap();
    // The line carries the node label too (`{provider="sms",node="abide-…"} 1`).
    assert!(
        text.lines()
            .any(|l| l.starts_with("abide_provider_suspended{")
                && l.contains("provider=\"sms\"")
                && l.ends_with("} 1")),
        "{text}"
    );
    assert!(!text.contains("nope1234"));
    sigterm(&child);
    let out = tokio::time::timeout(RUN_BOUND, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.code(), Some(0));
    p.shutdown().await.unwrap();
}

/// Text longer than one SMS goes whole in `message_payload`; text over `max_text_octets`
/// is refused at enqueue naming its line, nothing enqueued, never cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_texts_are_sent_in_message_payload_and_too_long_ones_refused_by_line() {
    let p = smsc(300, 0).await;
    let f = files(&p, 0);
    let line = |to: u32, text: &str| {
        format!("{{\"provider\":\"sms\",\"path\":\"/\",\"body\":{{\"to\":\"+4915{to:08}\",\"text\":\"{text}\"}}}}\n")
    };
    let input = [
        line(1, &"a".repeat(500)),
        line(2, &"ж".repeat(100)),
        line(3, "short"),
        line(4, &"b".repeat(160)),
    ]
    .concat();
    write(f.dir.path(), "in.jsonl", &input);
    let out = run(f.send_with(&["--json", "--quiet", "--receipt-wait", "20s"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r = report(&out);
    assert_eq!(r["outbox"]["counts"]["submitted"], 4, "{r}");
    assert_eq!(r["outbox"]["receipts"]["delivered"], 4, "{r}");
    let s = smpp_stats(&p);
    assert_eq!((s.accepted, s.long_messages), (4, 2), "{s:?}");

    let too_long = [line(5, "fine"), line(6, &"c".repeat(1531))].concat();
    write(f.dir.path(), "in.jsonl", &too_long);
    let out = run(f.send()).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2"), "{err}");
    assert!(
        err.contains("1531 GSM 7-bit septets") && err.contains("max_text_octets is 1530"),
        "{err}"
    );
    let st = run(abide(&["status", "--db", &f.db, "--json"])).await;
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["counts"]["submitted"], 4, "{st}");
    assert_eq!(st["counts"]["queued"], 0, "line 1 enqueued: {st}");
    p.shutdown().await.unwrap();
}

/// SIGTERM while the SMSC is down (its address refuses connections, so abide is in its
/// reconnect loop): the run stops at once with exit 130 and its summary, the items
/// waiting for the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_reconnecting_to_a_down_smsc_exits_130() {
    // A port nothing listens on: bound and released at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let toml = format!(
        "[[provider]]\nname = \"sms\"\ntransport = \"smpp\"\naddress = \"127.0.0.1:{port}\"\n\
         system_id = \"abide\"\npassword_env = \"{TOKEN_ENV}\"\nwindow = 20\n\
         source_addr = \"ACME\"\npdu_timeout = 2\n"
    );
    let f = Files::new(&toml, 0);
    let lines: String = (0..5)
        .map(|i| {
            format!("{{\"provider\":\"sms\",\"path\":\"/\",\"body\":{{\"to\":\"+4915{i:08}\",\"text\":\"x\"}}}}\n")
        })
        .collect();
    write(f.dir.path(), "in.jsonl", &lines);
    let child = start(f.send());
    // Let it fail a few binds (the first reconnects come within a second).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    sigterm(&child);
    let out = tokio::time::timeout(RUN_BOUND, child.wait_with_output())
        .await
        .expect("send did not stop on SIGTERM while reconnecting")
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stopping"), "{err}");
    let st = run(abide(&["status", "--db", &f.db, "--json"])).await;
    let c = &report(&st)["counts"];
    assert_eq!(
        c["queued"].as_u64().unwrap() + c["pending"].as_u64().unwrap(),
        5,
        "{}",
        show(&st)
    );
}
