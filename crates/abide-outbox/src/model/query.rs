//! What the store is asked about its items: counts per state, which items to list or
//! requeue.

use serde::Serialize;

use crate::state::State;

/// Items per state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `QUEUED`.
    pub queued: u64,
    /// `IN_FLIGHT`.
    pub in_flight: u64,
    /// `PENDING`.
    pub pending: u64,
    /// `SUBMITTED`.
    pub submitted: u64,
    /// `FAILED`.
    pub failed: u64,
    /// `DEFERRED`.
    pub deferred: u64,
}

impl Counts {
    /// The count for one state.
    pub fn get(&self, s: State) -> u64 {
        match s {
            State::Queued => self.queued,
            State::InFlight => self.in_flight,
            State::Pending => self.pending,
            State::Submitted => self.submitted,
            State::Failed => self.failed,
            State::Deferred => self.deferred,
        }
    }

    /// Mutable count for one state.
    pub fn get_mut(&mut self, s: State) -> &mut u64 {
        match s {
            State::Queued => &mut self.queued,
            State::InFlight => &mut self.in_flight,
            State::Pending => &mut self.pending,
            State::Submitted => &mut self.submitted,
            State::Failed => &mut self.failed,
            State::Deferred => &mut self.deferred,
        }
    }

    /// Items still being worked on (`QUEUED + IN_FLIGHT + PENDING`).
    pub fn active(&self) -> u64 {
        self.queued + self.in_flight + self.pending
    }

    /// All items.
    pub fn total(&self) -> u64 {
        State::ALL.iter().map(|&s| self.get(s)).sum()
    }
}

/// Which items to requeue: [`crate::Store::requeue_deferred`] applies it to `DEFERRED`
/// items, [`crate::Store::requeue_failed`] to `FAILED` ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequeueFilter {
    /// Only items currently targeting this provider.
    pub provider: Option<String>,
    /// Only these ids.
    pub ids: Option<Vec<String>>,
}

/// Which items [`crate::Store::list`] returns: newest first (by `created_at`, then id,
/// descending), at most `limit` of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only items in this state.
    pub state: Option<State>,
    /// Only items currently targeting this provider ([`Item::current_provider`](super::Item::current_provider): after a
    /// fail-over, the second provider).
    pub provider: Option<String>,
    /// At most this many items; clamped to [`ListFilter::MAX_LIMIT`]. `0` returns none.
    pub limit: usize,
}

impl ListFilter {
    /// The most items one [`crate::Store::list`] call returns (10,000): a person's view,
    /// not an export; page with a narrower filter.
    pub const MAX_LIMIT: usize = 10_000;
}
