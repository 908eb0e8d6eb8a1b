//! Shared by the outbox CLI tests: a fake provider in-process on loopback, config and
//! input files in a temp dir, and the real `abide` binary run as a child process.
//!
//! Every wait is bounded (`timeout`), polls are short, and nothing asserts on timing.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use abide_core::SystemClock;
use abide_fake::{ProviderConfig, Rate, RunningProvider, StatsSnapshot};
use tokio::process::{Child, Command};

pub mod proxy;
pub mod services;

/// Name of the environment variable the test configs read the provider token from.
pub const TOKEN_ENV: &str = "ABIDE_TEST_PROVIDER_TOKEN";

/// Longest any single `abide` run (or wait on one) may take before the test fails: a bound
/// against a hang, not a timing assertion. Generous because these are debug builds of real
/// processes on a 2-core machine: with a CPU hog on each core, the 1,000-SMS kill test took
/// 20-37 s in all where it takes 7-10 s idle, and a 45 s bound on one of its waits failed a
/// fresh clone's run once while `send` was still making progress.
pub const RUN_BOUND: Duration = Duration::from_secs(180);

/// A provider limited to `per_sec` requests per second per key (burst `burst`), no
/// account limit and no concurrency limit, answering instantly.
pub fn provider_config(per_sec: u32, burst: u32) -> ProviderConfig {
    let mut c = ProviderConfig::default();
    c.limits.key_rate = Some(Rate {
        count: per_sec,
        per: Duration::from_secs(1),
    });
    c.limits.key_burst = Some(burst);
    c.limits.account_rate = None;
    c.limits.account_burst = None;
    c.limits.key_concurrency = None;
    c.limits.account_concurrency = None;
    c
}

/// Start a provider on 127.0.0.1 with a free port.
pub async fn start_provider(cfg: ProviderConfig) -> RunningProvider {
    abide_fake::spawn(cfg, Arc::new(SystemClock), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// A `[[provider]]` table for `name` at `url`, plus `extra` TOML lines inside it
/// (sub-tables go in `tables`, after the plain keys).
pub fn provider_toml(name: &str, url: &str, extra: &str, tables: &str) -> String {
    format!(
        "[[provider]]\nname = \"{name}\"\nbase_url = \"{url}\"\ncredentials_env = \"{TOKEN_ENV}\"\n{extra}\n{tables}\n"
    )
}

/// Write `text` to `dir/name` and return the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `n` JSON lines for `provider`, each a distinct message (no explicit keys).
pub fn messages(n: usize, provider: &str) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"provider\":\"{provider}\",\"path\":\"/v1/messages\",\"body\":{{\"to\":\"+1555{i:07}\",\"text\":\"hello {i}\"}}}}\n"
            )
        })
        .collect()
}

/// The `abide` binary with the provider token set, quiet logs, killed if dropped.
pub fn abide(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_abide"));
    c.args(args)
        .env(TOKEN_ENV, abide_fake::DEMO_KEY)
        .env("RUST_LOG", "warn")
        // Text logs, whatever the caller's shell exports: tests read stderr as text.
        .env_remove("ABIDE_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Run to completion within [`RUN_BOUND`].
pub async fn run(mut cmd: Command) -> Output {
    let child = cmd.spawn().unwrap();
    tokio::time::timeout(RUN_BOUND, child.wait_with_output())
        .await
        .expect("abide did not finish in time")
        .unwrap()
}

/// A running `abide provider` process (the fake API as users run it); killed when
/// dropped.
pub struct ProviderProcess {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`, from its first stdout line.
    pub url: String,
}

impl Drop for ProviderProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `abide provider --listen 127.0.0.1:0 ARGS` and wait for its `listening on URL`
/// line (printed once the port is bound).
pub fn provider_process(args: &[&str]) -> ProviderProcess {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_abide"))
        .args(["provider", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    ProviderProcess { child, url }
}

/// Start without waiting.
pub fn start(mut cmd: Command) -> Child {
    cmd.spawn().unwrap()
}

/// Poll `cond` every 20 ms until it holds while `child` runs: fails at once, with the
/// child's exit status, if it ends first (a crashed run is not a slow one), and after
/// [`RUN_BOUND`] otherwise.
pub async fn wait_until_while_running(
    child: &mut Child,
    what: &str,
    mut cond: impl FnMut() -> bool,
) {
    let polls = RUN_BOUND.as_millis() / 20;
    for _ in 0..polls {
        if cond() {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out after {RUN_BOUND:?} waiting for {what}");
}

/// Poll `cond` every 20 ms until it holds, at most [`RUN_BOUND`].
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let polls = RUN_BOUND.as_millis() / 20;
    for _ in 0..polls {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// stdout and stderr as text, for assertion messages.
pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The JSON report printed by `--json`.
pub fn report(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)))
}

/// 429s the provider sent, per item.
pub fn provider_429_per_item(s: &StatsSnapshot, items: usize) -> f64 {
    s.rejected_by_status.get(&429).copied().unwrap_or(0) as f64 / items as f64
}

/// A db path string in `dir`.
pub fn db_in(dir: &Path) -> String {
    dir.join("outbox.db").to_str().unwrap().to_owned()
}

/// A temp dir holding a providers file, a JSON-lines input and an outbox path: what most
/// `send` tests start from. The dir is removed when this is dropped.
pub struct Files {
    pub dir: tempfile::TempDir,
    pub cfg: PathBuf,
    pub input: PathBuf,
    pub db: String,
}

impl Files {
    /// `providers` (TOML text) and `n` distinct messages for `sms`.
    pub fn new(providers: &str, n: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write(dir.path(), "providers.toml", providers);
        let input = write(dir.path(), "in.jsonl", &messages(n, "sms"));
        let db = db_in(dir.path());
        Self {
            dir,
            cfg,
            input,
            db,
        }
    }

    /// `abide send --config … --db … --json --quiet <input>`.
    pub fn send(&self) -> Command {
        self.send_with(&["--json", "--quiet"])
    }

    /// `abide send --config … --db … <extra> <input>`.
    pub fn send_with(&self, extra: &[&str]) -> Command {
        let mut args = vec![
            "send",
            "--config",
            self.cfg.to_str().unwrap(),
            "--db",
            &self.db,
        ];
        args.extend_from_slice(extra);
        args.push(self.input.to_str().unwrap());
        abide(&args)
    }

    /// Whether the outbox database exists (a refused run must not create it).
    pub fn db_exists(&self) -> bool {
        Path::new(&self.db).exists()
    }
}

/// Send SIGTERM to a running child (the graceful stop of `send` and `serve`).
pub fn sigterm(child: &Child) {
    let pid = child
        .id()
        .expect("the child has already exited")
        .to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill -TERM {pid}");
}

/// An outbox at `db` holding `n` distinct messages for `provider`, enqueued at `at`
/// straight through the store (no `send`, so nothing is delivered); the store stays open.
pub async fn outbox_with(
    db: &str,
    provider: &str,
    n: usize,
    at: std::time::SystemTime,
) -> abide_outbox::AnyStore {
    use abide_outbox::{NewItem, Request, Store as _};
    let store = abide_outbox::AnyStore::connect(db).await.unwrap();
    let items: Vec<NewItem> = (0..n)
        .map(|i| {
            let body = serde_json::json!({ "to": "+15550100", "i": i });
            NewItem::new(provider, Request::post_json("/v1/messages", body))
        })
        .collect();
    store.enqueue(&items, at).await.unwrap();
    store
}
