//! The flags of `abide demo` and its long help.

use std::path::PathBuf;

const LONG_ABOUT: &str = "\
See the whole idea in about a minute, on this machine only (127.0.0.1):

1. A fake messaging provider starts in-process on a free loopback port, limited to --rate
   messages per second per key, and to 6 messages in flight, each taking 60 ms; both are
   advertised in its RateLimit fields (the in-flight limit as the policy \"conc\";q=6).
2. Its quirks switch on as the run goes (by request count): at 25% Retry-After turns from
   seconds into an HTTP-date; at 45-50% it answers 503 to every second request; at 65-75%
   it throttles with `403 Forbidden` and `Retry-After: 0`, like a misconfigured gateway.
3. --items messages go through the durable outbox (SQLite in a temp dir, or --db) with
   --workers concurrent senders sharing one pacer and one retry budget, started at twice the
   real limit so the pacer has something to learn.
4. The report puts side by side what the provider saw (requests, accepted, duplicates,
   rejections) and what abide decided (delivered, throttled, retried, deferred, failed),
   plus abide's own count of every status the provider answered, and a table of the
   phases: how long each took, what it accepted, and what share of the run it cost
   (its time beyond accepted / --rate), with the rate outside the 503 and 403 phases.

Expected: every message accepted exactly once (duplicates 0), few 429s per message, no
suspension, and an achieved rate below --rate: abide aims at 97% of the advertised limit,
the quirk phases cost pauses, and the advertised 6-in-flight limit (6 per 60 ms, at most
100 msg/s, less with loopback overhead) caps any --rate near or above that; abide holds a
send back rather than put a seventh request on the wire.

--db keeps the outbox for `abide status`; it must not exist yet (or be empty): the demo's
messages have fixed idempotency keys, so a second run on the same file would send nothing.

EXAMPLES
  cargo run --release -p abide -- demo
  abide demo --items 500 --rate 200          # a quick one
  abide demo --db demo.db && abide status --db demo.db

EXIT CODES
  0  every message delivered   1  some failed or deferred   2  usage error   130  Ctrl-C";

/// What the SMPP demo adds to `abide demo --help`.
const SMPP_HELP: &str = "\
--transport smpp runs the same minute over SMPP 3.4: a fake SMSC (`abide provider --smpp`)
limited to --rate submit_sm per second (0x58 ESME_RTHROTTLED beyond) and --workers
outstanding (0x14 ESME_RMSGQFUL beyond), each answered in 20 ms, receipts 200 ms after
acceptance. SMPP advertises no limit: abide starts at twice --rate and learns it from the
refusals. Quirks by submit count: at 25% the rate refusals turn to 0x14; at 45% it drops
every connection; at 65-75% each answer takes 300 ms more. The outbox binds once (window
--workers), re-binds after the drop, and waits up to 15 s for the last receipts. The
report shows what the SMSC saw (submit_sm, accepted, repeats by idempotency key, refusals
by command_status, binds, drops, receipts) beside what abide decided.";

/// Arguments of `abide demo`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = format!("{LONG_ABOUT}\n\n{SMPP_HELP}"))]
pub(crate) struct Args {
    /// Messages to send.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) items: u32,
    /// The provider's limit, messages per second per key (per bind over SMPP).
    #[arg(long, default_value_t = 75, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) rate: u32,
    /// Concurrent senders (over SMPP: the window of outstanding submit_sm).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: u16,
    /// Keep the outbox in this SQLite file (default: a temp dir, removed afterwards).
    #[arg(long, value_name = "PATH")]
    pub(crate) db: Option<PathBuf>,
    /// Print the final report as JSON (with the provider's stats under `provider_saw`, or
    /// the SMSC's under `smsc_saw`).
    #[arg(long)]
    pub(crate) json: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Seed for retry jitter.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// The provider: an HTTP API, or an SMSC over SMPP 3.4 (see below).
    #[arg(long, value_enum, default_value_t = Transport::Http)]
    pub(crate) transport: Transport,
    #[command(flatten)]
    pub(crate) logs: crate::logs::LogArgs,
}

/// What the demo's fake provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    Http,
    Smpp,
}
