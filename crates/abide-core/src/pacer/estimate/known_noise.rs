//! The estimate with noise known (see `noise.rs`): a throttle within the noise's share sends
//! only its own item back; a share clearly above it is the limit, cut to like any other.

use std::time::Instant;

use super::super::noise;
use super::super::pauses::Pauses;
use super::super::schedule::Schedule;
use super::super::PacerConfig;
use super::Estimate;

impl Estimate {
    /// A fresh throttle while noise is known (`(total, throttles)` over the deciding window,
    /// this one counted): `true` when it was decided here, within the noise (the rate stays)
    /// or clearly above it (a cut to what the host accepted, the noise's share counted as
    /// accepted, on trial like any cut); `false` when there is no noise, or the share says
    /// the host is refusing (the noise is forgotten).
    pub(super) fn throttle_in_known_noise(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        (total, throttles): (u64, u64),
        pauses: &mut Pauses,
        schedule: &mut Schedule,
    ) -> bool {
        if self.noise.is_none() {
            return false;
        }
        if !self.above_noise(cfg, now, (total, throttles)) {
            // Within the noise: the item retries, the rate stays.
            return true;
        }
        if noise::refusing(total, throttles) {
            // Refusing, not metering: an outage or a fallen limit, decided as any throttle.
            // (A climb past the limit refuses less than that, and is cut to like a limit.)
            self.noise = None;
            return false;
        }
        let before = self.before_cut(cfg, now, pauses, schedule);
        self.decrease(cfg, now, pauses, schedule);
        self.begin_trial(cfg, now, (total, throttles), before, schedule);
        true
    }

    /// Is a throttle arriving now within the noise: one that sends only its own item back
    /// and does not pause the host?
    pub(in crate::pacer) fn within_noise(&mut self, cfg: &PacerConfig, now: Instant) -> bool {
        if self.noise.is_none() {
            return false;
        }
        let (total, throttles) = self.decide.sums(now);
        !self.above_noise(cfg, now, (total + 1, throttles + 1))
    }

    /// Is the share clearly above the known noise, over the deciding window (`(total,
    /// throttles)`), or, while searching, over the last `window / 5` or the last search
    /// round (a climb past the limit shows there first: the deciding window still holds
    /// the seconds below it)?
    fn above_noise(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        (total, throttles): (u64, u64),
    ) -> bool {
        let Some(n) = self.noise else {
            return false;
        };
        if n.exceeded(cfg.throttle_threshold, total, throttles) {
            return true;
        }
        if self.ceiling.is_some() {
            // Near a known ceiling the deciding window says enough; reading short spans
            // too would take the noise's own bunching for a limit every few seconds.
            return false;
        }
        let (recent, recent_throttles) = self.recent.sums(now);
        let (round, round_throttles) = self.round.sums(now);
        n.exceeded(cfg.throttle_threshold, recent, recent_throttles)
            || n.exceeded(cfg.throttle_threshold, round, round_throttles)
    }
}
