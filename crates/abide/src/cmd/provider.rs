//! `abide provider`: run the fake rate-limited messaging API of `abide-fake`.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;

use abide_core::SystemClock;
use abide_fake::{
    parse_duration, Algorithm, ApiKey, GateMode, HeaderStyle, Listeners, ProviderConfig, Rate,
    ReceiptPolicy, RedisUrl, ScheduleEntry, SmppAccount, SuspensionStyle, ThrottleStyle,
};
use anyhow::Context;

const LONG_HELP: &str = "\
ENDPOINTS
  POST /v1/messages   JSON object body, `Authorization: Bearer <key>`, optional
                      `Idempotency-Key`. 202 {\"id\":\"msg_...\"}. A repeated idempotency key
                      gets the original answer and counts as a duplicate; a message is never
                      accepted twice. Unknown key: 401. Body not a JSON object: 400
                      {\"error\":\"invalid_json\"}; body over 2 MiB: 413. An Idempotency-Key
                      that is empty, repeated or over 255 bytes: 400
                      {\"error\":\"invalid_idempotency_key\"}.
  GET /v1/quota       The caller's gates (limit, remaining, reset) as JSON and RateLimit
                      headers. Needs a key; never charges; answers while exhausted.
  GET /v1/export?bytes=N  N bytes (at most 1 GiB) streamed in 64 KiB chunks; no key, no
                      limits, not counted (a large download, for streaming tests).
  GET /_stats         JSON: requests, accepted, duplicates, rejected, rejected_by_reason,
                      rejected_by_status, suspensions, grace_passes, in_flight, and a
                      per-second histogram (requests and throttled; last 3600 s).
  GET /healthz        ok

LIMITS (flags override --config)
  Rates are COUNT/PERIOD: 10/s, 600/1m, 1/1h; `off` disables. Over a rate or concurrency
  limit a request is throttled (see throttle= below). --algorithm chooses how rates count:
    gcra            (default) GCRA, a token bucket: COUNT per PERIOD on average, the burst
                    back to back from idle, then one every PERIOD/COUNT.
    fixed-window    COUNT per window, reset when the window ends (most web frameworks'
                    counter): a whole quota fits at the end of one window and again at the
                    start of the next. Windows follow each other from a key's first request.
    sliding-window  the current window's count plus the previous window's, weighted by the
                    part the sliding window still covers, stays within COUNT.
  The window algorithms take the whole COUNT in a burst and ignore --key-burst and
  --account-burst. All three send the same 429, Retry-After and RateLimit fields. Reasons: key_rate, account_rate,
  concurrency, account_concurrency. An honest 429 carries Retry-After (delay-seconds,
  rounded up, at least 1), RateLimit-Policy, RateLimit and {\"error\":\"rate_limited\",
  \"reason\":\"key_rate\"}.
  --gate-mode delay (gcra only) holds a request over a rate until its slot instead, the
  shape of nginx's `limit_req burst=N delay=M`: at most --delay-burst such requests wait
  per rate gate [default: 50], none longer than --max-delay [default: 500ms]; beyond that
  bound the same honest 429. A held request keeps its concurrency slot while it waits. A
  client that disconnects while held gives its slot back.
  /_stats counts delayed, delay_ms and abandoned.

HEADER STYLES: --headers STYLE (TOML headers = \"STYLE\")
  ietf         RateLimit-Policy: \"key\";q=10;w=1 and RateLimit: \"key\";r=0;t=1 (current draft)
  draft-6      RateLimit-Policy: 10;w=1, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset
  x-ratelimit  X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (epoch seconds)
  With a style, every accepted answer and every 429 carries the limits in it, whatever the
  retry-after behaviour (retry-after=absent then leaves them the only guide). Resets are
  rounded up to whole seconds. Without --headers, IETF fields go on accepted answers and on
  honest (retry-after=seconds) throttles only.

THROTTLE STYLES: --throttle-style STYLE (or --behaviour throttle=STYLE[@WHEN])
  Vendors' own throttle shapes, most not a 429; none carries Retry-After or rate-limit
  headers, as the vendor's does not:
  graphql-200     200 {\"errors\":[{\"extensions\":{\"code\":\"THROTTLED\"}}]} with Shopify's query
                  cost: (requestedQueryCost - currentlyAvailable) / restoreRate is the wait
  salesforce-403  403 [{\"errorCode\":\"REQUEST_LIMIT_EXCEEDED\"}]
  google-403      403 {\"error\":{\"errors\":[{\"domain\":\"usageLimits\",
                  \"reason\":\"userRateLimitExceeded\"}]}}
  slack-200       200 {\"ok\":false,\"error\":\"ratelimited\"}
  meta-400        400 {\"error\":{\"code\":4,\"type\":\"OAuthException\"}}
  aws-400         400 x-amzn-ErrorType and {\"__type\":\"ThrottlingException\"}
  s3-503          503 <Error><Code>SlowDown</Code></Error>
  azure-503       503 x-ms-error-code: ServerBusy and <Error><Code>ServerBusy</Code></Error>
  discord-429     429 without Retry-After, {\"retry_after\": SECONDS} the only wait
  quota-429       429 {\"error\":{\"code\":\"insufficient_quota\"}}: out of credit, not a rate
                  limit (abide defers such items for a person; it never retries them)

BEHAVIOURS: --behaviour FACET=VALUE[@WHEN] (repeatable, applied in order)
  WHEN is a time since start (500ms, 60s, 2m, 1h) or #N (from the N-th message request on,
  counting every request). Without @WHEN the change applies from the start.
  retry-after=STYLE  Retry-After on throttles: seconds (default), imf-fixdate (alias
                     http-date), rfc850, asctime, zero (`0`), huge (`86400`), garbage
                     (`soon-ish`), absent. Only `seconds` also sends RateLimit fields.
  throttle=STYLE     429 (default); 403 (403, Retry-After: 0, empty body, like a
                     misconfigured gateway); smpp-200 (HTTP 200 with {\"command_status\":N});
                     smpp-429 (429 with {\"command_status\":N} and Retry-After); or a
                     vendor's shape (THROTTLE STYLES above).
  smpp-status=N      command_status for the smpp styles (88 ESME_RTHROTTLED, default;
                     20 ESME_RMSGQFUL).
  fail-503=F         Answer a fraction F (0..1) of message requests 503 before any limit,
                     evenly spread (0.25 = every 4th). A 503 burst is fail-503=1@10s followed
                     by fail-503=0@20s.
  throttle-fraction=F | random:F[:SEED]
                     Answer a fraction F (0..1) of message requests 429 with Retry-After: 1
                     whatever the rate (throttles that do not follow the pace), evenly
                     spread (0.05 = every 20th) or at random from a stream seeded with SEED
                     (default 0; the same seed refuses the same requests). The SMSC answers
                     such a submit_sm with smpp-status (0x58 by default).
  grace=on|off       Grace period: throttled requests still get a 429, but the next attempt
                     with the same Idempotency-Key is accepted (counted as grace_passes).
                     Turn it off on a schedule to start enforcing (grace=off@#100).
  SMPP listener (#N counts submit_sm PDUs there):
  throttle=smpp-0x58|smpp-0x14
                     command_status of an over-rate submit_sm: 0x58 ESME_RTHROTTLED
                     (default) or 0x14 ESME_RMSGQFUL (sets smpp-status; HTTP unaffected).
  bind=refuse|accept Binds answered ESME_RBINDFAIL (0x0D) from WHEN on, or accepted again.
  drop-after=N|off   Each connection is closed after its N-th PDU, which is acted on (a
                     submit_sm is accepted) but never answered.
  drop=all@WHEN      Close every open connection once, at WHEN.
  slow=DURATION      Hold each submit_sm_resp this long (at most 60s; holds the PDU's
                     concurrency slot); slow=0ms ends it.
  congestion=F       Answer a fraction F of submit_sm with the throttle status before any
                     limit (a congested SMSC), evenly spread.
  receipt=STATE      Receipts of messages accepted from WHEN on report delivered (stat:DELIVRD,
                     default), undeliverable (UNDELIV), expired (EXPIRED) or rejected
                     (REJECTD), with the matching message_state TLV.

ABUSE PROTECTION
  --abuse-threshold N suspends a key after N throttled requests within --abuse-window;
  for --suspend-for (real providers suspend for 1h or 24h) its requests get 403 {\"error\":\"suspended\"}.
  --suspension-style retry-after (default) adds Retry-After: the remaining suspension in
  seconds, rounded up, at least 1; abide reads a 403 with Retry-After as a throttle, so
  its items wait PENDING. --suspension-style bare-403 sends no Retry-After, as many real
  abuse systems do: a client cannot tell a block from a refusal, and abide fails the items
  unless its providers file says [provider.classify.http] 403 = \"throttle\".

SHARED LIMITS (--redis redis://127.0.0.1:6379)
  Several provider instances started with the same --redis URL, --redis-prefix and limits
  enforce one set of gates: each decision is one Lua script in Redis (time from the Redis
  server), concurrency slots are leases that expire there if an instance dies. Every
  authenticated request is counted, duplicates included. If Redis cannot decide, the
  answer is 503 with Retry-After: 1, never an unlimited pass.

SMPP (--smpp 127.0.0.1:2775)
  A fake SMSC speaking SMPP 3.4 (rusmpp), beside the HTTP API or instead of it
  (--listen off). Same gates and schedule: the system_id is the key, its account the
  account (so the HTTP defaults apply: 10/s and 4 unanswered submit_sm per system_id, 50/s
  per account). bind_transmitter / bind_receiver / bind_transceiver check system_id and
  password (--smpp-account; default demo / demo-pw, account demo): unknown system_id
  ESME_RINVSYSID 0x0F, wrong password ESME_RINVPASWD 0x0E, bind=refuse ESME_RBINDFAIL 0x0D.
  submit_sm -> submit_sm_resp with a 10-digit message_id. Over a rate: behaviour smpp-status
  (0x58 by default); over key/account concurrency (submit_sm awaiting their answer, i.e. the
  client's window): --smpp-concurrency-status (0x14 by default).
  Exactly-once check: vendor TLV 0x1400 (SMPP 3.4 5.3.2) = the idempotency key's bytes. A key
  already accepted is a repeat: the same message_id, no second delivery or receipt. Without
  the TLV, (source_addr, destination_addr, short_message) repeats are counted and accepted.
  Receipts: deliver_sm to receiver/transceiver binds of the system_id, --receipt-delay after
  acceptance, for submits whose registered_delivery asks (--receipts always|never to
  override), esm_class 0x04, TLVs receipted_message_id and message_state, text
  \"id:0000000001 sub:001 dlvr:001 submit date:YYMMDDhhmm done date:YYMMDDhhmm stat:DELIVRD
  err:000 text:...\". Receipts not acknowledged when a connection ends wait for the next bind.
  enquire_link answered; unbind -> unbind_resp and close. Bad PDUs: generic_nack
  ESME_RINVCMDLEN (body does not decode) or ESME_RINVCMDID (command not served); a
  command_length over 64 KiB is refused before reading and the connection closed.
  Bounds: [smpp] window_cap (unanswered PDUs per connection; reading stops beyond),
  max_connections, bind_timeout_secs, idle_timeout_secs. /_stats gains \"smpp\": binds,
  pdus_received / pdus_sent by command, responses_by_status, accepted, repeats,
  content_repeats, repeats_by_key, throttled, receipts_sent / _acknowledged / _pending,
  sequence_reuses (a request number reused on a connection), connections_dropped by reason.

CONFIG FILE (--config provider.toml)
  latency_ms = 0
  redis_url = \"redis://127.0.0.1:6379\"   # redis_prefix = \"abide:provider\"
  [[api_keys]]
  key = \"demo-key\"
  account = \"demo\"
  [limits]
  key_rate = \"10/s\"        # key_burst, account_rate, account_burst, key_concurrency,
  account_concurrency = 8  # lease_secs
  algorithm = \"gcra\"       # or \"fixed-window\", \"sliding-window\"
  gate_mode = \"refuse\"     # or \"delay\" (delay_burst = 50, max_delay_ms = 500)
  [abuse]
  threshold = 20           # window_secs = 60, suspend_secs = 3600,
  suspension = \"retry-after\"  # or \"bare-403\"
  [behaviour]
  retry_after = \"seconds\"  # throttle, smpp_status, fail_503, grace, throttle_fraction,
                           # throttle_spread = \"random\", throttle_seed
  [[schedule]]
  at_secs = 60             # or at_request = 100
  retry_after = \"imf-fixdate\"  # SMPP: bind_refusal, drop_after_pdus, slow_ms,
                                # congestion, receipt_state, drop_connections = true
  [smpp]
  receipt_delay_ms = 500   # receipts = \"requested\" | \"always\" | \"never\"
  concurrency_status = 20  # window_cap = 1024, max_connections = 256,
                           # bind_timeout_secs = 30, idle_timeout_secs = 300
  [[smpp.accounts]]
  system_id = \"demo\"
  password = \"demo-pw\"
  account = \"demo\"

The first line on stdout is `listening on http://ADDR`, then `listening on smpp://ADDR`
with --smpp (only the latter with --listen off). Logs go to stderr and never contain API
keys or SMPP passwords (callers appear as a hash prefix, e.g. k:1a2b3c4d).";

/// Arguments of `abide provider`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    /// HTTP address to listen on, or `off`; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR|off")]
    listen: String,
    /// Also run a fake SMSC (SMPP 3.4) on this address, e.g. 127.0.0.1:2775 (see SMPP below).
    #[arg(long, value_name = "ADDR")]
    smpp: Option<SocketAddr>,
    /// SMPP login `SYSTEM_ID:PASSWORD[:ACCOUNT]` (repeatable; replaces the configured ones).
    /// Default: demo:demo-pw:demo.
    #[arg(long = "smpp-account", value_name = "SYSTEM_ID:PASSWORD[:ACCOUNT]")]
    smpp_accounts: Vec<String>,
    /// Time from an accepted submit_sm to its delivery receipt [default: 500ms].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    receipt_delay: Option<String>,
    /// Which accepted messages get a receipt: requested (registered_delivery asks),
    /// always, never [default: requested].
    #[arg(long, value_name = "POLICY")]
    receipts: Option<String>,
    /// command_status of a submit_sm over a concurrency limit: 0x14 (ESME_RMSGQFUL) or 0x58
    /// (ESME_RTHROTTLED) [default: 0x14].
    #[arg(long, value_name = "STATUS")]
    smpp_concurrency_status: Option<String>,
    /// TOML configuration file; flags given as well override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Accepted API key, `KEY` or `KEY:ACCOUNT` (repeatable; replaces the configured keys).
    /// Default: demo-key (account demo).
    #[arg(long = "api-key", value_name = "KEY[:ACCOUNT]")]
    api_keys: Vec<String>,
    /// Sustained rate per key, COUNT/PERIOD or `off` [default: 10/s].
    #[arg(long, value_name = "RATE")]
    key_rate: Option<String>,
    /// Burst per key [default: the rate's COUNT].
    #[arg(long, value_name = "N")]
    key_burst: Option<u32>,
    /// Sustained rate per account, COUNT/PERIOD or `off` [default: 50/s].
    #[arg(long, value_name = "RATE")]
    account_rate: Option<String>,
    /// Burst per account [default: the rate's COUNT].
    #[arg(long, value_name = "N")]
    account_burst: Option<u32>,
    /// Requests in flight per key, or `off` [default: 4].
    #[arg(long, value_name = "N")]
    key_concurrency: Option<String>,
    /// Requests in flight per account, or `off` [default: off].
    #[arg(long, value_name = "N")]
    account_concurrency: Option<String>,
    /// How rates count: gcra, fixed-window or sliding-window [default: gcra].
    #[arg(long, value_name = "ALGORITHM")]
    algorithm: Option<String>,
    /// Over a rate: `refuse` (429 at once) or `delay` (hold until the slot, within
    /// --delay-burst and --max-delay) [default: refuse].
    #[arg(long, value_name = "MODE")]
    gate_mode: Option<String>,
    /// In delay mode, requests over the rate that may wait per rate gate [default: 50].
    #[arg(long, value_name = "N")]
    delay_burst: Option<u32>,
    /// In delay mode, the longest a request is held [default: 500ms].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    max_delay: Option<String>,
    /// A concurrency slot not released by then is freed [default: 30s].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    lease: Option<String>,
    /// Processing time of each accepted message (holds its concurrency slot) [default: 0ms].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    latency: Option<String>,
    /// Throttled requests within --abuse-window that suspend a key; 0 = off [default: 0].
    #[arg(long, value_name = "N")]
    abuse_threshold: Option<u32>,
    /// Window for --abuse-threshold [default: 60s].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    abuse_window: Option<String>,
    /// Suspension length [default: 1h].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    suspend_for: Option<String>,
    /// Answer to a suspended key: `retry-after` (403 with the remaining suspension as
    /// Retry-After) or `bare-403` (no Retry-After) [default: retry-after].
    #[arg(long, value_name = "STYLE")]
    suspension_style: Option<String>,
    /// Rate-limit header style on every accepted answer and every 429: ietf, draft-6 or
    /// x-ratelimit (see HEADER STYLES below) [default: IETF on honest throttles only].
    #[arg(long, value_name = "STYLE")]
    headers: Option<String>,
    /// Keep the gates in Redis at URL, so every instance with the same URL and prefix
    /// enforces one set of limits (see SHARED LIMITS below) [default: in memory].
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Prefix of the gate keys in Redis [default: abide:provider].
    #[arg(long, value_name = "PREFIX")]
    redis_prefix: Option<String>,
    /// How throttles are answered from the start, as `--behaviour throttle=STYLE`: 429,
    /// 403, smpp-200, smpp-429, or a vendor's shape (see THROTTLE STYLES below)
    /// [default: 429].
    #[arg(long, value_name = "STYLE")]
    throttle_style: Option<String>,
    /// Behaviour change FACET=VALUE[@WHEN], repeatable (see BEHAVIOURS below).
    #[arg(long = "behaviour", value_name = "FACET=VALUE[@WHEN]")]
    behaviours: Vec<String>,
    #[command(flatten)]
    pub(crate) logs: crate::logs::LogArgs,
}

fn opt_rate(s: &str) -> anyhow::Result<Option<Rate>> {
    Ok(if s == "off" { None } else { Some(s.parse()?) })
}

fn opt_count(s: &str) -> anyhow::Result<Option<u32>> {
    Ok(if s == "off" {
        None
    } else {
        Some(s.parse().with_context(|| format!("{s:?} is not a count"))?)
    })
}

/// Whole seconds, rounded up: `500ms` must not become 0 (a zero window or suspension
/// silently switches abuse protection off).
fn secs(s: &str) -> anyhow::Result<u64> {
    Ok(abide_core::retry_after::ceil_secs(parse_duration(s)?))
}

/// The configuration: the file if given, then flags on top.
fn config(a: &Args) -> anyhow::Result<ProviderConfig> {
    let mut c = match &a.config {
        Some(p) => {
            let text = abide_outbox::read_bounded(p, abide_outbox::MAX_FILE_BYTES)
                .with_context(|| format!("reading {}", p.display()))?;
            ProviderConfig::from_toml_str(&text).with_context(|| format!("in {}", p.display()))?
        }
        None => ProviderConfig::default(),
    };
    if !a.api_keys.is_empty() {
        c.api_keys = a
            .api_keys
            .iter()
            .map(|k| k.parse::<ApiKey>())
            .collect::<Result<_, _>>()?;
    }
    let l = &mut c.limits;
    if let Some(v) = &a.key_rate {
        l.key_rate = opt_rate(v)?;
    }
    if let Some(v) = a.key_burst {
        l.key_burst = Some(v);
    }
    if let Some(v) = &a.account_rate {
        l.account_rate = opt_rate(v)?;
    }
    if let Some(v) = a.account_burst {
        l.account_burst = Some(v);
    }
    if let Some(v) = &a.key_concurrency {
        l.key_concurrency = opt_count(v)?;
    }
    if let Some(v) = &a.account_concurrency {
        l.account_concurrency = opt_count(v)?;
    }
    if let Some(v) = &a.algorithm {
        l.algorithm = v.parse::<Algorithm>()?;
    }
    if let Some(v) = &a.gate_mode {
        l.gate_mode = v.parse::<GateMode>()?;
    }
    if let Some(v) = a.delay_burst {
        l.delay_burst = v;
    }
    if let Some(v) = &a.max_delay {
        l.max_delay_ms = u64::try_from(parse_duration(v)?.as_millis()).unwrap_or(u64::MAX);
    }
    if let Some(v) = &a.lease {
        l.lease_secs = secs(v)?;
    }
    if let Some(v) = &a.latency {
        c.latency_ms = u64::try_from(parse_duration(v)?.as_millis()).unwrap_or(u64::MAX);
    }
    if let Some(v) = a.abuse_threshold {
        c.abuse.threshold = v;
    }
    if let Some(v) = &a.abuse_window {
        c.abuse.window_secs = secs(v)?;
    }
    if let Some(v) = &a.suspend_for {
        c.abuse.suspend_secs = secs(v)?;
    }
    if let Some(v) = &a.suspension_style {
        c.abuse.suspension = v.parse::<SuspensionStyle>()?;
    }
    if let Some(v) = &a.headers {
        c.headers = Some(v.parse::<HeaderStyle>()?);
    }
    if let Some(v) = &a.redis {
        c.redis_url = Some(RedisUrl(v.clone()));
    }
    if let Some(v) = &a.redis_prefix {
        c.redis_prefix = v.clone();
    }
    if let Some(v) = &a.throttle_style {
        c.behaviour.throttle = v
            .parse::<ThrottleStyle>()
            .with_context(|| format!("--throttle-style {v:?}"))?;
    }
    for b in &a.behaviours {
        c.schedule.push(b.parse::<ScheduleEntry>()?);
    }
    if !a.smpp_accounts.is_empty() {
        c.smpp.accounts = a
            .smpp_accounts
            .iter()
            .map(|s| SmppAccount::from_str(s))
            .collect::<Result<_, _>>()?;
    }
    if let Some(v) = &a.receipt_delay {
        c.smpp.receipt_delay_ms = u64::try_from(parse_duration(v)?.as_millis()).unwrap_or(u64::MAX);
    }
    if let Some(v) = &a.receipts {
        c.smpp.receipts = v.parse::<ReceiptPolicy>()?;
    }
    if let Some(v) = &a.smpp_concurrency_status {
        c.smpp.concurrency_status = status(v)?;
    }
    c.validate()?;
    Ok(c)
}

/// A command_status written `0x14` or `20`.
fn status(s: &str) -> anyhow::Result<u32> {
    abide_core::classify::smpp::parse_command_status(s)
        .with_context(|| format!("{s:?} is not a command_status (0x14, 0x58, or decimal)"))
}

/// The listeners: HTTP unless `--listen off`, SMPP with `--smpp`.
fn listeners(a: &Args) -> anyhow::Result<Listeners> {
    let http = match a.listen.as_str() {
        "off" => None,
        s => Some(
            s.parse::<SocketAddr>()
                .with_context(|| format!("--listen {s:?}: expected ADDR:PORT or off"))?,
        ),
    };
    if http.is_none() && a.smpp.is_none() {
        anyhow::bail!("--listen off needs --smpp ADDR (nothing to listen on)");
    }
    Ok(Listeners { http, smpp: a.smpp })
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = config(&args)?;
    let listen = listeners(&args)?;
    args.logs.init("info");
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let p = abide_fake::spawn_listeners(cfg, Arc::new(SystemClock), listen)
            .await
            .with_context(|| {
                let mut on = Vec::new();
                if let Some(a) = listen.http {
                    on.push(format!("--listen {a}"));
                }
                if let Some(a) = listen.smpp {
                    on.push(format!("--smpp {a}"));
                }
                format!("cannot listen on {}", on.join(" and "))
            })?;
        let mut out = std::io::stdout().lock();
        if listen.http.is_some() {
            writeln!(out, "listening on {}", p.url())?;
        }
        if let Some(a) = p.smpp_addr() {
            writeln!(out, "listening on smpp://{a}")?;
        }
        out.flush()?;
        drop(out);
        tokio::signal::ctrl_c().await?;
        p.shutdown().await?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn command_status_in_hex_or_decimal() {
        assert_eq!(status("0x14").unwrap(), 20);
        assert_eq!(status("88").unwrap(), 0x58);
        assert!(status("0xZZ").is_err());
    }

    #[test]
    fn sub_second_durations_round_up_not_down_to_zero() {
        assert_eq!(secs("500ms").unwrap(), 1);
        assert_eq!(secs("1500ms").unwrap(), 2);
        assert_eq!(secs("60s").unwrap(), 60);
        assert_eq!(secs("0s").unwrap(), 0);
    }
}
