//! [`PacerConfig`]: the tuning of one [`Pacer`](super::Pacer), its defaults and the clamps
//! [`Pacer::new`](super::Pacer::new) applies.

use std::time::Duration;

/// Lowest rate ever used: one request per hour (requests per second).
pub const MIN_RATE: f64 = 1.0 / 3600.0;
/// Highest rate ever used (requests per second).
pub const MAX_RATE: f64 = 1_000_000.0;
/// Longest pause a remote can impose through one `Retry-After` or rate-limit reset.
pub const MAX_PAUSE: Duration = Duration::from_secs(600);

/// Shortest own pause after a throttle without a server delay (`throttle_pause` floor).
const MIN_THROTTLE_PAUSE: Duration = Duration::from_millis(100);

/// Configuration of a [`Pacer`](super::Pacer). Rates are in requests per second. Out-of-range or NaN
/// values are clamped by [`Pacer::new`](super::Pacer::new).
///
/// # Default
/// - initial_rate: 10/s, min_rate: 0.1/s, max_rate: 1000/s
/// - burst: 1 (requests that may go back to back)
/// - decrease_factor: 0.95 (of the ceiling estimate, not of the rate)
/// - recovery: 15 s (back at the ceiling 15 s after a decrease, then probing; longer at low
///   rates)
/// - increase_per_sec: 0 (no additive lower bound)
/// - throttle_threshold: 0.02 (2 % throttled over the window, at or below the ceiling)
/// - window: 10 s
/// - headroom: 0.97 (aim at 97 % of an advertised limit; see the module docs)
/// - throttle_pause: 1 s (first pause after a throttle without a server delay; doubles per
///   consecutive one)
/// - max_throttle_pause: 10 min (at most [`MAX_PAUSE`])
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerConfig {
    /// Rate at start.
    pub initial_rate: f64,
    /// Lowest rate the pacer may reach.
    pub min_rate: f64,
    /// Highest rate the pacer may reach.
    pub max_rate: f64,
    /// How many requests may be sent back to back (≥ 1).
    pub burst: f64,
    /// On a decrease the rate becomes this × the ceiling estimate, in (0, 1]; it is also the
    /// depth of the cubic curve below and above the ceiling.
    pub decrease_factor: f64,
    /// Additive lower bound on the climb after a decrease (requests per second, per clean
    /// second); 0 leaves the cubic curve alone.
    pub increase_per_sec: f64,
    /// Throttled fraction of responses over `window` above which a rate at or below the
    /// ceiling decreases (a throttle above the ceiling always does).
    pub throttle_threshold: f64,
    /// Sliding window over which throttles and accepted requests are counted.
    pub window: Duration,
    /// Fraction of an advertised rate (`limit / window`) we aim at, in (0, 1].
    pub headroom: f64,
    /// Clean time after a decrease at which the rate is back at the ceiling (CUBIC's `K`);
    /// probing above the ceiling takes as long again to reach `(2 − decrease_factor) ×`
    /// the ceiling.
    pub recovery: Duration,
    /// Pause of the host after a throttle that named no delay; doubled for each
    /// consecutive one (see the module docs). At least 100 ms.
    pub throttle_pause: Duration,
    /// Longest such pause; at most [`MAX_PAUSE`].
    pub max_throttle_pause: Duration,
}

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            initial_rate: 10.0,
            min_rate: 0.1,
            max_rate: 1000.0,
            burst: 1.0,
            decrease_factor: 0.95,
            increase_per_sec: 0.0,
            throttle_threshold: 0.02,
            window: Duration::from_secs(10),
            headroom: 0.97,
            recovery: Duration::from_secs(15),
            throttle_pause: Duration::from_secs(1),
            max_throttle_pause: MAX_PAUSE,
        }
    }
}

/// Cold start without a hint: this many requests per second per sender (see
/// [`PacerConfig::cold_start_rate`]).
const COLD_START_PER_SENDER: f64 = 1.0;

impl PacerConfig {
    /// The rate to start at when nothing is known about the host (no `rate_hint`): what
    /// `senders` concurrent senders would send if each answer took a second, from where
    /// slow start doubles per round of clean answers (never above 1.25 × what the host
    /// accepted) to the first throttle; an advertised limit replaces it at the first answer
    /// that carries one. Requests per second, at least 1.
    #[allow(clippy::cast_precision_loss)] // senders are at most thousands
    pub fn cold_start_rate(senders: usize) -> f64 {
        (senders.max(1) as f64 * COLD_START_PER_SENDER).clamp(1.0, MAX_RATE)
    }

    pub(crate) fn sanitized(self) -> Self {
        let d = Self::default();
        let num = |v: f64, dflt: f64, lo: f64, hi: f64| {
            if v.is_nan() {
                dflt.clamp(lo, hi)
            } else {
                v.clamp(lo, hi)
            }
        };
        let min_rate = num(self.min_rate, d.min_rate, MIN_RATE, MAX_RATE);
        let max_rate = num(self.max_rate, d.max_rate, min_rate, MAX_RATE);
        Self {
            initial_rate: num(self.initial_rate, d.initial_rate, min_rate, max_rate),
            min_rate,
            max_rate,
            burst: num(self.burst, d.burst, 1.0, MAX_RATE),
            decrease_factor: num(self.decrease_factor, d.decrease_factor, 0.01, 1.0),
            increase_per_sec: num(self.increase_per_sec, d.increase_per_sec, 0.0, MAX_RATE),
            throttle_threshold: num(self.throttle_threshold, d.throttle_threshold, 0.0, 1.0),
            window: self
                .window
                .clamp(Duration::from_millis(100), Duration::from_secs(3600)),
            headroom: num(self.headroom, d.headroom, 0.01, 1.0),
            recovery: self
                .recovery
                .clamp(Duration::from_millis(100), Duration::from_secs(3600)),
            throttle_pause: self.throttle_pause.clamp(MIN_THROTTLE_PAUSE, MAX_PAUSE),
            max_throttle_pause: self.max_throttle_pause.clamp(
                self.throttle_pause.clamp(MIN_THROTTLE_PAUSE, MAX_PAUSE),
                MAX_PAUSE,
            ),
        }
    }
}
