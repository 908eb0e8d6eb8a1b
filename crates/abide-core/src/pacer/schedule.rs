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
    /// Slots handed out so far: free when asked for, or later (paced or paused).
    pub(super) counts: SlotCounts,
    /// After a jump up, the lane that fills the gaps of the queue already handed out.
    fill: Option<Fill>,
    /// The earliest slot a quota burst may take: one interval at the hard cap
    /// (`PacerConfig::max_rate`) after the last one ([`Schedule::take_at`]).
    cap_next: Instant,
}

/// When the rate jumps up (an advertised limit adopted at once), the slots already handed
/// out keep their old spacing until the end of the queue: 40 senders starting at 40/s
/// hold a second of slots, and the new rate would only apply after it. This lane hands out
/// slots at the difference of the two rates until then, so the queue as a whole runs at
/// the new rate from the moment it is known.
#[derive(Debug, Clone, Copy)]
struct Fill {
    next: Instant,
    interval: Duration,
    until: Instant,
}

/// How the slots a [`Pacer`](super::Pacer) handed out were granted: when nearly all were
/// free at once, the pacer was not what held the senders back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SlotCounts {
    /// Slots free at the moment they were asked for.
    pub at_once: u64,
    /// Slots later than that: the caller waited on the pace or a pause.
    pub held_back: u64,
}

impl SlotCounts {
    /// Every slot handed out.
    pub fn total(&self) -> u64 {
        self.at_once.saturating_add(self.held_back)
    }
}

impl Schedule {
    /// An empty queue, its first slot free at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            tat: now,
            first_slot: None,
            counts: SlotCounts::default(),
            fill: None,
            cap_next: now,
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
        if let Some(at) = self.fill_slot(now, pause_end) {
            self.count(now, at);
            return at;
        }
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
        self.count(now, at);
        at
    }

    /// A slot at `at` granted from an advertised quota, ahead of the spacing: the spacing
    /// resumes one interval at `rate` after it, owing nothing for the burst (the server's
    /// count, not the spacing, bounds a burst), and the next burst slot is at least one
    /// interval at the hard cap `max_rate` later.
    pub(super) fn take_at(&mut self, now: Instant, at: Instant, rate: f64, max_rate: f64) {
        self.tat = self.tat.max(at + interval(rate));
        self.cap_next = self.cap_next.max(at + interval(max_rate));
        self.count(now, at);
    }

    /// The earliest slot a quota burst may take now (see [`Schedule::take_at`]).
    pub(super) fn cap_next(&self) -> Instant {
        self.cap_next
    }

    fn count(&mut self, now: Instant, at: Instant) {
        self.first_slot.get_or_insert(at);
        if at > now {
            self.counts.held_back += 1;
        } else {
            self.counts.at_once += 1;
        }
    }

    /// A slot from the fill lane, if it has one left before the end of the old queue.
    fn fill_slot(&mut self, now: Instant, pause_end: Option<Instant>) -> Option<Instant> {
        let f = self.fill.as_mut()?;
        let at = pause_end.map_or(now.max(f.next), |p| now.max(f.next).max(p));
        if at < f.until {
            f.next = at + f.interval;
            Some(at)
        } else {
            self.fill = None;
            None
        }
    }

    /// The rate jumped from `old` to `new` at `now`: fill the queue already handed out up
    /// to the new rate (see [`Fill`]).
    pub(super) fn jump(&mut self, now: Instant, old: f64, new: f64) {
        if new > old && self.tat > now {
            self.fill = Some(Fill {
                next: now,
                interval: interval(new - old),
                until: self.tat,
            });
        }
    }

    /// The slot a reservation at `now` would get, without taking it.
    pub(super) fn peek(
        &self,
        now: Instant,
        rate: f64,
        burst: f64,
        pause_end: Option<Instant>,
    ) -> Instant {
        let tolerance = interval(rate).mul_f64(burst - 1.0);
        let mut at = now;
        if let Some(t) = self.tat.checked_sub(tolerance) {
            at = at.max(t);
        }
        if let Some(f) = self.fill.filter(|f| now.max(f.next) < f.until) {
            at = at.min(now.max(f.next));
        }
        pause_end.map_or(at, |p| at.max(p))
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
        self.fill = None;
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
