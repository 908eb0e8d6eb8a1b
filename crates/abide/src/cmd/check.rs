//! `abide check`: validate a providers file, the credentials it names and an input, by the
//! same code as `abide send`, without opening a database or sending anything.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use abide_outbox::{Config, NewItem};
use serde::Serialize;

use crate::args::parse_lease;
use crate::input;
use crate::input::stream as input_stream;
use crate::providers::load_config;

const LONG_ABOUT: &str = "\
Check what `abide send` would check before it enqueues anything, and stop there: the
providers file (its syntax, every setting and its bounds, failover cycles), each provider's
credential (every credentials_env and password_env variable is set, non-empty and fit to be
sent; values are never shown), the request timeouts against --lease, and, when INPUT is
given, every line of it (its shape, its provider is configured, its path below the
provider's base path, one idempotency_key per message). No database is opened, no Redis or
provider is contacted, nothing is sent.

EXAMPLES
  abide check --config examples/providers.toml
  ABIDE_SMS_TOKEN=demo-key abide check --config examples/providers.toml examples/messages.jsonl
  generate-messages | abide check --config providers.toml -
  abide check --config providers.toml --json in.jsonl | jq .items

OUTPUT
  stdout: the providers and the items per provider (--json: one JSON object, with `ok`,
  `providers` [{name, concurrency, items}], `items`, and on an error `error` and `lines`
  [{line, message}]). Errors are also said on stderr, naming the file, the line and the
  setting or variable to fix.

EXIT CODES
  0    the providers file, its credentials and the input are as `abide send` needs them
  2    usage, config or input error, or an unset or unfit credential variable";

/// Arguments of `abide check`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = format!("{LONG_ABOUT}\n\n{}", input::FORMAT_HELP))]
pub(crate) struct Args {
    /// Providers file (TOML), as `abide send --config` reads it.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,
    /// JSON-lines input file, or `-` for stdin; every line is checked. Without it only the
    /// providers file and its credentials are.
    #[arg(value_name = "INPUT.jsonl|-")]
    pub(crate) input: Option<String>,
    /// The lease `abide send` will run with: each provider's timeout_secs + 2 s must fit in
    /// it. A number with a unit: e.g. 30s, 2m.
    #[arg(long, default_value = "30s", value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_lease)]
    pub(crate) lease: Duration,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct Summary {
    ok: bool,
    /// `config` or `input` when not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    lines: Vec<LineProblem>,
    providers: Vec<ProviderSummary>,
    /// Items in the input (none without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    items: Option<u64>,
}

#[derive(Debug, Serialize)]
struct LineProblem {
    line: usize,
    message: String,
}

#[derive(Debug, Serialize)]
struct ProviderSummary {
    name: String,
    concurrency: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    items: Option<u64>,
}

impl Summary {
    fn failed(stage: &'static str, error: String) -> Self {
        Self {
            ok: false,
            stage: Some(stage),
            error: Some(error),
            lines: Vec::new(),
            providers: Vec::new(),
            items: None,
        }
    }

    fn providers(cfg: &Config, per: Option<&BTreeMap<String, u64>>) -> Vec<ProviderSummary> {
        cfg.providers
            .iter()
            .map(|p| ProviderSummary {
                name: p.name.clone(),
                concurrency: p.concurrency(),
                items: per.map(|m| m.get(&p.name).copied().unwrap_or(0)),
            })
            .collect()
    }

    fn render_text(&self, config: &str, input: Option<&str>) -> String {
        let mut s = format!("{config}: {} provider(s) ok\n", self.providers.len());
        for p in &self.providers {
            s.push_str(&format!(
                "  {:<20} concurrency {:>4}",
                p.name, p.concurrency
            ));
            if let Some(n) = p.items {
                s.push_str(&format!("  {n} item(s)"));
            }
            s.push('\n');
        }
        if let (Some(src), Some(n)) = (input, self.items) {
            s.push_str(&format!("{src}: {n} item(s) ok; nothing was sent\n"));
        }
        s
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let fail = |summary: Summary, text: &str| -> anyhow::Result<ExitCode> {
        eprint!("{text}");
        if args.json {
            crate::cmd::out(&format!("{}\n", serde_json::to_string_pretty(&summary)?))?;
        }
        Ok(ExitCode::from(2))
    };
    let cfg = match load_config(&args.config, None, args.lease) {
        Ok(cfg) => cfg,
        Err(e) => {
            // As `main` shows errors: a URL in it (a Redis one) without its password.
            let text = abide_outbox::echo::redact_text(&format!("{e:#}"));
            return fail(
                Summary::failed("config", text.clone()),
                &format!("abide: error: {text}\n"),
            );
        }
    };
    let mut per = None;
    if let Some(src) = &args.input {
        // Count each item that passes the same check `send` applies, per provider.
        let counts: RefCell<BTreeMap<String, u64>> = RefCell::new(BTreeMap::new());
        let configured = input::configured(&cfg);
        let counting = |item: &NewItem| -> Result<(), String> {
            configured(item)?;
            *counts
                .borrow_mut()
                .entry(item.provider.clone())
                .or_insert(0) += 1;
            Ok(())
        };
        match input_stream::check(src, &counting, false)? {
            Ok(_) => per = Some(counts.into_inner()),
            Err(e) => {
                let mut summary = Summary::failed("input", format!("{src}: {e}"));
                summary.lines = e
                    .errors
                    .iter()
                    .map(|p| LineProblem {
                        line: p.at,
                        message: p.message.clone(),
                    })
                    .collect();
                return fail(summary, &format!("abide: {src}: {e}"));
            }
        }
    }
    let summary = Summary {
        ok: true,
        stage: None,
        error: None,
        lines: Vec::new(),
        providers: Summary::providers(&cfg, per.as_ref()),
        items: per.as_ref().map(|m| m.values().sum()),
    };
    if args.json {
        crate::cmd::out(&format!("{}\n", serde_json::to_string_pretty(&summary)?))?;
    } else {
        crate::cmd::out(
            &summary.render_text(&args.config.display().to_string(), args.input.as_deref()),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
