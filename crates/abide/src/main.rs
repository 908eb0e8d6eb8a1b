//! `abide`: cooperate with rate limits on both sides of an API boundary.

use clap::{CommandFactory as _, Parser, Subcommand};

mod args;
mod cmd;
mod db;
mod deliver;
mod input;
mod logs;
mod providers;
mod report;

/// Cooperate with rate limits on both sides of an API boundary.
///
/// abide reads what a remote API says (429s, Retry-After in every RFC 9110 form, rate-limit
/// headers, SMPP throttle codes) and sends no faster than it allows, without losing work.
#[derive(Debug, Parser)]
#[command(name = "abide", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Explain how abide reads one response: verdict, delay and its reason, rate limits.
    Inspect(cmd::inspect::Args),
    /// Run a fake rate-limited messaging API on loopback, for tests, demos and benchmarks.
    Provider(Box<cmd::provider::Args>),
    /// Enqueue JSON lines and deliver them through the durable outbox until drained.
    Send(cmd::send::Args),
    /// Check a providers file, its credentials and an input as `send` does; send nothing.
    Check(cmd::check::Args),
    /// Run the outbox as a daemon with an HTTP API and Prometheus metrics.
    Serve(cmd::serve::Args),
    /// Run an HTTP reverse proxy that paces and retries any client's calls to providers.
    Proxy(cmd::proxy::Args),
    /// Show item counts per state and the oldest pending age of an outbox database.
    Status(cmd::status::Args),
    /// Move DEFERRED items back to QUEUED so they are tried again.
    Requeue(cmd::requeue::Args),
    /// Replay rate-limit incidents in virtual time and compare client policies.
    Sim(cmd::sim::Args),
    /// See the whole idea in one minute: a quirky provider on loopback, thousands of messages.
    Demo(cmd::demo::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::completions::Args),
    /// Print a man page (roff): abide(1), or one subcommand's.
    Man(cmd::man::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(a) => cmd::inspect::run(a),
        Command::Provider(a) => cmd::provider::run(*a),
        Command::Send(a) => cmd::send::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Proxy(a) => cmd::proxy::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Requeue(a) => cmd::requeue::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Completions(a) => cmd::completions::run(a, Cli::command()),
        Command::Man(a) => cmd::man::run(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        // The reader went away (`abide sim --json | head`): nothing left to tell anyone,
        // as with other Unix tools (ripgrep does the same).
        Err(e) if is_broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("abide: error: {}", error_chain(&e));
            std::process::ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes, each once: a cause whose text its parent already quotes (a
/// wrapped driver error that `Display`s its source, as sqlx's do) is not repeated. Any URL
/// left in it loses its password ([`abide_outbox::echo::redact_text`]) and the whole is
/// bounded ([`abide_outbox::echo::MAX_MESSAGE_BYTES`] per cause).
fn error_chain(e: &anyhow::Error) -> String {
    use abide_outbox::echo;
    let mut shown = String::new();
    let mut said = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if said.contains(&text) {
            continue;
        }
        said.push_str(&text);
        said.push('\n');
        if !shown.is_empty() {
            shown.push_str(": ");
        }
        shown.push_str(&echo::truncate(
            &echo::redact_text(&text),
            echo::MAX_MESSAGE_BYTES,
        ));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coordination key prefix each of `send`, `serve` and `status` would use.
    fn prefix_of(args: &[&str]) -> Result<String, String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        let cfg = abide_outbox::Config::from_toml_str(
            "[[provider]]\nname = \"a\"\nbase_url = \"https://api.example\"\n\
             [coordination]\nkey_prefix = \"from-file\"\n",
        )
        .expect("config");
        Ok(match cli.command {
            Command::Send(a) => a.redis.coordination_prefix(&cfg),
            Command::Serve(a) => a.redis.coordination_prefix(&cfg),
            Command::Status(a) => a.coordination_prefix(),
            other => panic!("{other:?}"),
        })
    }

    /// Every duration flag, given a negative value with a space or `=`: the parser sees
    /// it (not taken for another flag) and says it is negative and what is accepted.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_negative_duration_flag_says_so_on_every_command() {
        for (cmd, flag) in [
            (&["send", "--config", "p.toml"][..], "--unreachable-after"),
            (&["send", "--config", "p.toml"][..], "--lease"),
            (&["send", "--config", "p.toml"][..], "--receipt-wait"),
            (&["serve", "--config", "p.toml"][..], "--lease"),
            (&["check", "--config", "p.toml"][..], "--lease"),
            (&["proxy", "--config", "p.toml"][..], "--max-wait"),
        ] {
            for form in [
                vec![flag.to_owned(), "-1s".to_owned()],
                vec![format!("{flag}=-1s")],
            ] {
                let mut args = vec!["abide".to_owned()];
                args.extend(cmd.iter().map(|s| (*s).to_owned()));
                args.extend(form);
                let e = Cli::try_parse_from(&args)
                    .map(|_| ())
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains("negative duration") && e.contains("30s"),
                    "{args:?}: {e}"
                );
            }
        }
    }

    /// The proxy's listener flags: the connection cap by serve's rule (1..=65536), the
    /// minimum body rate in bytes per second.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_proxy_takes_a_connection_cap_and_a_minimum_body_rate() {
        let base = ["abide", "proxy", "--config", "p.toml"];
        let with = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            Cli::try_parse_from(v)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            with(&["--max-connections", "64", "--min-body-rate", "0"]),
            Ok(())
        );
        let e = with(&["--max-connections", "0"]).unwrap_err();
        assert!(e.contains("must be 1..=65536"), "{e}");
        assert!(with(&["--min-body-rate", "-5"]).is_err());
    }

    #[test]
    fn redis_prefix_flag_wins_over_the_file_and_is_checked() {
        let send = ["abide", "send", "--config", "p.toml", "in.jsonl"];
        assert_eq!(prefix_of(&send), Ok("from-file:coord".to_owned()));
        let with = |base: &[&str], p: &str| {
            let mut v = base.to_vec();
            v.extend(["--redis-prefix", p]);
            prefix_of(&v)
        };
        assert_eq!(with(&send, "tenant-b"), Ok("tenant-b:coord".to_owned()));
        let serve = ["abide", "serve", "--config", "p.toml", "--token-env", "T"];
        assert_eq!(with(&serve, "tenant-b"), Ok("tenant-b:coord".to_owned()));
        assert_eq!(
            prefix_of(&["abide", "status"]),
            Ok("abide:coord".to_owned())
        );
        assert_eq!(
            with(&["abide", "status"], "tenant-b"),
            Ok("tenant-b:coord".to_owned())
        );
        let e = with(&send, "a b").expect_err("a space is refused");
        assert!(
            e.contains("--redis-prefix") && e.contains("ASCII letters"),
            "{e}"
        );
    }
}
