//! Response classification: what a response means for the next attempt.
//!
//! Classify before retrying: *not ever* (terminal), *not like this* (refresh credentials),
//! *not right now* (throttle / retry with a delay).
//!
//! OWNER NOTE (remove when implemented): types below are the agreed API; bodies are stubs.

use std::time::SystemTime;

use http::{HeaderMap, StatusCode};
use rand::RngCore;
use serde::Serialize;

use crate::ratelimit::RateLimitInfo;
use crate::retry_after::{RetryAfterPolicy, RetryDelay};

/// What came back from one attempt.
#[derive(Debug, Clone, Copy)]
pub enum Observation<'a> {
    /// An HTTP response.
    Http {
        /// Status code.
        status: StatusCode,
        /// Response headers.
        headers: &'a HeaderMap,
    },
    /// An SMPP response PDU's `command_status`.
    Smpp {
        /// `command_status` (SMPP 3.4 §5.1.3).
        command_status: u32,
    },
    /// No response: the transport failed.
    Transport(TransportFailure),
}

/// How the transport failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportFailure {
    /// Connection could not be established: the request was never sent. Safe to retry.
    Connect,
    /// Timed out or broke after the request was sent: the remote may have acted on it.
    /// Retried only when `replay_safe` (idempotent method or an idempotency key).
    AfterSend {
        /// The request is idempotent or carries an idempotency key.
        replay_safe: bool,
    },
}

/// The class of a verdict; stable snake_case names appear in JSON, logs and the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictClass {
    /// Accepted.
    Success,
    /// The remote asked us to slow down (429, 503 with Retry-After, SMPP 0x58/0x14, ...).
    /// Changes the sender: pause the provider and feed the pacer.
    Throttle,
    /// A transient failure; retry this item later.
    Retry,
    /// 401: refresh credentials once, then retry.
    RefreshCredentials,
    /// Never retry.
    Terminal,
    /// Not recognised: retry with a low attempt cap, and say so loudly.
    Unknown,
}

impl VerdictClass {
    /// Stable name, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictClass::Success => "success",
            VerdictClass::Throttle => "throttle",
            VerdictClass::Retry => "retry",
            VerdictClass::RefreshCredentials => "refresh_credentials",
            VerdictClass::Terminal => "terminal",
            VerdictClass::Unknown => "unknown",
        }
    }
}

/// The classifier's decision on one observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// What to do.
    pub class: VerdictClass,
    /// A short stable reason code, e.g. `"http_429"`, `"smpp_throttled"`, `"connect_error"`.
    pub reason: String,
    /// The server's requested delay after floor/cap, when it sent `Retry-After`.
    pub retry_after: Option<RetryDelay>,
    /// Rate-limit headers, when present.
    pub rate_limit: Option<RateLimitInfo>,
}

/// Classifies observations. Tables can be overridden per provider.
///
/// # Default
/// HTTP: 408, 425, 429, 500, 502, 503, 504 retry (429 as throttle); 400, 403, 404, 405, 409,
/// 410, 422 terminal; 401 refresh credentials; other 4xx terminal; other 5xx retry; a 4xx
/// carrying `Retry-After` or an exhausted rate-limit header is a throttle.
/// SMPP: 0x00 success; 0x58 ESME_RTHROTTLED and 0x14 ESME_RMSGQFUL throttle; well-known
/// permanent codes terminal; the rest unknown.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    /// How `Retry-After` is clamped.
    pub retry_after: RetryAfterPolicy,
    // helper B: override tables
}

impl Classifier {
    /// Classify one observation at wall time `now`. `rng` jitters unparseable waits.
    pub fn classify(
        &self,
        obs: &Observation<'_>,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Verdict {
        let _ = (obs, now, rng);
        todo!("helper B")
    }
}
