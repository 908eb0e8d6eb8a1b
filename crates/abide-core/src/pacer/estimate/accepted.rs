//! What the host accepted: answers that were not throttles, per second of the time it could
//! accept any (pauses left out), over one of the estimate's counters.

use std::time::{Duration, Instant};

use super::super::pauses::Pauses;
use super::super::schedule::Schedule;
use super::super::PacerConfig;
use super::{Counter, Estimate, BUCKETS, RECENT, RECENT_BUCKETS, ROUND_BUCKETS, ROUND_SPAN};

impl Estimate {
    /// Requests the host accepted (answers that were not throttles) per second over a
    /// counter's span; `None` while that span is under half a second.
    #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
    pub(super) fn measured(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        which: Counter,
        pauses: &mut Pauses,
        schedule: &Schedule,
    ) -> Option<f64> {
        let (span, n, counter) = match which {
            Counter::Window => (cfg.window, BUCKETS, &mut self.observed),
            Counter::Recent => (cfg.window / RECENT, RECENT_BUCKETS, &mut self.recent),
            Counter::Round => (ROUND_SPAN, ROUND_BUCKETS, &mut self.round),
        };
        let width = span / n;
        let age = now.saturating_duration_since(self.born);
        // The counters hold the last `span` plus the elapsed part of the current bucket.
        let part = Duration::from_nanos(
            u64::try_from(age.as_nanos() % width.as_nanos().max(1)).unwrap_or(0),
        );
        let covered = age.min(span + part).min(schedule.offered(now));
        let (total, throttles) = counter.sums(now);
        // Time the host was paused accepted nothing and says nothing about the limit: with
        // a `Retry-After: 1` per throttle, counting it read a 100/s limit as 60/s.
        if let Counter::Window = which {
            // The longest span asked about: older stretches are of no more use.
            pauses.forget_older_than(span, now);
        }
        let paused = pauses.within(now - covered, now);
        let open = covered.saturating_sub(paused);
        // The short counter is read when the host was mostly paused (a fallen limit): a
        // tenth of a second of evidence beats none.
        let least = match which {
            Counter::Window => Duration::from_millis(500),
            Counter::Recent | Counter::Round => Duration::from_millis(100),
        };
        if open < least {
            return None;
        }
        // This node's part of what the host accepted, scaled to the whole; and what noise
        // refused was sent within the limit too.
        let noise = self.noise.map_or(0.0, |n| n.fraction);
        Some(
            total.saturating_sub(throttles) as f64
                / open.as_secs_f64()
                / self.share
                / (1.0 - noise),
        )
    }
}
