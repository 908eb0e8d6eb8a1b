//! [`Behaviour`]: how throttled and other requests are answered, and the styles it names.

use serde::Deserialize;

/// How a throttled request is answered. All facets can change on a schedule. The HTTP
/// listener reads the HTTP facets, the SMPP listener the SMPP ones (`smpp_status` is
/// shared: the SMPP listener's over-rate `command_status`).
///
/// # Default
/// `Retry-After` as delay-seconds, HTTP 429, SMPP status 88 (`ESME_RTHROTTLED`), no 503s,
/// no throttles whatever the rate (spread evenly, seed 0 when random), no grace; SMPP: binds accepted, no drops, no slow answers, no congestion.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Behaviour {
    /// Form of `Retry-After` on 429s.
    pub retry_after: RetryAfterStyle,
    /// Status and body of a throttle.
    pub throttle: ThrottleStyle,
    /// SMPP `command_status` put in the body by the `smpp-*` throttle styles, and the one
    /// the SMPP listener answers an over-rate `submit_sm` with (88 = `ESME_RTHROTTLED`,
    /// 20 = `ESME_RMSGQFUL`).
    pub smpp_status: u32,
    /// Fraction of message requests answered 503 before any limit is checked, 0.0 to 1.0;
    /// spread evenly and deterministically (0.25 = every 4th request).
    pub fail_503: f64,
    /// Fraction of message requests refused whatever the rate (throttles that do not
    /// follow the pace: noise, a key shared with another client), 0.0 to 1.0, before any
    /// limit is checked: over HTTP `429` with `Retry-After: 1`, over SMPP a `submit_sm`
    /// answered [`Behaviour::smpp_status`]. Spread as [`Behaviour::throttle_spread`] says.
    pub throttle_fraction: f64,
    /// How [`Behaviour::throttle_fraction`] is spread over the requests: evenly and
    /// deterministically like [`Behaviour::fail_503`] (0.05 = every 20th), or at random.
    pub throttle_spread: Spread,
    /// Seed of the random stream behind [`Spread::Random`] (one stream per listener, seeded
    /// again whenever the seed in force changes): the same seed draws the same refusals for
    /// the same sequence of requests.
    pub throttle_seed: u64,
    /// Grace period: throttled requests still get a 429, but the next attempt with the same
    /// `Idempotency-Key` is accepted whatever the limits say.
    pub grace: bool,
    /// SMPP: every bind is refused with `ESME_RBINDFAIL` (0x0D).
    pub bind_refusal: bool,
    /// SMPP: a connection is closed after its N-th PDU, which is acted on but never
    /// answered (0 = never).
    pub drop_after_pdus: u64,
    /// SMPP: extra time before each `submit_sm_resp`, in milliseconds (at most
    /// [`MAX_SLOW_MS`](super::MAX_SLOW_MS)); it holds the PDU's concurrency slot meanwhile.
    pub slow_ms: u64,
    /// SMPP: fraction of `submit_sm` answered with [`Behaviour::smpp_status`] before any
    /// limit (a congested SMSC), 0.0 to 1.0, spread evenly and deterministically.
    pub congestion: f64,
    /// SMPP: the outcome receipts of messages accepted from now on report.
    pub receipt_state: ReceiptState,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            retry_after: RetryAfterStyle::Seconds,
            throttle: ThrottleStyle::Http429,
            smpp_status: 88,
            fail_503: 0.0,
            throttle_fraction: 0.0,
            throttle_spread: Spread::Even,
            throttle_seed: 0,
            grace: false,
            bind_refusal: false,
            drop_after_pdus: 0,
            slow_ms: 0,
            congestion: 0.0,
            receipt_state: ReceiptState::Delivered,
        }
    }
}

abide_core::named_enum! {
/// The form of `Retry-After` (RFC 9110 §10.2.3) on a throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum RetryAfterStyle("retry-after style") {
    /// Delay-seconds, rounded up, at least 1 (the honest default).
    Seconds = "seconds",
    /// An IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    ImfFixdate = "imf-fixdate" | "http-date",
    /// The obsolete RFC 850 date, e.g. `Sunday, 06-Nov-94 08:49:37 GMT`.
    Rfc850 = "rfc850",
    /// The obsolete asctime date, e.g. `Sun Nov  6 08:49:37 1994`.
    Asctime = "asctime",
    /// `0`, whatever the real wait.
    Zero = "zero" | "0",
    /// `86400` (a day).
    Huge = "huge",
    /// Something unparseable (`soon-ish`).
    Garbage = "garbage",
    /// No `Retry-After` at all.
    Absent = "absent",
}}

abide_core::named_enum! {
/// How a throttled request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum ThrottleStyle("throttle style") {
    /// 429 with `Retry-After` and a JSON reason.
    Http429 = "429",
    /// 403 with `Retry-After: 0` and an empty body (a misconfigured gateway).
    Http403 = "403",
    /// 200 with `{"command_status": N}`: an SMPP-style throttle hidden in a success.
    Smpp200 = "smpp-200",
    /// 429 with `Retry-After` and `{"command_status": N}`.
    Smpp429 = "smpp-429",
    /// 200 with a GraphQL `THROTTLED` error and its query cost (Shopify).
    Graphql200 = "graphql-200",
    /// 403 `REQUEST_LIMIT_EXCEEDED` (Salesforce).
    Salesforce403 = "salesforce-403",
    /// 403 `usageLimits` / `userRateLimitExceeded` (Google).
    Google403 = "google-403",
    /// 200 `{"ok": false, "error": "ratelimited"}` (Slack).
    Slack200 = "slack-200",
    /// 400 error code 4 (Meta Graph API).
    Meta400 = "meta-400",
    /// 400 `ThrottlingException` in `x-amzn-ErrorType` and `__type` (AWS JSON protocols).
    Aws400 = "aws-400",
    /// 503 XML `SlowDown` (S3).
    S3503 = "s3-503",
    /// 503 XML and `x-ms-error-code` `ServerBusy` (Azure Storage).
    Azure503 = "azure-503",
    /// 429 without `Retry-After`, the wait only in the body's `retry_after` (Discord).
    Discord429 = "discord-429",
    /// 429 `insufficient_quota` (OpenAI): the account is out of credit, not rate limited;
    /// a client must park the item for a person, not retry it.
    Quota429 = "quota-429",
}}

abide_core::named_enum! {
/// The outcome a delivery receipt reports (SMPP 3.4 Appendix B `stat:`, and the
/// `message_state` TLV).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum ReceiptState("receipt state") {
    /// `stat:DELIVRD err:000`, message_state 2.
    Delivered = "delivered",
    /// `stat:UNDELIV err:001`, message_state 5.
    Undeliverable = "undeliverable",
    /// `stat:EXPIRED err:001`, message_state 3.
    Expired = "expired",
    /// `stat:REJECTD err:001`, message_state 8.
    Rejected = "rejected",
}}

abide_core::named_enum! {
/// How a fraction of requests is picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Spread("spread") {
    /// Evenly and deterministically: an accumulator gains the fraction per request and a
    /// request is picked each time it reaches 1 (0.05 = every 20th).
    Even = "even",
    /// At random, each request picked with the fraction's probability, from a seeded
    /// stream (reproducible for the same sequence of requests).
    Random = "random",
}}
