//! Argument parsing for the bench binary: `--name value` pairs, and `--bench` (which only
//! `cargo bench` passes; without it, e.g. under `cargo test --all-targets`, the binary
//! prints how to run it and exits, so it never costs CI time).

use std::collections::HashMap;

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
}

fn die(usage: &str, msg: &str) -> ! {
    eprintln!("error: {msg}\n\n{usage}");
    std::process::exit(2);
}

/// Exit quietly unless started by `cargo bench`.
pub(crate) fn only_under_cargo_bench(args: &Args, name: &str) {
    if !args.bench {
        println!("{name}: a benchmark; run it with `cargo bench -p abide-redis --bench {name}`");
        std::process::exit(0);
    }
}
