//! Live counters and the [`Progress`] snapshot a CLI renders.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use abide_core::rfc3339::{serialize as rfc3339, serialize_opt as rfc3339_opt};
use abide_core::{Verdict, Warning};
use serde::Serialize;

use crate::model::Counts;
use crate::receipt::ReceiptCounts;
use crate::transport::TransportStats;

/// Counters of what this dispatcher did (since it started). Cheap atomics.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) attempts: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) throttled: AtomicU64,
    pub(crate) retries_scheduled: AtomicU64,
    pub(crate) terminal_failures: AtomicU64,
    pub(crate) deferred: AtomicU64,
    pub(crate) budget_denied: AtomicU64,
    pub(crate) credential_refreshes: AtomicU64,
    pub(crate) lease_returns: AtomicU64,
    pub(crate) in_flight: AtomicU64,
    pub(crate) on_wire: AtomicU64,
    pub(crate) transport_failures: AtomicU64,
    /// What the provider said the last time it paused us.
    pub(crate) last_pause: Mutex<Option<LastPause>>,
    /// The latest `Sunset` date the provider announced.
    pub(crate) sunset: Mutex<Option<SystemTime>>,
    /// Whether the remote answered anything (any HTTP status, any SMPP response) in this
    /// run.
    pub(crate) answered: AtomicBool,
    /// When the first request of this run that got no answer failed, while nothing had
    /// been answered (monotonic): how long the host has been unreachable from the start.
    pub(crate) unanswered_since: Mutex<Option<Instant>>,
}

impl Stats {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Record whether an attempt at `at` got an answer from the remote.
    pub(crate) fn note_answered(&self, answered: bool, at: Instant) {
        if answered {
            self.answered.store(true, Ordering::Relaxed);
        } else if !self.answered.load(Ordering::Relaxed) {
            self.unanswered_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(at);
        }
    }

    /// How long the remote has gone unanswered since this run's first attempt, at `now`;
    /// `None` once it answered anything (an outage after answers is waited out, as every
    /// outage is) or before any attempt failed.
    pub(crate) fn never_answered_for(&self, now: Instant) -> Option<Duration> {
        if self.answered.load(Ordering::Relaxed) {
            return None;
        }
        let since = *self
            .unanswered_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        since.map(|s| now.saturating_duration_since(s))
    }

    /// Remember a throttle verdict (or any verdict carrying `Retry-After`) heard at `at`,
    /// with the end of the pause the pacer then holds (`until`, wall clock), so an operator
    /// sees why a provider is paused and what exactly it said.
    pub(crate) fn note_pause(&self, verdict: &Verdict, at: SystemTime, until: Option<SystemTime>) {
        let throttle = verdict.class == abide_core::VerdictClass::Throttle;
        if !throttle && verdict.retry_after.is_none() {
            return;
        }
        let raw = verdict.retry_after.as_ref().and_then(|r| r.raw.clone());
        *self
            .last_pause
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(LastPause {
            reason: verdict.reason.clone(),
            retry_after_raw: raw,
            at,
            until,
        });
    }

    /// A pause we set because the provider refused item after item (a refused credential,
    /// `abide_core::session`): the last pause is named `credential_refused (REASON)`.
    pub(crate) fn note_refusal(
        &self,
        verdict: &Verdict,
        at: SystemTime,
        until: Option<SystemTime>,
    ) {
        *self
            .last_pause
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(LastPause {
            reason: format!("credential_refused ({})", verdict.reason),
            retry_after_raw: None,
            at,
            until,
        });
    }

    /// Remember the latest `Sunset` (RFC 8594) among `warnings`.
    pub(crate) fn note_warnings(&self, warnings: &[Warning]) {
        for w in warnings {
            if let Warning::Sunset { at } = w {
                *self.sunset.lock().unwrap_or_else(PoisonError::into_inner) = Some(*at);
            }
        }
    }

    pub(crate) fn last_pause(&self) -> Option<LastPause> {
        self.last_pause
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn sunset(&self) -> Option<SystemTime> {
        *self.sunset.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn totals(&self) -> Totals {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Totals {
            attempts: g(&self.attempts),
            delivered: g(&self.delivered),
            throttled: g(&self.throttled),
            retries_scheduled: g(&self.retries_scheduled),
            terminal_failures: g(&self.terminal_failures),
            deferred: g(&self.deferred),
            budget_denied: g(&self.budget_denied),
            credential_refreshes: g(&self.credential_refreshes),
            lease_returns: g(&self.lease_returns),
            in_flight: g(&self.in_flight),
            on_wire: g(&self.on_wire),
            transport_failures: g(&self.transport_failures),
        }
    }
}

/// What a dispatcher did since it started (for one provider or all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Requests sent (one per attempt).
    pub attempts: u64,
    /// Items accepted by the provider (`SUBMITTED`).
    pub delivered: u64,
    /// Attempts the provider throttled (429, SMPP throttle, ...).
    pub throttled: u64,
    /// Items put back to `PENDING` for another attempt.
    pub retries_scheduled: u64,
    /// Items that ended `FAILED`.
    pub terminal_failures: u64,
    /// Items that ended `DEFERRED` (attempt cap, maximum age, rejected credentials).
    pub deferred: u64,
    /// Retries the shared retry budget refused (the item waited longer instead).
    pub budget_denied: u64,
    /// Times the credential was re-read after a 401.
    pub credential_refreshes: u64,
    /// Claimed items handed back unsent (lease too close to expiry, a provider pause longer
    /// than 2 s, shutdown).
    pub lease_returns: u64,
    /// Items claimed by this dispatcher and not yet completed: waiting for a send slot,
    /// on the wire, or waiting to be written back (up to a few claim batches).
    pub in_flight: u64,
    /// Requests sent and not yet answered, right now (at most the senders' concurrency):
    /// what "sending now" means, unlike `in_flight`.
    pub on_wire: u64,
    /// Requests that got no answer (connection refused or reset, timeout); each pauses
    /// the provider (abide_core::session, "outage").
    pub transport_failures: u64,
}

/// The last pause a provider imposed: what it answered and until when. Times serialise as
/// RFC 3339 (UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastPause {
    /// The verdict's reason code (`http_429`, `smpp_0x58_throttled`, ...).
    pub reason: String,
    /// The `Retry-After` value exactly as received (escaped, cut after
    /// [`abide_core::retry_after::MAX_RAW_LEN`] bytes); `None` when the answer had none.
    pub retry_after_raw: Option<String>,
    /// When the answer arrived.
    #[serde(serialize_with = "rfc3339")]
    pub at: SystemTime,
    /// When the pause it caused ends (or ended); `None` when the pacer did not pause.
    #[serde(serialize_with = "rfc3339_opt")]
    pub until: Option<SystemTime>,
}

/// One provider's live state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderProgress {
    /// Provider name.
    pub name: String,
    /// Current pace, requests per second.
    pub rate: f64,
    /// Target pace learned from rate-limit headers, requests per second.
    pub target_rate: Option<f64>,
    /// The limit the pacer estimated from throttles (its learned ceiling), requests per
    /// second; `None` before the first throttle.
    pub ceiling: Option<f64>,
    /// The rate the provider's rate-limit headers advertise (limit / window, before the
    /// configured headroom), requests per second.
    pub advertised_rate: Option<f64>,
    /// Remaining pause imposed by the provider (`Retry-After`, exhausted limit).
    pub paused_for: Option<Duration>,
    /// Fraction of responses over the pacer's window that were throttles.
    pub throttle_rate: f64,
    /// The last pause the provider imposed (reason, raw `Retry-After`, end), if any yet.
    pub last_pause: Option<LastPause>,
    /// The `Sunset` date (RFC 8594) the provider last announced, if any.
    #[serde(serialize_with = "rfc3339_opt")]
    pub sunset: Option<SystemTime>,
    /// Right now every sender is on the wire and the pacer would hand out a slot at once:
    /// the senders, not the pacer (nor the provider), set the pace; more `concurrency`
    /// would send faster.
    pub limited_by_concurrency: bool,
    /// The provider's senders: its `concurrency` (an SMPP provider's `window`).
    pub concurrency: usize,
    /// How the pacer granted this run's send slots: when nearly all were free at once
    /// while items were waiting, concurrency limited the run.
    pub slots: abide_core::SlotCounts,
    /// The provider's limit on requests in flight as this node holds it (set from an
    /// advertised concurrency quota, lowered by its refusals; unlimited without one), the
    /// requests on the wire, and how many sends waited for a place: when many did, that
    /// limit, not the pace, held the run back.
    pub host_in_flight: abide_core::session::InFlightSnapshot,
    /// This node and how it shares the provider's limit with others (local, redis,
    /// fallback; live nodes; its share).
    pub coordination: abide_core::CoordinationStatus,
    /// When this snapshot was taken (wall clock): the durations in it (a pause, time in
    /// fallback, time since a node was seen) count back or forward from here.
    #[serde(skip)]
    pub taken_at: SystemTime,
    /// Items per state currently targeting this provider.
    pub counts: Counts,
    /// Delivery receipts of this provider's items, and those matching none (SMPP).
    pub receipts: ReceiptCounts,
    /// What the provider's transport has seen beyond the answers (an SMPP bind's binds,
    /// drops, timeouts: `"smpp": {...}` in JSON); `None` over HTTP.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportStats>,
    /// Why the provider will not send again this run (an SMPP bind refused for good,
    /// naming the field to fix); its items wait. `None` while it sends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended: Option<String>,
    /// What was done for this provider.
    pub totals: Totals,
}

/// A snapshot of a running dispatcher: the store's counts plus live counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// Items per state in the store (all providers).
    pub counts: Counts,
    /// Delivery receipts in the store (all providers), matched to items or not.
    pub receipts: ReceiptCounts,
    /// Totals over all providers.
    pub totals: Totals,
    /// Per provider, in configuration order.
    pub providers: Vec<ProviderProgress>,
    /// Time since the dispatcher started.
    pub elapsed: Duration,
    /// Age of the oldest waiting item.
    pub oldest_pending_age: Option<Duration>,
}

impl Progress {
    /// Throttled attempts per logical request (items that reached a final state or are
    /// being worked on by this run); the acceptance bound is ≤ 0.05.
    pub fn throttles_per_request(&self) -> f64 {
        let t = &self.totals;
        let logical = t.delivered + t.terminal_failures + t.deferred;
        if logical == 0 {
            0.0
        } else {
            t.throttled as f64 / logical as f64
        }
    }

    /// Deliveries per second since start.
    pub fn achieved_rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs <= 0.0 {
            0.0
        } else {
            self.totals.delivered as f64 / secs
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_host_counts_as_unreachable_only_until_it_answers_once() {
        let s = Stats::default();
        let t0 =
            abide_core::Clock::monotonic(&abide_core::ManualClock::new(SystemTime::UNIX_EPOCH));
        assert_eq!(s.never_answered_for(t0), None, "nothing failed yet");
        s.note_answered(false, t0);
        s.note_answered(false, t0 + Duration::from_secs(5));
        assert_eq!(
            s.never_answered_for(t0 + Duration::from_secs(30)),
            Some(Duration::from_secs(30)),
            "timed from the first failure"
        );
        s.note_answered(true, t0 + Duration::from_secs(31));
        s.note_answered(false, t0 + Duration::from_secs(32));
        // Answered once: a later outage is waited out, never taken for a wrong address.
        assert_eq!(s.never_answered_for(t0 + Duration::from_secs(600)), None);
    }
    use super::*;
    use abide_core::{DelayReason, RetryDelay, VerdictClass};

    fn verdict(class: VerdictClass, reason: &str, raw: Option<&str>) -> Verdict {
        Verdict {
            class,
            reason: reason.to_owned(),
            retry_after: raw.map(|r| RetryDelay {
                delay: Duration::from_secs(7),
                reason: DelayReason::Honoured,
                raw: Some(r.to_owned()),
                retry_after: Some(Duration::from_secs(7)),
            }),
            rate_limit: None,
            secondary_limit: false,
        }
    }

    #[test]
    fn a_throttle_is_remembered_with_its_raw_retry_after_and_a_success_keeps_it() {
        let s = Stats::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(s.last_pause(), None);
        let until = t0 + Duration::from_secs(7);
        s.note_pause(
            &verdict(VerdictClass::Throttle, "http_429", Some("7")),
            t0,
            Some(until),
        );
        // A later success (no Retry-After) does not erase what paused us.
        s.note_pause(
            &verdict(VerdictClass::Success, "http_202", None),
            until,
            None,
        );
        let p = s.last_pause().expect("recorded");
        assert_eq!(p.reason, "http_429");
        assert_eq!(p.retry_after_raw.as_deref(), Some("7"));
        assert_eq!((p.at, p.until), (t0, Some(until)));
        let json = serde_json::to_value(&p).expect("serialises");
        assert_eq!(json["at"], "2027-01-15T08:00:00Z");
        assert_eq!(json["until"], "2027-01-15T08:00:07Z");
        // A throttle without Retry-After replaces it, raw None.
        s.note_pause(
            &verdict(VerdictClass::Throttle, "smpp_0x58_throttled", None),
            until,
            None,
        );
        let p = s.last_pause().expect("recorded");
        assert_eq!(
            (p.reason.as_str(), p.retry_after_raw),
            ("smpp_0x58_throttled", None)
        );
    }

    #[test]
    fn the_latest_sunset_is_kept() {
        let s = Stats::default();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        s.note_warnings(&[]);
        assert_eq!(s.sunset(), None);
        s.note_warnings(&[Warning::Sunset { at }]);
        assert_eq!(s.sunset(), Some(at));
    }
}
