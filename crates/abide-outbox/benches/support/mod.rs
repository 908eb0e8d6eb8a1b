//! Shared by the bench binaries: argument parsing, `/proc` readings, item generation.
//!
//! The benches are `harness = false` binaries. `cargo bench` passes `--bench`; without it
//! (e.g. `cargo test --all-targets`) they print how to run them and exit, so they never
//! cost CI time.

#![allow(dead_code)]

use std::collections::HashMap;
use std::time::Duration;

use abide_outbox::{NewItem, Request};

/// `--name value` pairs after the binary name; `--bench` is noted, not a pair.
#[derive(Debug)]
pub(crate) struct Args {
    pairs: HashMap<String, String>,
    /// Whether `cargo bench` started us (it passes `--bench`).
    pub(crate) bench: bool,
}

impl Args {
    /// Parse `std::env::args`. Exits with usage on a malformed argument.
    pub(crate) fn parse(usage: &str) -> Self {
        let mut pairs = HashMap::new();
        let mut bench = false;
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            if a == "--bench" {
                bench = true;
            } else if a == "--help" || a == "-h" {
                println!("{usage}");
                std::process::exit(0);
            } else if let Some(name) = a.strip_prefix("--") {
                match it.next() {
                    Some(v) => {
                        pairs.insert(name.to_owned(), v);
                    }
                    None => die(usage, &format!("--{name} needs a value")),
                }
            } else {
                die(usage, &format!("unexpected argument {a:?}"));
            }
        }
        Self { pairs, bench }
    }

    /// A numeric (or any `FromStr`) argument with a default.
    pub(crate) fn get<T: std::str::FromStr>(&self, name: &str, default: T, usage: &str) -> T {
        match self.pairs.get(name) {
            None => default,
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| die(usage, &format!("--{name}: cannot parse {v:?}"))),
        }
    }

    /// A string argument.
    pub(crate) fn opt(&self, name: &str) -> Option<&str> {
        self.pairs.get(name).map(String::as_str)
    }
}

fn die(usage: &str, msg: &str) -> ! {
    eprintln!("error: {msg}\n\n{usage}");
    std::process::exit(2);
}

/// Exit quietly unless started by `cargo bench`.
pub(crate) fn only_under_cargo_bench(args: &Args, name: &str) {
    if !args.bench {
        println!("{name}: a benchmark; run it with `cargo bench -p abide-outbox --bench {name}`");
        std::process::exit(0);
    }
}

/// `n` small SMS-like JSON items for `provider`, keys `<prefix>-<i>`, starting at `from`.
pub(crate) fn items(provider: &str, prefix: &str, from: usize, n: usize) -> Vec<NewItem> {
    (from..from + n)
        .map(|i| {
            NewItem::new(
                provider,
                Request::post_json(
                    "/v1/messages",
                    serde_json::json!({"to": "+15550100", "text": "your code is 123456", "n": i}),
                ),
            )
            .with_idempotency_key(format!("{prefix}-{i}"))
        })
        .collect()
}

/// One `kB` figure from `/proc/self/status` (`VmRSS`, `VmHWM`), in bytes.
pub(crate) fn status_kb(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Reset the peak RSS (`VmHWM`) to the current RSS (Linux ≥ 4.0, `clear_refs` value 5),
/// so a later peak reflects only what ran after this call. False if unsupported.
pub(crate) fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// CPU time (user + system) of the whole process, all threads, dead ones included, from
/// `/proc/self/stat` (clock ticks of 10 ms: `CLK_TCK` is 100 on Linux).
pub(crate) fn process_cpu() -> Duration {
    stat_cpu("/proc/self/stat")
}

/// CPU time of the calling thread in nanoseconds from `/proc/thread-self/schedstat`.
pub(crate) fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// CPU time per thread name (`comm`) over the live threads of this process, from
/// `/proc/self/task/*/stat` (10 ms ticks). Threads that already exited are missing.
pub(crate) fn cpu_by_thread_name() -> std::collections::BTreeMap<String, Duration> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in dir.flatten() {
        let path = task.path().join("stat");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let name = text
            .split_once('(')
            .and_then(|(_, r)| r.rsplit_once(')'))
            .map_or("?", |(n, _)| n)
            .to_owned();
        *out.entry(name).or_insert(Duration::ZERO) += stat_cpu(&path.to_string_lossy());
    }
    out
}

fn stat_cpu(path: &str) -> Duration {
    const TICK: Duration = Duration::from_millis(10);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let after = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    TICK * (ticks(11) + ticks(12))
}

/// Human bytes in MiB.
pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
