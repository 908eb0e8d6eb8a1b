//! What to do with an item after a verdict: the pure rule, unit-tested without a network.

use std::fmt;
use std::time::{Duration, SystemTime};

use rand::RngCore;

use super::config::RetryConfig;
use super::item::ItemContext;
use crate::backoff::capped_doubling;
use crate::classify::{Verdict, VerdictClass};
use crate::ratelimit::github;
use crate::retry_after::{RetryAfterPolicy, RetryDelay};

/// What happens to the item after an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Accepted: the item is done.
    Delivered,
    /// Refused for good (the verdict's reason says why): never retried automatically.
    Failed,
    /// Parked for a person: retrying on our own would no longer be polite or useful.
    Deferred(DeferReason),
    /// Try again after this long (already floored and capped, and never before the host's
    /// pause ends).
    Retry {
        /// Wait from the answer.
        after: Duration,
    },
    /// Credentials were refused once: refresh them and send again under the same delivery
    /// (paced, without drawing on the retry budget).
    Resend,
}

/// Why an item was deferred. `Display` gives the stable text stored as the item's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeferReason {
    /// `cap` attempts in the window; `last` is the last verdict's reason.
    AttemptCap {
        /// The cap that applied (lower for unrecognised answers).
        cap: u32,
        /// The last verdict's reason.
        last: String,
    },
    /// The window is older than `max_age`.
    MaxAge {
        /// The configured maximum age.
        max_age: Duration,
        /// The last verdict's reason.
        last: String,
    },
    /// Credentials were refused again right after a refresh: a person must fix them.
    CredentialsRejected {
        /// The last verdict's reason.
        last: String,
    },
    /// Refused while the host refused item after item (`streak` terminal answers in a row,
    /// across items): the credential, not this item, is refused (`session/refusal.rs`).
    CredentialRefused {
        /// The configured streak that recognised it.
        streak: u32,
        /// The last verdict's reason.
        last: String,
    },
    /// The remote said the account is out of quota or credit, not rate limited
    /// ([`VerdictClass::OutOfQuota`]): no timer helps, a person adds quota and requeues.
    OutOfQuota {
        /// The verdict's reason.
        last: String,
    },
}

impl DeferReason {
    /// The reason code without the last verdict: `attempt_cap`, `max_age`,
    /// `credentials_rejected`, `credential_refused`, `out_of_quota`.
    pub fn code(&self) -> &'static str {
        match self {
            DeferReason::AttemptCap { .. } => "attempt_cap",
            DeferReason::MaxAge { .. } => "max_age",
            DeferReason::CredentialsRejected { .. } => "credentials_rejected",
            DeferReason::CredentialRefused { .. } => "credential_refused",
            DeferReason::OutOfQuota { .. } => "out_of_quota",
        }
    }
}

impl fmt::Display for DeferReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeferReason::AttemptCap { cap, last } => {
                write!(f, "attempt cap {cap} reached (last: {last})")
            }
            DeferReason::MaxAge { max_age, last } => write!(
                f,
                "maximum age {}s reached (last: {last})",
                max_age.as_secs()
            ),
            DeferReason::CredentialsRejected { last } => {
                write!(f, "credentials rejected after refresh ({last})")
            }
            DeferReason::CredentialRefused { streak, last } => write!(
                f,
                "credential refused: {streak} or more refusals in a row across items \
                 (last: {last})"
            ),
            DeferReason::OutOfQuota { last } => {
                write!(f, "out of quota, not a rate limit ({last})")
            }
        }
    }
}

/// Inputs of [`decide`] besides the verdict.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecideInput<'a> {
    pub(crate) rules: &'a RetryConfig,
    pub(crate) clamp: &'a RetryAfterPolicy,
    pub(crate) item: &'a ItemContext,
    /// Requests sent for the item under this delivery (added to its window attempts).
    pub(crate) made: u32,
    pub(crate) wall: SystemTime,
    /// How long the host stays paused, if it is.
    pub(crate) pause_left: Option<Duration>,
}

/// The decision after `verdict`, and for a retry the delay chosen (and why).
///
/// Order: success and terminal answers end the item, out of quota defers it; the attempt cap and the maximum age
/// defer it; otherwise the server's `Retry-After` (already clamped) outranks our backoff,
/// and the host's pause outranks both.
pub(crate) fn decide(
    input: DecideInput<'_>,
    verdict: &Verdict,
    rng: &mut dyn RngCore,
) -> (Decision, Option<RetryDelay>) {
    let DecideInput {
        rules, item, made, ..
    } = input;
    match verdict.class {
        VerdictClass::Success => return (Decision::Delivered, None),
        VerdictClass::Terminal => return (Decision::Failed, None),
        VerdictClass::RefreshCredentials => {
            // Reached only after the one refresh already failed.
            let last = verdict.reason.clone();
            return (
                Decision::Deferred(DeferReason::CredentialsRejected { last }),
                None,
            );
        }
        VerdictClass::OutOfQuota => {
            let last = verdict.reason.clone();
            return (Decision::Deferred(DeferReason::OutOfQuota { last }), None);
        }
        VerdictClass::Throttle | VerdictClass::Retry | VerdictClass::Unknown => {}
    }
    let window_attempts = item.window_attempts.saturating_add(made);
    let cap = if verdict.class == VerdictClass::Unknown {
        rules.unknown_max_attempts.min(rules.max_attempts)
    } else {
        rules.max_attempts
    };
    if window_attempts >= cap {
        let last = verdict.reason.clone();
        return (
            Decision::Deferred(DeferReason::AttemptCap { cap, last }),
            None,
        );
    }
    if let Some(deferred) = past_max_age(&input, verdict) {
        return (deferred, None);
    }
    let delay = retry_delay(&input, verdict, window_attempts, rng);
    (Decision::Retry { after: delay.delay }, Some(delay))
}

/// The decision after a connection that was never made (refused, connect timeout, DNS or
/// TLS handshake failure): no byte of the request reached the remote, so it is no attempt
/// and does not count toward the attempt cap (the remote said nothing; principle 6). The
/// item waits, for our backoff at its attempts so far and never less than the host's
/// (outage) pause, until its maximum age: age is the message's, not the remote's, and a
/// message past it (a one-time code, a reminder) is parked for a person whatever kept it
/// from going out. Without that, `abide send` to a host that stays down never finished.
pub(crate) fn decide_unsent(
    input: DecideInput<'_>,
    verdict: &Verdict,
    rng: &mut dyn RngCore,
) -> (Decision, Option<RetryDelay>) {
    if let Some(deferred) = past_max_age(&input, verdict) {
        return (deferred, None);
    }
    let window_attempts = input.item.window_attempts.saturating_add(input.made);
    let delay = retry_delay(&input, verdict, window_attempts, rng);
    (Decision::Retry { after: delay.delay }, Some(delay))
}

/// `DEFERRED` (`max_age`) for an item at or past its maximum age, sent or not: age is the
/// message's, whatever kept it from going out.
fn past_max_age(input: &DecideInput<'_>, verdict: &Verdict) -> Option<Decision> {
    is_past_max_age(input.item.window_start, input.wall, input.rules.max_age).then(|| {
        Decision::Deferred(DeferReason::MaxAge {
            max_age: input.rules.max_age,
            last: verdict.reason.clone(),
        })
    })
}

/// The one maximum-age rule: whether an item whose attempt window began at
/// `window_start` (wall time) is at or past `max_age` at wall time `at`. Every decider
/// uses it: the session at each answer, and an in-process caller asking whether a wait it
/// is about to take would end past the age (`at` = now + the wait). A wall clock that went
/// back reads as age zero.
///
/// ```
/// # use abide_core::session::is_past_max_age; use std::time::{Duration, UNIX_EPOCH};
/// let (start, max_age) = (UNIX_EPOCH, Duration::from_secs(60));
/// assert!(!is_past_max_age(start, start + Duration::from_secs(59), max_age));
/// assert!(is_past_max_age(start, start + max_age, max_age));
/// ```
pub fn is_past_max_age(window_start: SystemTime, at: SystemTime, max_age: Duration) -> bool {
    at.duration_since(window_start).unwrap_or_default() >= max_age
}

/// How long a retried item waits: the server's `Retry-After` (already clamped) or our
/// backoff at `window_attempts`, never before the host's pause ends.
fn retry_delay(
    input: &DecideInput<'_>,
    verdict: &Verdict,
    window_attempts: u32,
    rng: &mut dyn RngCore,
) -> RetryDelay {
    let DecideInput {
        rules,
        clamp,
        pause_left,
        ..
    } = *input;
    let mut delay = match &verdict.retry_after {
        Some(d) => d.clone(),
        None => clamp.from_backoff(rules.backoff.delay(window_attempts.max(1), None, rng)),
    };
    // GitHub's secondary limit: "wait at least one minute", longer on repeats
    // (docs.github.com, "Rate limits for the REST API", "Exceeding the rate limit").
    if verdict.secondary_limit {
        let repeat = capped_doubling(
            github::SECONDARY_MIN_WAIT,
            github::SECONDARY_MAX_WAIT.min(clamp.cap),
            window_attempts.saturating_sub(1),
        );
        delay.delay = delay.delay.max(repeat);
    }
    // Never schedule an item before the host's pause ends.
    if let Some(p) = pause_left {
        delay.delay = delay.delay.max(p);
    }
    delay
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry_after::DelayReason;
    use crate::session::BudgetRole;
    use rand::SeedableRng;
    use std::time::UNIX_EPOCH;

    fn rules() -> RetryConfig {
        RetryConfig {
            max_attempts: 4,
            unknown_max_attempts: 2,
            max_age: Duration::from_secs(3600),
            backoff: crate::Backoff::new(Duration::from_secs(1), Duration::from_secs(60)),
        }
    }

    fn item(window_attempts: u32) -> ItemContext {
        ItemContext {
            window_attempts,
            window_start: UNIX_EPOCH,
            role: BudgetRole::Retry,
            send_by: None,
        }
    }

    fn verdict(class: VerdictClass, retry_after: Option<Duration>) -> Verdict {
        Verdict {
            class,
            reason: format!("test_{}", class.as_str()),
            retry_after: retry_after.map(|d| RetryDelay {
                delay: d,
                reason: DelayReason::Honoured,
                raw: Some(d.as_secs().to_string()),
                retry_after: Some(d),
            }),
            rate_limit: None,
            secondary_limit: false,
        }
    }

    fn run(
        it: &ItemContext,
        made: u32,
        wall_secs: u64,
        pause: Option<Duration>,
        v: &Verdict,
    ) -> (Decision, Option<RetryDelay>) {
        let r = rules();
        let clamp = RetryAfterPolicy::default();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let input = DecideInput {
            rules: &r,
            clamp: &clamp,
            item: it,
            made,
            wall: UNIX_EPOCH + Duration::from_secs(wall_secs),
            pause_left: pause,
        };
        decide(input, v, &mut rng)
    }

    #[test]
    fn retry_after_outranks_backoff_and_the_pause_outranks_both() {
        let v = verdict(VerdictClass::Throttle, Some(Duration::from_secs(7)));
        let (d, delay) = run(&item(0), 1, 10, None, &v);
        assert_eq!(
            d,
            Decision::Retry {
                after: Duration::from_secs(7)
            }
        );
        assert_eq!(delay.map(|d| d.reason), Some(DelayReason::Honoured));
        let (d, _) = run(&item(0), 1, 10, Some(Duration::from_secs(30)), &v);
        assert_eq!(
            d,
            Decision::Retry {
                after: Duration::from_secs(30)
            }
        );
    }

    #[test]
    fn our_backoff_is_clamped_and_labelled_absent() {
        let (d, delay) = run(&item(2), 1, 10, None, &verdict(VerdictClass::Retry, None));
        let delay = delay.unwrap();
        assert_eq!(delay.reason, DelayReason::Absent);
        // The Retry-After floor (1 s) applies to our own backoff too.
        assert!(delay.delay >= Duration::from_secs(1) && delay.delay <= Duration::from_secs(60));
        assert_eq!(d, Decision::Retry { after: delay.delay });
    }

    #[test]
    fn caps_and_age_defer_with_their_reasons() {
        let retry = verdict(VerdictClass::Retry, None);
        assert!(matches!(
            run(&item(2), 1, 10, None, &retry).0,
            Decision::Retry { .. }
        ));
        let (d, _) = run(&item(3), 1, 10, None, &retry);
        let Decision::Deferred(r) = d else {
            panic!("{d:?}")
        };
        assert_eq!(r.to_string(), "attempt cap 4 reached (last: test_retry)");
        assert_eq!(r.code(), "attempt_cap");
        let unknown = verdict(VerdictClass::Unknown, None);
        assert!(matches!(
            run(&item(1), 1, 10, None, &unknown).0,
            Decision::Deferred(DeferReason::AttemptCap { cap: 2, .. })
        ));
        let (d, _) = run(&item(0), 1, 3600, None, &retry);
        let Decision::Deferred(r) = d else {
            panic!("{d:?}")
        };
        assert_eq!(
            r.to_string(),
            "maximum age 3600s reached (last: test_retry)"
        );
    }

    #[test]
    fn a_repeated_secondary_limit_waits_longer_each_time() {
        let mut v = verdict(VerdictClass::Throttle, Some(Duration::from_secs(60)));
        v.secondary_limit = true;
        let waits: Vec<_> = (0..3)
            .map(|n| match run(&item(n), 1, 10, None, &v).0 {
                Decision::Retry { after } => after.as_secs(),
                d => panic!("{d:?}"),
            })
            .collect();
        assert_eq!(waits, [60, 120, 240]);
    }

    #[test]
    fn success_terminal_and_rejected_credentials() {
        let it = item(0);
        let ok = verdict(VerdictClass::Success, None);
        assert_eq!(run(&it, 1, 1, None, &ok).0, Decision::Delivered);
        let bad = verdict(VerdictClass::Terminal, None);
        assert_eq!(run(&it, 1, 1, None, &bad).0, Decision::Failed);
        let auth = verdict(VerdictClass::RefreshCredentials, None);
        let (d, _) = run(&it, 2, 1, None, &auth);
        assert_eq!(
            d.clone(),
            Decision::Deferred(DeferReason::CredentialsRejected {
                last: "test_refresh_credentials".into()
            })
        );
        let Decision::Deferred(r) = d else {
            unreachable!()
        };
        assert_eq!(
            r.to_string(),
            "credentials rejected after refresh (test_refresh_credentials)"
        );
    }

    #[test]
    fn out_of_quota_is_deferred_at_once_never_retried() {
        // First attempt, attempts to spare: still deferred, with no delay.
        let v = verdict(VerdictClass::OutOfQuota, Some(Duration::from_secs(5)));
        let (d, delay) = run(&item(0), 1, 10, None, &v);
        assert_eq!(
            d,
            Decision::Deferred(DeferReason::OutOfQuota {
                last: "test_out_of_quota".into()
            })
        );
        assert_eq!(delay, None);
        let Decision::Deferred(r) = d else {
            unreachable!()
        };
        assert_eq!(r.code(), "out_of_quota");
    }
}
