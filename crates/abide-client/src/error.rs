//! Why abide stopped, and what the server said last.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use abide_core::SettingError;
use http::StatusCode;

/// A boxed error: a client's transport error, or the refresh hook's.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the server said in its last answer (or how the transport failed), as abide read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastAnswer {
    /// The HTTP status; `None` when the transport failed before an answer.
    pub status: Option<StatusCode>,
    /// The classifier's reason, e.g. `http_429`, `http_503_retry_after`, `transport_connect`.
    pub reason: String,
    /// The raw `Retry-After` value, if any (logged raw, as received; RFC 9110 §10.2.3).
    pub retry_after: Option<String>,
    /// The start of the body (at most 512 bytes, lossy UTF-8); empty when not read.
    pub body: String,
}

impl fmt::Display for LastAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "{s} ({})", self.reason)?,
            None => write!(f, "no answer ({})", self.reason)?,
        }
        if let Some(ra) = &self.retry_after {
            write!(f, ", Retry-After {ra:?}")?;
        }
        if !self.body.is_empty() {
            write!(f, ", body {:?}", self.body)?;
        }
        Ok(())
    }
}

/// Why a wait was too long for an in-process caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitCause {
    /// The retry delay after an answer (the server's `Retry-After`, clamped, or our backoff).
    Retry,
    /// The host is paused (a throttle of this or another request, an exhausted quota).
    HostPaused,
    /// The host's retry budget refused a retry (too many retries across all tasks).
    RetryBudget,
    /// The host's pace: the next free send slot is that far away.
    Pacing,
}

impl fmt::Display for WaitCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitCause::Retry => "retry delay",
            WaitCause::HostPaused => "host paused",
            WaitCause::RetryBudget => "retry budget exhausted",
            WaitCause::Pacing => "send slot",
        })
    }
}

/// Why abide gave up on a request. [`StopReason::code`] is a stable snake_case name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The answer is final (e.g. a `400`, or a transport failure after sending a request
    /// that is not safe to replay). Only an error when the policy says so
    /// (`with_terminal_as_error`); otherwise the response is returned as it came.
    Terminal,
    /// `max_attempts` requests were sent (the cap is lower for unrecognised answers).
    AttemptCap {
        /// The cap that applied.
        cap: u32,
    },
    /// The logical request is older than `max_age`, or the next wait would take it past it.
    MaxAge {
        /// The configured maximum age.
        max_age: Duration,
    },
    /// The next wait is longer than `max_wait`.
    WaitTooLong {
        /// The wait abide would have had to take.
        wait: Duration,
        /// The configured longest single wait.
        max_wait: Duration,
        /// What imposed it.
        cause: WaitCause,
    },
    /// Credentials were refused again right after the refresh hook ran.
    CredentialsRejected,
    /// The remote said the account is out of quota or credit, not rate limited (e.g. a
    /// spent daily quota): no wait helps, a person must add quota.
    OutOfQuota,
    /// The refresh hook failed (its error is the source).
    RefreshFailed,
    /// The request body cannot be copied (a stream), so the request was sent once.
    BodyNotReplayable,
    /// The method is not idempotent and the request carries no idempotency key, so a
    /// failed answer that might have been acted on is not replayed.
    NotReplaySafe,
}

impl StopReason {
    /// Stable snake_case name.
    pub fn code(&self) -> &'static str {
        match self {
            StopReason::Terminal => "terminal",
            StopReason::AttemptCap { .. } => "attempt_cap",
            StopReason::MaxAge { .. } => "max_age",
            StopReason::WaitTooLong { .. } => "wait_too_long",
            StopReason::CredentialsRejected => "credentials_rejected",
            StopReason::OutOfQuota => "out_of_quota",
            StopReason::RefreshFailed => "refresh_failed",
            StopReason::BodyNotReplayable => "body_not_replayable",
            StopReason::NotReplaySafe => "not_replay_safe",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Terminal => f.write_str("the answer is final"),
            StopReason::AttemptCap { cap } => write!(f, "attempt cap {cap} reached"),
            StopReason::MaxAge { max_age } => {
                write!(f, "maximum age {:.1}s reached", max_age.as_secs_f64())
            }
            StopReason::WaitTooLong {
                wait,
                max_wait,
                cause,
            } => write!(
                f,
                "{cause} of {:.1}s exceeds max_wait {:.1}s",
                wait.as_secs_f64(),
                max_wait.as_secs_f64()
            ),
            StopReason::CredentialsRejected => f.write_str("credentials rejected after refresh"),
            StopReason::OutOfQuota => f.write_str("out of quota, not a rate limit"),
            StopReason::RefreshFailed => f.write_str("the credential refresh hook failed"),
            StopReason::BodyNotReplayable => {
                f.write_str("the request body cannot be copied, so it is never retried")
            }
            StopReason::NotReplaySafe => {
                f.write_str("a non-idempotent request without an idempotency key is not replayed")
            }
        }
    }
}

/// abide stopped before the request was delivered: why, and what the server said last.
///
/// `Display` reads e.g. `abide stopped after 4 requests in 12.5s to http://api:
/// attempt cap 4 reached; last answer: 503 Service Unavailable (http_503)`.
#[derive(Debug)]
pub struct Stopped {
    /// Why abide stopped.
    pub reason: StopReason,
    /// The last answer; `None` when nothing was sent.
    pub last: Option<LastAnswer>,
    /// Requests sent for this logical request.
    pub attempts: u32,
    /// Time from the first poll to the stop (on the policy's clock).
    pub elapsed: Duration,
    /// The host key (`scheme://host:port` unless configured otherwise).
    pub host: String,
    /// The transport or hook error behind the last answer, if any.
    pub source: Option<BoxError>,
}

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "abide stopped after {} request(s) in {:.1}s to {}: {}",
            self.attempts,
            self.elapsed.as_secs_f64(),
            self.host,
            self.reason
        )?;
        match &self.last {
            Some(last) => write!(f, "; last answer: {last}"),
            None => f.write_str("; nothing was sent"),
        }
    }
}

impl std::error::Error for Stopped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A policy that cannot work, named by its broken setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("abide policy: {setting}: {problem}")]
pub struct ConfigError {
    /// The builder setting (`max_attempts`, `headroom`, `classify`, ...); a session
    /// setting with no builder method of its own keeps its [`SessionConfig`] path
    /// (`retry.backoff.cap`).
    ///
    /// [`SessionConfig`]: abide_core::SessionConfig
    pub setting: Cow<'static, str>,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// The error of [`SessionConfig::validate`](abide_core::SessionConfig::validate),
    /// named in the builder's words where a builder method sets the value.
    pub(crate) fn from_session(e: SettingError) -> Self {
        let path = e.setting();
        let setting: Cow<'static, str> = match path {
            "retry.max_attempts" => "max_attempts".into(),
            "retry.max_age" => "max_age".into(),
            "pacer.headroom" => "headroom".into(),
            "pacer.initial_rate" => "initial_rate".into(),
            "pacer.max_rate" => "max_rate".into(),
            // Overrides and rules are set with `with_classify*`/`with_*_rule`; the problem
            // names the one at fault (`classify.body[2].json: ...`).
            p if p.starts_with("classify") => "classify".into(),
            p => p.to_owned().into(),
        };
        let problem = match &e {
            SettingError::OutOfRange { value, range, .. } => {
                format!("{value} is outside {range}")
            }
            other => other.to_string(),
        };
        Self { setting, problem }
    }
}
