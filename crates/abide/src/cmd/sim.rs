//! `abide sim`: replay rate-limit incidents in virtual time and compare client policies.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use abide_sim::gateway::{Comparison, GATEWAYS};
use abide_sim::{PolicyKind, Scenario, ScenarioReport};
use anyhow::Context;

/// What `abide sim --help` shows after the options: the scenarios, policies and columns.
const SIM_HELP: &str = "\
Each scenario runs every policy against the same simulated provider with the same seed,
prints a table and writes an SVG of request rate and 429 rate over time. Hours of virtual
time take milliseconds; the same seed always gives the same numbers.

Scenarios:
  limit-appears     a 10/s limit appears under 14/s offered by 40 workers; 2 min grace,
                    then abuse protection suspends the account
  http-date-switch  Retry-After turns from seconds into an HTTP-date as load peaks
  retry-after-zero  an edge answers 403 with Retry-After: 0 for 30 s
  retry-after-huge  a 5 s blip of 503 with Retry-After: 86400
  queue-throttling  throttle taken as terminal (two buckets) vs three buckets
  limit-changes     10/s -> 5/s -> 20/s with RateLimit headers: time to converge,
                    throttled fraction
  limit-changes-blind  the same without RateLimit headers: learned from throttles alone
  gcra-no-headers   the loopback politeness bench: 32 workers, GCRA 200 -> 100 -> 300/s,
                    burst 10, Retry-After: 1, no headers, pacer starting at 1,000/s
  burst-job         3,000 items at once, 40 workers, a fixed window of 100/s with
                    RateLimit headers, from a cold start
  burst-job-blind   the same without RateLimit headers
  graphql-200       a GraphQL API throttling with 200, THROTTLED and the query cost in the
                    body: a client trusting the status counts those items as delivered
  gateway-bare      the server's side: a shared quota of 600 a minute exhausted
                    at a 10-minute peak of 14/s; its 429s carry no Retry-After
  gateway-reset     the same, each 429 carrying the gate's own reset, rounded up
  gateway-delay     the same quota as a GCRA holding requests until their slot (50 waiting,
                    5 s at most), then refusing with the honest Retry-After
  gateway-*         all three, then a table of them side by side: 429s in the peak five
                    minutes, goodput, p99 round trip of accepted requests

Policies:
  no-retry            one attempt; any failure is final (the two-bucket client)
  fixed-retries       5 retries of every non-2xx at 1, 2, 4, 8, 16 s, ignoring Retry-After
  honour-retry-after  obeys Retry-After (seconds or date) unclamped; no pacer, no budget
  integer-only        reads Retry-After only as an integer, zero otherwise (a client bug seen
                      in an incident)
  full-jitter         ignores Retry-After; 5 retries of 403/429/5xx after a full jitter
                      backoff, uniform in [0, min(32 s, 1 s x 2^retry)]
  abide               abide-core: classify, clamp Retry-After to [1 s, 10 min], one shared
                      retry budget and a pacer that learns the limit (ceiling estimate,
                      cubic recovery); retries are queued, not slept on

Columns:
  429/req   429s per logical request       429/hit  429s per request that met one
  rej/req   non-2xx answers per request    lost     good items written off
  bad       genuinely bad items (failed)   deferred parked for a person after 12 attempts
  goodput   delivered / what the limit allowed until completion
  blocked   suspensions by abuse protection and their total length
  false ok  items the client took as delivered that the provider refused (a 200
            throttle read by its status); shown when any. 429s counts those throttles too

Examples:
  abide sim --all
  abide sim --scenario http-date-switch --policy integer-only --policy abide
  abide sim --scenario limit-changes --json --no-plot
  abide sim --scenario 'gateway-*' --no-plot";

/// Arguments of `abide sim`.
#[derive(Debug, clap::Args)]
#[command(after_help = SIM_HELP)]
pub(crate) struct Args {
    /// Scenario to run (see below); `gateway-*` runs the three gateway scenarios.
    #[arg(long, value_parser = parse_scenario, required_unless_present = "all")]
    scenario: Option<Pick>,
    /// Run every scenario.
    #[arg(long, conflicts_with = "scenario")]
    all: bool,
    /// Only these policies (repeatable); default all.
    #[arg(long = "policy", value_parser = parse_policy)]
    policies: Vec<PolicyKind>,
    /// Seed of the simulation's random streams (arrivals, latency jitter, policy jitter).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Directory for the SVG plots.
    #[arg(long, default_value = "sim-out")]
    out: PathBuf,
    /// Skip writing plots.
    #[arg(long)]
    no_plot: bool,
    /// Print JSON (one array of scenario reports) instead of tables.
    #[arg(long)]
    json: bool,
}

/// The scenarios `--scenario` names: one, or the gateway group.
#[derive(Debug, Clone)]
struct Pick(Vec<Scenario>);

fn parse_scenario(s: &str) -> Result<Pick, String> {
    if s == "gateway-*" {
        return Ok(Pick(GATEWAYS.to_vec()));
    }
    s.parse()
        .map(|one| Pick(vec![one]))
        .map_err(|e: abide_core::UnknownName| format!("{e} (or gateway-*)"))
}

fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    s.parse()
        .map_err(|e: abide_core::UnknownName| e.to_string())
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scenarios: Vec<Scenario> = match args.scenario {
        Some(Pick(s)) => s,
        None => Scenario::ALL.to_vec(),
    };
    let policies = if args.policies.is_empty() {
        PolicyKind::ALL.to_vec()
    } else {
        args.policies.clone()
    };
    let reports: Vec<ScenarioReport> = scenarios
        .iter()
        .map(|s| s.run_policies(&policies, args.seed))
        .collect();
    let mut plots = Vec::new();
    if !args.no_plot {
        std::fs::create_dir_all(&args.out)
            .with_context(|| format!("creating {}", args.out.display()))?;
        for r in &reports {
            plots.push(abide_sim::plot::write_svg(r, &args.out)?);
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &reports)?;
        writeln!(out)?;
    } else {
        for (k, r) in reports.iter().enumerate() {
            write!(out, "{r}")?;
            if let Some(p) = plots.get(k) {
                writeln!(out, "plot: {}", p.display())?;
            }
            writeln!(out)?;
        }
        let gateways: Vec<ScenarioReport> = GATEWAYS
            .iter()
            .filter_map(|g| reports.iter().find(|r| r.scenario == g.as_str()).cloned())
            .collect();
        if gateways.len() == GATEWAYS.len() {
            write!(out, "{}", Comparison::of(&gateways))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
