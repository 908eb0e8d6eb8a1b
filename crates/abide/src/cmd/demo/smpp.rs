//! `abide demo --transport smpp`: the same minute over SMPP 3.4. A fake SMSC on loopback
//! (`abide provider --smpp`, in-process), SMS through the durable outbox, and what each
//! side counted, receipts included.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, SystemClock};
use abide_fake::{spawn_listeners, Listeners, ProviderConfig, ScheduleEntry, SmppStats};
use abide_outbox::Config;

use super::flags::Args;
use crate::cmd::demo::run::{self as demo_run, through_outbox};
use crate::deliver::Interrupt;
use crate::deliver::Said as _;
use crate::report::RunReport;

/// The SMPP account the demo binds with (system_id, password: 8 characters at most).
const SYSTEM_ID: &str = "demo";
const PASSWORD: &str = "demo-pw";
/// Name of the variable the bind password is passed in (as in real use).
pub(crate) const PASSWORD_ENV: &str = "ABIDE_DEMO_SMSC_PASSWORD";
/// How long after draining the demo waits for the last receipts.
const RECEIPT_WAIT: Duration = Duration::from_secs(15);

fn smsc_config(a: &Args) -> anyhow::Result<ProviderConfig> {
    let mut c = demo_run::limited(a.rate);
    // The SMSC's window is the one configured (as an SMSC operator would tell you).
    c.limits.key_concurrency = Some(u32::from(a.workers));
    c.latency_ms = 20;
    let n = u64::from(a.items);
    let at = |pct: u64| (n * pct / 100).max(1);
    for spec in [
        format!("throttle=smpp-0x14@#{}", at(25)),
        format!("drop=all@#{}", at(45)),
        format!("slow=300ms@#{}", at(65)),
        format!("slow=0ms@#{}", at(75)),
    ] {
        c.schedule.push(spec.parse::<ScheduleEntry>()?);
    }
    c.smpp.receipt_delay_ms = 200;
    c.smpp.accounts = vec![abide_fake::SmppAccount {
        system_id: SYSTEM_ID.into(),
        password: PASSWORD.into(),
        account: Some("demo".into()),
    }];
    c.validate()?;
    Ok(c)
}

fn outbox_config(a: &Args, addr: SocketAddr) -> anyhow::Result<Config> {
    let toml = format!(
        "[[provider]]\nname = \"smsc\"\ntransport = \"smpp\"\naddress = \"{addr}\"\n\
         system_id = \"{SYSTEM_ID}\"\npassword_env = \"{PASSWORD_ENV}\"\nwindow = {}\n\
         source_addr = \"ABIDE\"\nsource_addr_ton = 5\npdu_timeout = 5\nrate_hint = {}\n\
         [provider.retry]\nmax_attempts = 50\nbackoff_base_ms = 500\nbackoff_cap_secs = 10\n\
         [provider.budget]\nmin_per_sec = 5\nretry_ratio = 0.2\n",
        a.workers,
        f64::from(a.rate) * 2.0,
    );
    Ok(Config::from_toml_str(&toml)?)
}

/// Run the SMPP demo with its outbox in `db`.
pub(crate) async fn demo(args: &Args, db: &std::path::Path) -> anyhow::Result<ExitCode> {
    let interrupt = Interrupt::listen()?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let listen = Listeners {
        http: None,
        smpp: Some(([127, 0, 0, 1], 0).into()),
    };
    let smsc = spawn_listeners(smsc_config(args)?, Arc::clone(&clock), listen).await?;
    let addr = smsc
        .smpp_addr()
        .ok_or_else(|| anyhow::anyhow!("the fake SMSC did not start"))?;
    let db_str = db.to_string_lossy().into_owned();
    if !args.quiet {
        eprintln!(
            "abide demo: SMSC at smpp://{addr} ({} submit_sm/s, {} outstanding, 20 ms each; quirks at 25/45/65% of submits)\n\
             abide demo: {} SMS, window {}, outbox {db_str}",
            args.rate, args.workers, args.items, args.workers
        );
    }
    let (report, ending, _) = through_outbox(
        args,
        &db_str,
        outbox_config(args, addr)?,
        &demo_run::items(args.items, "smsc", "/", "demo-sms-"),
        RECEIPT_WAIT,
        &interrupt,
        &clock,
        |_| std::future::pending(),
    )
    .await?;
    let saw = smsc.stats().smpp.unwrap_or_default();
    let json = vec![("smsc_saw", serde_json::to_value(&saw)?)];
    demo_run::print(args, &db_str, &report, json, &side_by_side(&saw, &report))?;
    smsc.shutdown().await?;
    Ok(ending.exit_code(&report.outbox.counts))
}

/// "What the SMSC saw" next to "what abide decided".
fn side_by_side(saw: &SmppStats, r: &RunReport) -> String {
    let got = |m: &std::collections::BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    let mut left = vec![
        ("submit_sm".to_owned(), got(&saw.pdus_received, "submit_sm")),
        ("accepted".to_owned(), saw.accepted),
        ("repeats (same key)".to_owned(), saw.repeats),
        ("content repeats".to_owned(), saw.content_repeats),
        ("binds".to_owned(), saw.binds.values().sum()),
        (
            "connections dropped".to_owned(),
            saw.connections_dropped.values().sum(),
        ),
        ("receipts sent".to_owned(), saw.receipts_sent),
        ("receipts acked".to_owned(), saw.receipts_acknowledged),
    ];
    for (status, n) in &saw.responses_by_status {
        if status != "0x00000000" {
            left.push((format!("refused {status}"), *n));
        }
    }
    let right = [
        ("receipts delivered".to_owned(), r.outbox.receipts.delivered),
        ("receipts unmatched".to_owned(), r.outbox.receipts.unmatched),
    ];
    let mut s = demo_run::side_by_side("SMSC", &left, r, &right);
    let throttled =
        got(&saw.responses_by_status, "0x00000058") + got(&saw.responses_by_status, "0x00000014");
    let _ = writeln!(
        s,
        "\n  throttles per message {:.3}; achieved {:.1}/s; repeats {} (each a resend of an \
         unanswered submit, same key, same message_id); failed {}",
        crate::report::ratio(throttled, r.outbox.items),
        r.achieved_rate_per_sec,
        saw.repeats,
        r.outbox.counts.failed
    );
    s
}
