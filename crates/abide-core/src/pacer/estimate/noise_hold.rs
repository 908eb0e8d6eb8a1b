//! The noise's side of the estimate (see `noise.rs`): throttles that do not follow the rate,
//! once told from a limit, hold a floor instead of cutting it.

use std::time::{Duration, Instant};

use super::super::noise::{self, Cut, Noise};
use super::super::pauses::Pauses;
use super::super::schedule::Schedule;
use super::super::PacerConfig;
use super::{fraction, Counter, Estimate};

impl Estimate {
    /// A fresh throttle while noise is known (`(total, throttles)` over the deciding window,
    /// this one counted): `true` when it was decided here, within the noise (the rate stays)
    /// or clearly above it (one cut to what the host accepted, then the noise held again from
    /// there); `false` when there is no noise, or the share says the host is refusing.
    pub(super) fn throttle_in_known_noise(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        (total, throttles): (u64, u64),
        pauses: &mut Pauses,
        schedule: &mut Schedule,
    ) -> bool {
        let Some(n) = self.noise else {
            return false;
        };
        if !n.exceeded(cfg.throttle_threshold, total, throttles) {
            // Within the noise: the item retries, the rate stays.
            return true;
        }
        if fraction(throttles, total) >= noise::MOST {
            // Refusing, not metering: an outage or a fallen limit, decided as any throttle.
            self.noise = None;
            return false;
        }
        // Clearly more than the noise: the limit is near. One cut to what the host
        // accepted (the noise is known, so no halving and no judging), then the noise
        // is held again from there.
        let accepted = self.measured(cfg, now, Counter::Window, pauses, schedule);
        self.decrease(cfg, now, pauses, schedule);
        if let Some(a) = accepted.filter(|a| a * cfg.decrease_factor > self.rate) {
            let cap = self.target.unwrap_or(cfg.max_rate).min(cfg.max_rate);
            self.ceiling = Some(a.clamp(cfg.min_rate, cfg.max_rate));
            self.anchor = a;
            self.rate = (a * cfg.decrease_factor).clamp(cfg.min_rate, cap.max(cfg.min_rate));
            self.base = self.rate;
        }
        self.held = None;
        self.noise = Some(Noise {
            floor: self.rate,
            ..n
        });
        true
    }

    /// A share judged at `before.rate` stayed where it was at the lower `after.rate`: the
    /// throttles are noise. Hold a floor, at the flat of the curve. The floor is what the
    /// host was accepting over the window (`accepted`, requests per second, pauses left out), never above the higher of the two rates: a rate the host
    /// was seen to take whatever it refused at random.
    pub(super) fn hold_noise(
        &mut self,
        cfg: &PacerConfig,
        before: Cut,
        after: Cut,
        accepted: Option<f64>,
    ) {
        let cap = self.target.unwrap_or(cfg.max_rate).min(cfg.max_rate);
        let higher = before.rate.max(self.rate);
        let floor = accepted
            .map_or(before.rate.min(self.rate), |a| a.min(higher))
            .clamp(cfg.min_rate, cap.max(cfg.min_rate));
        self.noise = Some(Noise {
            fraction: before.fraction.max(after.fraction),
            floor,
        });
        self.held = None;
        self.last_cut = None;
        self.ceiling = Some(floor);
        self.anchor = floor;
        self.base = floor;
        self.rate = floor;
        self.probe = Duration::from_secs_f64(self.k_secs(cfg));
    }

    /// Is a throttle arriving now within the noise (see `noise.rs`): one that sends only its
    /// own item back and does not pause the host?
    pub(in crate::pacer) fn within_noise(&mut self, cfg: &PacerConfig, now: Instant) -> bool {
        let Some(n) = self.noise else {
            return false;
        };
        let (total, throttles) = self.decide.sums(now);
        !n.exceeded(cfg.throttle_threshold, total + 1, throttles + 1)
    }
}
