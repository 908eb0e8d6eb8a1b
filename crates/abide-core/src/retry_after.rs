//! `Retry-After` (RFC 9110 §10.2.3): parsing every form the spec allows and turning the
//! result into a clamped delay with its reason.
//!
//! OWNER NOTE (remove when implemented): types below are the agreed API; bodies are stubs.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use rand::RngCore;
use serde::Serialize;

/// A parsed `Retry-After` value, before any floor or cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// `delay-seconds`: a non-negative number of whole seconds.
    Delay(Duration),
    /// `HTTP-date` in any of its three forms (IMF-fixdate, RFC 850, asctime).
    Date(SystemTime),
}

impl RetryAfter {
    /// The delay this value asks for at wall time `now`; a date in the past gives zero.
    pub fn delay_from(&self, now: SystemTime) -> Duration {
        match *self {
            RetryAfter::Delay(d) => d,
            RetryAfter::Date(at) => at.duration_since(now).unwrap_or(Duration::ZERO),
        }
    }
}

/// Why a `Retry-After` value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetryAfterError {
    /// The value was empty or only whitespace.
    #[error("empty Retry-After value")]
    Empty,
    /// The value is neither delay-seconds nor an HTTP-date.
    #[error("Retry-After is neither delay-seconds nor an HTTP-date")]
    Invalid,
    /// Several values (repeated headers or a list) disagree.
    #[error("several Retry-After values disagree")]
    Conflicting,
}

/// Why a delay was chosen. Serialised in snake_case for `abide inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayReason {
    /// The server's value lay within [floor, cap] and was used as is.
    Honoured,
    /// The server asked for less than the floor (e.g. `0`, a past date); the floor was used.
    Floored,
    /// The server asked for more than the cap (e.g. `86400`); the cap was used.
    Capped,
    /// The value could not be parsed; a long jittered wait was used and the raw value kept.
    Unparseable,
    /// No `Retry-After` was sent; the delay came from our own backoff.
    Absent,
}

/// A delay decision: how long to wait, why, and what the server actually said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryDelay {
    /// The delay to wait, always within the policy's [floor, cap].
    pub delay: Duration,
    /// Why this delay was chosen.
    pub reason: DelayReason,
    /// The raw header value(s) as received (lossy UTF-8, joined with ", "), for the log.
    pub raw: Option<String>,
    /// What the header parsed to before any floor or cap; `None` when absent or unparseable.
    pub retry_after: Option<Duration>,
}

/// Turns `Retry-After` into a delay within [floor, cap].
///
/// # Default
/// - floor: 1 s
/// - cap: 10 min
/// - unparseable wait: 5 min, with up to 20 % added jitter (never below the floor)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryAfterPolicy {
    /// Shortest delay ever returned.
    pub floor: Duration,
    /// Longest delay ever returned.
    pub cap: Duration,
    /// Base wait when a value cannot be parsed.
    pub unparseable_wait: Duration,
    /// Extra random wait added to `unparseable_wait`, uniformly in [0, this].
    pub unparseable_jitter: Duration,
}

impl Default for RetryAfterPolicy {
    fn default() -> Self {
        Self {
            floor: Duration::from_secs(1),
            cap: Duration::from_secs(600),
            unparseable_wait: Duration::from_secs(300),
            unparseable_jitter: Duration::from_secs(60),
        }
    }
}

/// Parse one `Retry-After` field value.
///
/// # Errors
/// [`RetryAfterError`] naming what was wrong.
pub fn parse(value: &[u8]) -> Result<RetryAfter, RetryAfterError> {
    let _ = value;
    todo!("helper A")
}

impl RetryAfterPolicy {
    /// Decide the delay from every `Retry-After` field line in `values` (a repeated header is
    /// a real case). Returns `None` when there are no values (reason `Absent` is then the
    /// caller's, via [`RetryAfterPolicy::from_backoff`]).
    pub fn decide<'a, I>(
        &self,
        values: I,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Option<RetryDelay>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let _ = (values, now, rng);
        todo!("helper A")
    }

    /// [`RetryAfterPolicy::decide`] over the `Retry-After` lines of a header map.
    pub fn from_headers(
        &self,
        headers: &HeaderMap,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Option<RetryDelay> {
        self.decide(
            headers
                .get_all(http::header::RETRY_AFTER)
                .iter()
                .map(|v| v.as_bytes()),
            now,
            rng,
        )
    }

    /// A delay computed by our own backoff when no `Retry-After` was sent, clamped to
    /// [floor, cap], with reason [`DelayReason::Absent`].
    pub fn from_backoff(&self, delay: Duration) -> RetryDelay {
        RetryDelay {
            delay: delay.clamp(self.floor, self.cap),
            reason: DelayReason::Absent,
            raw: None,
            retry_after: None,
        }
    }
}
