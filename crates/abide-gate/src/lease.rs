//! A held concurrency reservation or reserved slot: [`Lease`].

use std::fmt;
use std::sync::Arc;

use crate::table::{Entry, TraceId};

/// A held concurrency reservation. Releasing it is idempotent: only the acquisition that
/// received this exact ticket can give it back, so a stale or repeated release cannot free a
/// slot that now belongs to someone else.
///
/// `Debug` shows the scope as a [`crate::safe_trace`] hash and the trace as a number, never
/// the raw key.
#[derive(Clone)]
pub struct Lease {
    /// Index into the set's gates.
    pub(crate) gate: u32,
    /// The caller's entry holding the slot (a release looks nothing up).
    pub(crate) entry: Arc<Entry>,
    pub(crate) trace: TraceId,
    pub(crate) ticket: u64,
    /// A rate gate's reserved future slot held by a waiting request (not a concurrency
    /// slot): releasing it gives the slot back.
    pub(crate) waiting: bool,
}

impl PartialEq for Lease {
    fn eq(&self, o: &Self) -> bool {
        self.gate == o.gate
            && Arc::ptr_eq(&self.entry, &o.entry)
            && self.trace == o.trace
            && self.ticket == o.ticket
            && self.waiting == o.waiting
    }
}

impl Eq for Lease {}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("gate", &self.gate)
            .field("scope", &crate::safe_trace(&self.entry.id))
            .field("ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}
