//! Spacing: GCRA, the "virtual scheduling" of ITU-T I.371. A theoretical arrival time (TAT)
//! advances by `1 / rate` per reservation; a slot is `max(now, TAT − burst tolerance, pause
//! end)`.

use std::time::{Duration, Instant};

/// The queue of slots handed out to one host.
#[derive(Debug)]
pub(super) struct Schedule {
    /// Theoretical arrival time: the next free slot at the current rate.
    tat: Instant,
    /// The first slot handed out (or the first answer, for callers that do not reserve):
    /// before it the host was offered nothing, so that time says nothing about what it
    /// accepts (an outbox creates its pacers long before it sends).
    first_slot: Option<Instant>,
}

impl Schedule {
    /// An empty queue, its first slot free at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            tat: now,
            first_slot: None,
        }
    }

    /// The next slot at `rate` with `burst` back to back, never before `now` nor `pause_end`.
    pub(super) fn reserve(
        &mut self,
        now: Instant,
        rate: f64,
        burst: f64,
        pause_end: Option<Instant>,
    ) -> Instant {
        let interval = interval(rate);
        let tolerance = interval.mul_f64(burst - 1.0);
        let mut at = now;
        if let Some(t) = self.tat.checked_sub(tolerance) {
            at = at.max(t);
        }
        if let Some(p) = pause_end {
            at = at.max(p);
        }
        self.tat = self.tat.max(at) + interval;
        self.first_slot.get_or_insert(at);
        at
    }

    /// An answer came at `now`: traffic began then at the latest.
    pub(super) fn note_traffic(&mut self, now: Instant) {
        self.first_slot.get_or_insert(now);
    }

    /// How long the host has been offered traffic before `now`.
    pub(super) fn offered(&self, now: Instant) -> Duration {
        self.first_slot
            .map_or(Duration::ZERO, |f| now.saturating_duration_since(f))
    }

    /// The rate fell from `old` to `new`: re-cost the slots already handed out so that the
    /// queue as a whole averages the new rate (at most `max_stretch` times as long). The
    /// slots keep their times; the next free slot moves out. Returns the end of the queue
    /// before the change (the end of the old round).
    pub(super) fn recost(&mut self, now: Instant, old: f64, new: f64, max_stretch: f64) -> Instant {
        let queued = self.tat.saturating_duration_since(now);
        let round_end = self.tat.max(now);
        let stretch = (old / new).clamp(1.0, max_stretch);
        if let Some(tat) = now.checked_add(queued.mul_f64(stretch)) {
            self.tat = self.tat.max(tat);
        }
        round_end
    }
}

/// Time between sends at `rate` (requests per second, already within [MIN_RATE, MAX_RATE]).
pub(super) fn interval(rate: f64) -> Duration {
    Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::from_secs(3600))
}
