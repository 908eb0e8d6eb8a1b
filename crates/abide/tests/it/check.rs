//! `abide check`: the real binary on files in temp dirs; nothing is opened but them.

#![allow(clippy::unwrap_used)]

use crate::support::*;

/// `abide check --config <cfg> <extra> [input]`, run in the files' own dir so that a
/// database created by mistake (the default `--db` of `send` is relative) would show.
fn check(f: &Files, extra: &[&str], input: bool) -> tokio::process::Command {
    let mut args = vec!["check", "--config", f.cfg.to_str().unwrap()];
    args.extend_from_slice(extra);
    if input {
        args.push(f.input.to_str().unwrap());
    }
    let mut c = abide(&args);
    c.current_dir(f.dir.path());
    c
}

/// The names in the files' dir: only what the test wrote.
fn only_written(f: &Files) {
    let mut names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["in.jsonl", "providers.toml"],
        "something was created"
    );
}

fn two_providers() -> String {
    let sms = provider_toml("sms", "http://127.0.0.1:9", "concurrency = 3", "");
    let mail = provider_toml("mail", "http://127.0.0.1:9", "", "");
    format!("{sms}{mail}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_file_and_input_pass_with_items_per_provider() {
    let f = Files::new(&two_providers(), 0);
    let mut text = messages(4, "sms");
    text.push('\n');
    text.push_str(&messages(2, "mail"));
    std::fs::write(&f.input, text).unwrap();
    let out = run(check(&f, &[], true)).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("2 provider(s) ok"), "{said}");
    assert!(said.contains("6 item(s) ok; nothing was sent"), "{said}");
    let out = run(check(&f, &["--json"], true)).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r = report(&out);
    assert_eq!(r["ok"], true);
    assert_eq!(r["items"], 6);
    assert_eq!(r["providers"][0]["name"], "sms");
    assert_eq!(r["providers"][0]["items"], 4);
    assert_eq!(r["providers"][0]["concurrency"], 3);
    assert_eq!(r["providers"][1]["items"], 2);
    // Without input: the providers file and its credentials only.
    let out = run(check(&f, &[], false)).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    only_written(&f);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_line_is_refused_naming_it() {
    let f = Files::new(&two_providers(), 0);
    let mut text = messages(2, "sms");
    text.push_str(&messages(1, "email"));
    std::fs::write(&f.input, text).unwrap();
    let out = run(check(&f, &[], true)).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 3: provider \"email\" is not configured"),
        "{err}"
    );
    let out = run(check(&f, &["--json"], true)).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let r = report(&out);
    assert_eq!(r["ok"], false);
    assert_eq!(r["stage"], "input");
    assert_eq!(r["lines"][0]["line"], 3);
    only_written(&f);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unset_credential_is_refused_naming_the_variable() {
    let f = Files::new(&two_providers(), 1);
    let mut cmd = check(&f, &["--json"], true);
    cmd.env_remove(TOKEN_ENV);
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("variable {TOKEN_ENV} is unset or empty")),
        "{err}"
    );
    let r = report(&out);
    assert_eq!(r["stage"], "config");
    only_written(&f);
}

/// A credential that can never be sent as a header (a line break read from a file) is
/// refused, naming the variable and never the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfit_credential_is_refused_without_showing_it() {
    let f = Files::new(&two_providers(), 1);
    let mut cmd = check(&f, &[], true);
    cmd.env(TOKEN_ENV, "secret-value\n");
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(TOKEN_ENV) && err.contains("cannot be sent"),
        "{err}"
    );
    assert!(!show(&out).contains("secret-value"), "{}", show(&out));
    only_written(&f);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_file_error_names_its_line() {
    let f = Files::new("[[provider]]\nname = \"sms\"\nbase_url = 7\n", 1);
    let out = run(check(&f, &[], true)).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
    only_written(&f);
}

/// A Redis URL the providers file gets wrong is named without its password, in the text
/// and in the JSON alike (check contacts no Redis; the URL's shape is the file's own check).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_error_never_shows_a_redis_password() {
    let text = format!(
        "{}[coordination]\nredis_url = \"http://user:hunter2@127.0.0.1:6379\"\n",
        provider_toml("sms", "http://127.0.0.1:9", "", "")
    );
    let f = Files::new(&text, 1);
    let out = run(check(&f, &["--json"], true)).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(!show(&out).contains("hunter2"), "{}", show(&out));
    assert_eq!(report(&out)["stage"], "config");
}
