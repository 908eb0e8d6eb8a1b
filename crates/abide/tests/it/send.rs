//! `abide send` end to end: the real binary, a rate-limited fake provider on loopback,
//! SQLite files in temp dirs. Counts come from the provider's own stats (what it saw).

#![allow(clippy::unwrap_used)]

use crate::support::*;
use abide_fake::ScheduleEntry;

/// 24 senders against a provider limited to 400/s that the config over-estimates (800/s
/// hint): every item accepted exactly once, few 429s, and a second run sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_four_workers_deliver_every_item_exactly_once() {
    const N: usize = 1200;
    let p = start_provider(provider_config(400, 40)).await;
    let f = Files::new(
        &provider_toml("sms", &p.url(), "rate_hint = 800.0\nconcurrency = 24", ""),
        N,
    );
    let out = run(f.send()).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r = report(&out);
    let s = p.stats();
    assert_eq!(s.accepted, N as u64, "{s:?}");
    assert_eq!(s.duplicates, 0, "{s:?}");
    assert!(
        provider_429_per_item(&s, N) <= 0.05,
        "{s:?}\n{}",
        show(&out)
    );
    assert_eq!(r["run"]["delivered"], N as u64);
    assert_eq!(r["outbox"]["counts"]["submitted"], N as u64);
    assert_eq!(r["input"]["enqueued"], N as u64);
    // Same remote counts on both sides: what abide recorded is what the provider sent.
    assert_eq!(r["outbox"]["remote_counts"]["http_202"], N as u64);
    // A clean exit checkpoints the WAL: the .db file alone holds every item.
    let wal = std::path::PathBuf::from(format!("{}-wal", f.db));
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_len, 0, "{} left with {wal_len} bytes", wal.display());

    let again = run(f.send()).await;
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    let r2 = report(&again);
    assert_eq!(r2["input"]["enqueued"], 0);
    assert_eq!(r2["input"]["already_enqueued"], N as u64);
    assert_eq!(r2["run"]["attempts"], 0);
    assert_eq!(p.stats().requests, s.requests, "a re-run sent requests");
}

/// One malformed line rejects the whole batch: exit 2, every bad line named, nothing
/// enqueued (the database is not even created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_line_rejects_the_batch_and_names_its_line() {
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", "", ""), 3);
    let mut text = messages(3, "sms");
    text.push_str("{\"provider\":\"sms\",\"path\":\"/v1/messages\",\"body\":{}\n");
    text.push_str(&messages(1, "email"));
    text.push_str("{\"provider\":\"sms\",\"path\":\"https://evil.example/x\"}\n");
    std::fs::write(&f.input, text).unwrap();
    let out = run(f.send_with(&[])).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "3 of 6 lines are malformed; nothing was enqueued",
        "line 4:",
        "line 5: provider \"email\" is not configured",
        "line 6:",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in\n{err}");
    }
    assert!(!f.db_exists(), "database created");
}

/// 200,000 lines on stdin and a bad last one: exit 2 naming that line, and an outbox
/// that already held items is byte for byte as it was (it is not even opened: the input
/// is checked whole, streamed, before anything is enqueued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_last_line_on_stdin_leaves_the_outbox_unchanged() {
    use tokio::io::AsyncWriteExt as _;
    const N: usize = 200_000;
    let p = start_provider(provider_config(400, 40)).await;
    let f = Files::new(&provider_toml("sms", &p.url(), "", ""), 3);
    let first = run(f.send()).await;
    assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    let before = std::fs::read(&f.db).unwrap();

    let mut text = messages(N, "sms");
    text.push_str("{\"provider\":\"sms\",\"path\":\"/v1/messages\"");
    let cfg = f.cfg.to_str().unwrap();
    let mut cmd = abide(&["send", "--config", cfg, "--db", &f.db, "--quiet", "-"]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = start(cmd);
    let mut stdin = child.stdin.take().unwrap();
    let writer = tokio::spawn(async move {
        stdin.write_all(text.as_bytes()).await.unwrap();
    });
    let out = tokio::time::timeout(RUN_BOUND, child.wait_with_output())
        .await
        .expect("abide did not finish in time")
        .unwrap();
    writer.await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let needle = format!("1 of {} lines are malformed; nothing was enqueued", N + 1);
    assert!(err.contains(&needle), "{err}");
    assert!(err.contains(&format!("line {}:", N + 1)), "{err}");
    assert_eq!(std::fs::read(&f.db).unwrap(), before, "the outbox changed");
    assert_eq!(p.stats().accepted, 3);

    // The good lines on stdin (read twice through the temporary copy): same keys as the
    // file gave, so nothing new.
    let mut cmd = abide(&[
        "send", "--config", cfg, "--db", &f.db, "--json", "--quiet", "-",
    ]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = start(cmd);
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(messages(3, "sms").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let again = tokio::time::timeout(RUN_BOUND, child.wait_with_output())
        .await
        .expect("abide did not finish in time")
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    let r = report(&again);
    assert_eq!(r["input"]["items"], 3, "{r}");
    assert_eq!(r["input"]["already_enqueued"], 3, "{r}");
    assert_eq!(p.stats().accepted, 3);
}

/// The provider switches `Retry-After` to an IMF-fixdate after 50 requests and suspends a
/// key throttled 100 times within 10 s. Its rate limit is advertised (abide paces under
/// it), but its concurrency limit (4 in flight, 100 ms per message: 40/s) is not, so 24
/// senders do meet 429s, nearly all carrying a date. (At 20 ms per message the limit was
/// 200/s, more than a debug build sends on a busy machine: no 429 came, and the test's
/// premise failed, not abide.) abide reads the date as a wait for the whole
/// provider: no burst, no suspension, every item accepted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_switching_to_an_http_date_causes_no_burst() {
    const N: usize = 400;
    let mut pc = provider_config(400, 40);
    pc.limits.key_concurrency = Some(4);
    pc.latency_ms = 100;
    pc.abuse.threshold = 100;
    pc.abuse.window_secs = 10;
    pc.abuse.suspend_secs = 3600;
    pc.schedule.push(
        "retry-after=imf-fixdate@#50"
            .parse::<ScheduleEntry>()
            .unwrap(),
    );
    let p = start_provider(pc).await;
    let f = Files::new(
        &provider_toml("sms", &p.url(), "rate_hint = 400.0\nconcurrency = 24", ""),
        N,
    );
    let out = run(f.send()).await;
    let s = p.stats();
    assert_eq!(out.status.code(), Some(0), "{}\n{s:?}", show(&out));
    assert_eq!(s.suspensions, 0, "{s:?}");
    assert_eq!(s.accepted, N as u64, "{s:?}");
    assert_eq!(s.duplicates, 0, "{s:?}");
    let throttled = s.rejected_by_status.get(&429).copied().unwrap_or(0);
    assert!(
        throttled > 0,
        "no 429 at all: the date path was not exercised {s:?}"
    );
    assert!(provider_429_per_item(&s, N) <= 0.05, "{s:?}");
    // abide counted exactly what the provider said.
    assert_eq!(
        report(&out)["outbox"]["remote_counts"]["http_429"],
        throttled
    );
}

/// A provider's `credentials_env` variable is unset: every attempt would get a 401 and
/// every item end DEFERRED. `send` refuses to start instead, naming the provider and the
/// variable, and enqueues nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unset_credentials_variable_stops_send_before_anything_is_enqueued() {
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", "", ""), 2);
    let mut cmd = f.send_with(&[]);
    cmd.env_remove(TOKEN_ENV);
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("provider \"sms\" in {}", f.cfg.display()))
            && err.contains(&format!("variable {TOKEN_ENV} is unset or empty")),
        "{err}"
    );
    assert!(!f.db_exists(), "database created");
}

/// A credential read from a file with its line break (or holding a control byte) can
/// never be sent as a header: `send` refuses to start, naming the setting and the
/// variable but never the value, instead of counting attempts that never went out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_with_a_line_break_stops_send_as_a_configuration_error() {
    for (extra, value) in [
        ("", "tok-SECRET\n"),
        ("auth_header = \"X-Token\"", "tok-SECRET\r"),
        ("auth_header = \"X-Token\"", "tok\u{1}SECRET"),
    ] {
        let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", extra, ""), 2);
        let mut cmd = f.send_with(&[]);
        cmd.env(TOKEN_ENV, value);
        let out = run(cmd).await;
        assert_eq!(out.status.code(), Some(2), "{}", show(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("credentials_env variable {TOKEN_ENV}"))
                && err.contains("provider \"sms\""),
            "{err}"
        );
        assert!(!err.contains("SECRET"), "{err}");
        assert!(!f.db_exists(), "database created");
    }
}

/// `--lease 2s` with a 10 s request timeout: a sender hands back every item whose lease
/// would run out during its request, so every claim was handed back and claimed again and
/// nothing was ever sent. Refused at start, saying what lease would work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_shorter_than_the_request_timeout_is_refused() {
    let f = Files::new(
        &provider_toml("sms", "http://127.0.0.1:9", "timeout_secs = 10", ""),
        2,
    );
    let out = run(f.send_with(&["--lease", "2s"])).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--lease 2s is too short for provider \"sms\"")
            && err.contains("use --lease 12s or more"),
        "{err}"
    );
    assert!(!f.db_exists(), "database created");
}

/// A providers file that is missing or names no provider is a file-level error: the message
/// names the file and what is wrong with it, never a made-up provider `"<file>"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_empty_providers_file_is_named_without_a_placeholder_provider() {
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", "", ""), 2);
    let missing = f.cfg.with_file_name("missing.toml");
    let empty = write(f.cfg.parent().unwrap(), "empty.toml", "");
    for (cfg, why) in [
        (&missing, "No such file or directory"),
        (&empty, "provider: no [[provider]] configured"),
    ] {
        let out = run(abide(&[
            "send",
            "--config",
            cfg.to_str().unwrap(),
            "--db",
            &f.db,
        ]))
        .await;
        assert_eq!(out.status.code(), Some(2), "{}", show(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("providers file {}: ", cfg.display()))
                && err.contains(why)
                && !err.contains("<file>"),
            "{err}"
        );
    }
    assert!(!f.db_exists(), "database created");
}

/// `send` without input delivers what an outbox holds: a mistyped `--db` is refused (exit 2)
/// rather than created empty and reported "drained" while the real outbox waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_without_input_refuses_a_database_that_does_not_exist() {
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", "", ""), 2);
    let out = run(abide(&[
        "send",
        "--config",
        f.cfg.to_str().unwrap(),
        "--db",
        &f.db,
    ]))
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no outbox database at"), "{err}");
    assert!(!f.db_exists(), "database created");
}

/// One idempotency key names one message across runs, not only within one input: a key
/// already in the outbox given again with a different message stops the run (exit 2)
/// naming the line and the key, before any chunk is committed (line 1300 is in the second
/// chunk of 1,000): nothing is enqueued or sent. The fixed input then enqueues everything
/// new, and the same message under its key again is a no-op.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_already_in_the_outbox_for_another_message_stops_send_naming_its_line() {
    const N: usize = 1500;
    const AT: usize = 1300;
    let keyed = |text: &str, key: &str| {
        format!(
            "{{\"provider\":\"sms\",\"path\":\"/v1/messages\",\"body\":{{\"to\":\"+1555\",\"text\":\"{text}\"}},\"idempotency_key\":\"{key}\"}}\n"
        )
    };
    let with_line_at = |line: String| {
        let mut lines: Vec<String> = messages(N - 1, "sms")
            .lines()
            .map(|l| format!("{l}\n"))
            .collect();
        lines.insert(AT - 1, line);
        lines.concat()
    };
    let p = start_provider(provider_config(400, 40)).await;
    let f = Files::new(&provider_toml("sms", &p.url(), "", ""), 0);
    std::fs::write(&f.input, keyed("first", "order-9") + &messages(2, "sms")).unwrap();
    let first = run(f.send()).await;
    assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    assert_eq!(p.stats().accepted, 3);

    std::fs::write(
        &f.input,
        with_line_at(keyed("SECOND, different", "order-9")),
    )
    .unwrap();
    let out = run(f.send()).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "line 1300: idempotency_key \"order-9\" already names a different message",
        "nothing of the input was enqueued",
        "nothing was sent",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in\n{err}");
    }
    assert_eq!(p.stats().requests, 3, "the refused run sent something");

    // Fixed: the new message gets its own key; the first message under its key again is a
    // no-op, as are the two lines the first run sent.
    let fixed = with_line_at(keyed("SECOND, different", "order-10")) + &keyed("first", "order-9");
    std::fs::write(&f.input, fixed).unwrap();
    let again = run(f.send()).await;
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    let r = report(&again);
    assert_eq!(r["input"]["items"], N + 1, "{r}");
    assert_eq!(r["input"]["enqueued"], N - 2, "{r}");
    assert_eq!(r["input"]["already_enqueued"], 3, "{r}");
    let s = p.stats();
    assert_eq!(s.accepted, 3 + (N - 2) as u64, "{s:?}");
    assert_eq!(s.duplicates, 0, "{s:?}");
}

/// Items of a provider the providers file does not name (renamed, or the wrong file) are
/// not "drained": `send` says how many wait and exits 1, and leaves them as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_of_a_provider_the_config_does_not_name_are_reported_not_drained() {
    // An empty input: `send` enqueues nothing and delivers what the outbox holds.
    let f = Files::new(&provider_toml("other", "http://127.0.0.1:9", "", ""), 0);
    let now = abide_core::Clock::now(&abide_core::SystemClock);
    outbox_with(&f.db, "sms", 3, now)
        .await
        .close()
        .await
        .unwrap();
    let out = run(f.send()).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("3 item(s) in") && err.contains("wait for a provider that"),
        "{err}"
    );
    assert_eq!(
        report(&out)["outbox"]["counts"]["queued"],
        3,
        "{}",
        show(&out)
    );
}

/// A provider whose host never answers (nothing listens at its port): `send` stops by
/// itself after `--unreachable-after`, exit 5, naming the provider, its URL and what the
/// connection said; the items stay in the outbox for the next run. Without the bound it
/// paused and retried until each item's max age (an hour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_never_answers_ends_the_run_naming_its_url() {
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", "", ""), 3);
    let out = run(f.send_with(&["--unreachable-after", "300ms", "--json"])).await;
    assert_eq!(out.status.code(), Some(5), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("provider \"sms\": http://127.0.0.1:9/ has not answered once"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("connect"), "{err}");
    let r = report(&out);
    assert_eq!(r["outcome"], "provider_unreachable", "{r}");
    let c = &r["outbox"]["counts"];
    assert_eq!(
        c["queued"].as_u64().unwrap() + c["pending"].as_u64().unwrap(),
        3,
        "{r}"
    );
}

/// A wrong HTTP credential (the variable is set, the provider refuses it): the first item
/// refused again right after its fresh read stops the provider for the run, exit 4,
/// naming `credentials_env`; no item ends DEFERRED or FAILED, and the rest of the batch
/// is never sent with the bad key (before: every item twice, all DEFERRED, no word).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_credential_stops_the_provider_naming_credentials_env() {
    const N: usize = 40;
    let p = start_provider(provider_config(200, 20)).await;
    let f = Files::new(&provider_toml("sms", &p.url(), "concurrency = 2", ""), N);
    let mut cmd = f.send_with(&["--json"]);
    cmd.env(TOKEN_ENV, "not-the-key");
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("credentials_env = \"{TOKEN_ENV}\"")),
        "{err}"
    );
    assert!(
        !err.contains("not-the-key"),
        "the secret was printed: {err}"
    );
    let s = p.stats();
    let refused = s.rejected_by_status.get(&401).copied().unwrap_or(0);
    // At most the requests already on the wire when the first item was refused twice.
    assert!((2..=8).contains(&refused), "{refused} 401s: {s:?}");
    assert_eq!(s.accepted, 0);
    let c = &report(&out)["outbox"]["counts"];
    assert_eq!(c["deferred"], 0, "{c}");
    assert_eq!(c["failed"], 0, "{c}");
    assert_eq!(
        c["queued"].as_u64().unwrap() + c["pending"].as_u64().unwrap(),
        N as u64,
        "{c}"
    );
}

/// A `--db` in a directory that does not exist is named as such, not as a lock file that
/// could not be created.
#[tokio::test]
async fn a_db_in_a_missing_directory_is_named_as_such() {
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", "", ""), 1);
    let missing = f.dir.path().join("no-such-dir").join("o.db");
    let mut cmd = abide(&[
        "send",
        "--config",
        f.cfg.to_str().unwrap(),
        "--db",
        missing.to_str().unwrap(),
        f.input.to_str().unwrap(),
    ]);
    cmd.env(TOKEN_ENV, "x");
    let o = run(cmd).await;
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no-such-dir does not exist"), "{err}");
    assert!(!err.contains(".lock"), "{err}");
}

/// `--config /dev/zero` (or any file past the cap): refused after 1 MiB, naming the file,
/// never read for ever.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_never_ends_is_refused_after_the_cap() {
    let f = Files::new(&provider_toml("sms", "http://127.0.0.1:9", "", ""), 2);
    let out = run(abide(&["send", "--config", "/dev/zero", "--db", &f.db])).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/dev/zero") && err.contains("1048576 bytes"),
        "{err}"
    );
    assert!(!f.db_exists(), "database created");
}
