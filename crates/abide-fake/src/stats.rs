//! What the provider saw, for `GET /_stats` and [`crate::RunningProvider::stats`].

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

/// Seconds of per-second history kept.
pub const HISTORY_SECS: u64 = 3600;

/// Idempotency keys whose requests are counted ([`KeyCounts`]); requests with a key first
/// seen after this many are not counted per key, and [`KeyCounts::truncated`] says so.
pub const MAX_COUNTED_KEYS: usize = 100_000;

/// Message requests received per `Idempotency-Key`, whatever the answer (`GET
/// /_stats/keys`, [`crate::RunningProvider::requests_by_key`]): what a client's own
/// attempt count per item is checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KeyCounts {
    /// Requests per idempotency key: every authenticated request with a JSON body and a
    /// valid key, counted before any limit, suspension or duplicate check.
    pub requests_by_key: BTreeMap<String, u64>,
    /// True when more than [`MAX_COUNTED_KEYS`] keys arrived: later keys are not counted.
    pub truncated: bool,
}

/// A point-in-time copy of the provider's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StatsSnapshot {
    /// Message requests received (`POST /v1/messages`), whatever the answer.
    pub requests: u64,
    /// Messages accepted (each at most once per idempotency key).
    pub accepted: u64,
    /// Repeats of an accepted idempotency key, answered with the original answer.
    pub duplicates: u64,
    /// Requests refused, any reason.
    pub rejected: u64,
    /// Refusals by reason: a gate category (`key_rate`, `account_rate`, `concurrency`,
    /// `account_concurrency`), `suspended`, `unavailable` (503), `unauthenticated`,
    /// `bad_request`.
    pub rejected_by_reason: BTreeMap<String, u64>,
    /// Refusals by HTTP status (an SMPP throttle sent with 200 counts under 200).
    pub rejected_by_status: BTreeMap<u16, u64>,
    /// Keys suspended by abuse protection.
    pub suspensions: u64,
    /// Requests accepted over the limit because of the grace period.
    pub grace_passes: u64,
    /// Accepted requests a delaying gate held until their slot (`gate_mode = "delay"`).
    pub delayed: u64,
    /// Total time those requests were held, in milliseconds.
    pub delay_ms: u64,
    /// Held requests whose client went away before their slot (their slots given back).
    pub abandoned: u64,
    /// Message requests being processed now.
    pub in_flight: u64,
    /// Per-second counts, oldest first, at most [`HISTORY_SECS`] entries.
    pub histogram: Vec<SecondCount>,
    /// The SMPP listener's counters, when it runs (the fields above count HTTP only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smpp: Option<crate::smpp::stats::SmppStats>,
}

/// Counts of one second since the provider started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SecondCount {
    /// Whole seconds since start.
    pub second: u64,
    /// Message requests received in that second.
    pub requests: u64,
    /// Of those, refused by a limit (429, or a throttle in another style).
    pub throttled: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) snap: StatsSnapshot,
    history: VecDeque<SecondCount>,
    keys: KeyCounts,
}

impl Stats {
    fn bucket(&mut self, second: u64) -> &mut SecondCount {
        if self.history.back().is_none_or(|b| b.second < second) {
            self.history.push_back(SecondCount {
                second,
                ..SecondCount::default()
            });
        }
        while self
            .history
            .front()
            .is_some_and(|b| b.second + HISTORY_SECS <= second)
        {
            self.history.pop_front();
        }
        // Never empty here (pushed above, and the newest bucket is never popped). A late
        // request for an older second than the newest is counted in the newest.
        let last = self.history.len() - 1;
        &mut self.history[last]
    }

    pub(crate) fn request(&mut self, second: u64) {
        self.snap.requests += 1;
        self.bucket(second).requests += 1;
    }

    /// One request carrying idempotency key `key`.
    pub(crate) fn request_for_key(&mut self, key: &str) {
        if let Some(n) = self.keys.requests_by_key.get_mut(key) {
            *n += 1;
        } else if self.keys.requests_by_key.len() < MAX_COUNTED_KEYS {
            self.keys.requests_by_key.insert(key.to_owned(), 1);
        } else {
            self.keys.truncated = true;
        }
    }

    pub(crate) fn key_counts(&self) -> KeyCounts {
        self.keys.clone()
    }

    pub(crate) fn reject(&mut self, second: u64, reason: &str, status: u16, throttle: bool) {
        self.snap.rejected += 1;
        *self
            .snap
            .rejected_by_reason
            .entry(reason.to_owned())
            .or_default() += 1;
        *self.snap.rejected_by_status.entry(status).or_default() += 1;
        if throttle {
            self.bucket(second).throttled += 1;
        }
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let mut s = self.snap.clone();
        s.histogram = self.history.iter().copied().collect();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_bounded() {
        let mut s = Stats::default();
        for sec in 0..(HISTORY_SECS + 50) {
            s.request(sec);
        }
        s.reject(HISTORY_SECS + 49, "key_rate", 429, true);
        let snap = s.snapshot();
        assert_eq!(snap.histogram.len() as u64, HISTORY_SECS);
        assert_eq!(snap.histogram[0].second, 50);
        assert_eq!(snap.histogram.last().unwrap().throttled, 1);
        assert_eq!(snap.rejected_by_status[&429], 1);
    }

    #[test]
    fn key_counts_are_bounded() {
        let mut s = Stats::default();
        s.request_for_key("a");
        s.request_for_key("a");
        for i in 0..MAX_COUNTED_KEYS {
            s.request_for_key(&format!("k{i}"));
        }
        let k = s.key_counts();
        assert_eq!(k.requests_by_key["a"], 2);
        assert_eq!(k.requests_by_key.len(), MAX_COUNTED_KEYS);
        assert!(k.truncated);
        s.request_for_key("a");
        assert_eq!(s.key_counts().requests_by_key["a"], 3);
    }
}
