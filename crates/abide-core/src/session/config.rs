//! The rules a [`Session`](super::Session) applies, with the providers-file vocabulary.

use std::time::Duration;

use crate::backoff::{Backoff, Jitter};
use crate::budget::RetryBudgetConfig;
use crate::classify::ClassifyOverrides;
use crate::pacer::PacerConfig;
use crate::ratelimit::Dialect;
use crate::retry_after::RetryAfterPolicy;

/// When an item stops being retried automatically (it is then *deferred*: parked for a
/// person, never lost), and our own backoff when the server named no delay.
///
/// # Default
/// - `max_attempts`: 12 per attempt window
/// - `unknown_max_attempts`: 3 when the last answer was not recognised
/// - `max_age`: 24 h from the window start
/// - `backoff`: 500 ms base, 5 min cap, full jitter
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryConfig {
    /// Attempts per window before the item is deferred.
    pub max_attempts: u32,
    /// Attempts per window when the last verdict was `Unknown`.
    pub unknown_max_attempts: u32,
    /// Age (from the window start) after which a pending item is deferred.
    pub max_age: Duration,
    /// Our own backoff when the remote sent no `Retry-After`.
    pub backoff: Backoff,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: 12,
            unknown_max_attempts: 3,
            max_age: Duration::from_secs(86_400),
            backoff: Backoff {
                base: Duration::from_millis(500),
                cap: Duration::from_secs(300),
                jitter: Jitter::Full,
            },
        }
    }
}

/// Everything a [`Session`](super::Session) decides with.
///
/// # Default
/// - `retry`: [`RetryConfig::default`]
/// - `pacer`: [`PacerConfig::default`]
/// - `budget`: [`RetryBudgetConfig::default`]
/// - `retry_after`: [`RetryAfterPolicy::default`] (floor 1 s, cap 10 min)
/// - `classify`: no overrides
/// - `rate_limit_dialect`: [`Dialect::Auto`]
/// - `use_rate_limit_headers`: true
/// - `budget_denied_delay`: 5 s (least wait of a retry the budget refused)
/// - `hold_through_pause`: 2 s (a longer host pause hands the item back)
/// - `max_admit_rounds`: 16 (slots voided by new pauses before the item is handed back)
/// - `outage_pause`: 1 s, doubling per consecutive transport failure up to
///   `max_outage_pause`: 30 s
/// - `refusal_streak`: 5 terminal `403`s in a row across items, each within `refusal_span`
///   (60 s) of the previous, mean a refused credential: the host pauses `refusal_pause`
///   (10 s), doubling per round up to the `Retry-After` cap (`session/refusal.rs`); an
///   out-of-quota answer pauses the host the same way from the first, its item deferred
///
/// # Ranges
/// Every numeric setting has one documented range ([`crate::session::limits`]);
/// [`SessionConfig::validate`] refuses a value outside it, naming the setting. Check
/// settings that come from people (a providers file, a client builder) with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Attempt caps, maximum age, backoff.
    pub retry: RetryConfig,
    /// The host's pacer.
    pub pacer: PacerConfig,
    /// The host's retry budget.
    pub budget: RetryBudgetConfig,
    /// Floor, cap and unparseable wait for `Retry-After` (RFC 9110 §10.2.3); our own
    /// backoff is clamped by the same floor and cap.
    pub retry_after: RetryAfterPolicy,
    /// Per-host overrides of the HTTP and SMPP tables.
    pub classify: ClassifyOverrides,
    /// How the host's rate-limit headers are read (see [`crate::ratelimit`]).
    pub rate_limit_dialect: Dialect,
    /// Follow the host's rate-limit headers (target rate, pause on an exhausted quota).
    /// Off for a host known to advertise wrong numbers: the pacer then learns from
    /// throttles alone. `Retry-After` is always obeyed.
    pub use_rate_limit_headers: bool,
    /// Least wait of a retry the budget refused (the item waits; it is not dropped).
    pub budget_denied_delay: Duration,
    /// Longest host pause a delivery waits through; a longer one hands the item back to
    /// its queue, due when the pause ends, so other workers (or a fail-over) can see it.
    pub hold_through_pause: Duration,
    /// Slots voided by pauses that began while waiting for them, before the item is
    /// handed back.
    pub max_admit_rounds: u32,
    /// Host pause after the first transport failure (connection refused, reset, timeout)
    /// of an episode; it doubles per consecutive failure.
    pub outage_pause: Duration,
    /// Longest such pause.
    pub max_outage_pause: Duration,
    /// Terminal `403`s in a row, across items, that mean the credential itself is refused
    /// (the host pauses and the refused items are deferred, not failed); 0 never.
    pub refusal_streak: u32,
    /// Longest gap between two refusals of such a streak.
    pub refusal_span: Duration,
    /// Host pause when a refused credential is recognised; it doubles per further round
    /// up to `retry_after.cap`.
    pub refusal_pause: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            retry: RetryConfig::default(),
            pacer: PacerConfig::default(),
            budget: RetryBudgetConfig::default(),
            retry_after: RetryAfterPolicy::default(),
            classify: ClassifyOverrides::default(),
            rate_limit_dialect: Dialect::Auto,
            use_rate_limit_headers: true,
            budget_denied_delay: Duration::from_secs(5),
            hold_through_pause: Duration::from_secs(2),
            max_admit_rounds: 16,
            outage_pause: Duration::from_secs(1),
            max_outage_pause: Duration::from_secs(30),
            refusal_streak: 5,
            refusal_span: Duration::from_secs(60),
            refusal_pause: Duration::from_secs(10),
        }
    }
}
