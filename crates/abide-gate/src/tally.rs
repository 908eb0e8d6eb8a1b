//! One admitting gate's numbers after a request ([`Tally`]) and the [`GateStatus`] shown
//! for a gate.

use std::time::Duration;

use crate::gate::Gate;
use crate::headers::{ceil_secs, GateStatus};

/// One admitting gate's numbers after the request: units left and time until whole again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally {
    /// Index into the set's gates (a set holds few).
    pub(crate) gate: u32,
    pub(crate) remaining: u32,
    /// Nanoseconds: 16 bytes a tally instead of 32, copied with every admission.
    pub(crate) reset_ns: u64,
}

impl Tally {
    /// `remaining` of a GCRA gate, computed from `reset_ns` when shown.
    pub(crate) const DERIVED: u32 = u32::MAX;
}

/// `g`'s status with `remaining` units and `reset` to go.
pub(crate) fn status(g: &Gate, remaining: u32, reset: Duration) -> GateStatus {
    let (limit, window) = g.limit_and_window();
    GateStatus {
        name: g.name.clone(),
        category: g.category.clone(),
        limit,
        remaining,
        window_secs: window.map(ceil_secs),
        reset,
    }
}
