//! What one attempt returned ([`Observation`]) and what the classifier made of it
//! ([`Verdict`], [`VerdictClass`]).

use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use crate::ratelimit::RateLimitInfo;
use crate::retry_after::RetryDelay;

/// Most response-body bytes worth keeping for classification (a prefix is enough for
/// every body rule, e.g. GitHub's "secondary rate limit" text): 4 KiB.
pub const MAX_CLASSIFY_BODY: usize = 4096;

/// What came back from one attempt.
#[derive(Debug, Clone, Copy)]
pub enum Observation<'a> {
    /// An HTTP response.
    Http {
        /// Status code.
        status: StatusCode,
        /// Response headers.
        headers: &'a HeaderMap,
        /// The start of the response body (empty when not read); some vendors say "rate
        /// limited" only there (GitHub's secondary limit). Up to [`MAX_CLASSIFY_BODY`] bytes
        /// are enough.
        body: &'a [u8],
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

crate::named_enum! {
    /// The class of a verdict; stable snake_case names appear in JSON, logs and the database
    /// (`as_str`, read back by `FromStr`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum VerdictClass("verdict class") {
        /// Accepted.
        Success = "success",
        /// The remote asked us to slow down (429, 503 with Retry-After, SMPP 0x58/0x14, ...).
        /// Changes the sender: pause the provider and feed the pacer.
        Throttle = "throttle",
        /// A transient failure; retry this item later.
        Retry = "retry",
        /// 401: refresh credentials once, then retry.
        RefreshCredentials = "refresh_credentials",
        /// Never retry.
        Terminal = "terminal",
        /// Out of quota or credit, not a rate limit (a daily quota spent, a plan without
        /// credit): no wait on a timer helps, so the item is deferred for a person, never
        /// failed and never retried automatically.
        OutOfQuota = "out_of_quota",
        /// Not recognised: retry with a low attempt cap, and say so loudly.
        Unknown = "unknown",
    }
}

impl VerdictClass {
    /// The item waits and is tried again (throttle, retry, refresh credentials, unknown):
    /// a delay the server named applies. False for success, terminal and out of quota.
    pub fn waits(self) -> bool {
        !matches!(
            self,
            VerdictClass::Success | VerdictClass::Terminal | VerdictClass::OutOfQuota
        )
    }
}

/// The classifier's decision on one observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// What to do.
    pub class: VerdictClass,
    /// A short stable reason code, e.g. `"http_429"`, `"smpp_0x58_throttled"`,
    /// `"connect_error"` (see the [module docs](super)).
    pub reason: String,
    /// The server's requested delay after floor/cap, when it sent `Retry-After` (or, without
    /// one, the body named a delay: see [`vendors`](super::vendors)) and the class waits
    /// ([`VerdictClass::waits`]).
    pub retry_after: Option<RetryDelay>,
    /// Rate-limit headers, when present (on any class, successes included).
    pub rate_limit: Option<RateLimitInfo>,
    /// A GitHub secondary rate limit (told by the body text, dialect `github`; see
    /// [`crate::ratelimit::github`]): the item waits at least
    /// [`SECONDARY_MIN_WAIT`](crate::ratelimit::github::SECONDARY_MIN_WAIT), doubling per
    /// attempt. False for every other verdict, and when an override decided the class.
    pub secondary_limit: bool,
}
