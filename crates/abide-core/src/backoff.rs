//! Our own retry delay, used when the server did not say how long to wait.
//!
//! Capped exponential backoff with jitter, after "Exponential Backoff And Jitter" (AWS
//! Architecture Blog, 2015). Without jitter, clients that failed together retry together and
//! the provider sees the same spike again one delay later; full jitter spreads the retries
//! uniformly over the whole interval, which the article shows finishes the work with the least
//! total load. Decorrelated jitter is offered for callers that carry the previous delay.
//!
//! A server's `Retry-After` always outranks this schedule (see
//! [`RetryAfterPolicy`](crate::RetryAfterPolicy)); the backoff only fills the silence.
//!
//! Randomness is injected (`&mut dyn RngCore`) so a seeded `rand_chacha::ChaCha8Rng`
//! reproduces a schedule exactly in tests.

use std::time::Duration;

use rand::{Rng, RngCore};

/// How random noise is added to the exponential schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Jitter {
    /// No noise: `min(cap, base × 2^(retry−1))`. Deterministic; meant for tests and tables.
    None,
    /// Full jitter: uniform in `[0, min(cap, base × 2^(retry−1))]`.
    #[default]
    Full,
    /// Decorrelated jitter: `min(cap, uniform in [base, previous × 3])`, where `previous` is
    /// the last delay returned (or `base` for the first retry).
    Decorrelated,
}

/// Capped exponential backoff with jitter.
///
/// # Default
/// - base: 500 ms
/// - cap: 5 min
/// - jitter: [`Jitter::Full`]
///
/// # Examples
/// ```
/// use abide_core::backoff::{Backoff, Jitter};
/// use rand::SeedableRng;
/// use std::time::Duration;
///
/// let b = Backoff { base: Duration::from_millis(100), cap: Duration::from_secs(1), jitter: Jitter::None };
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
/// assert_eq!(b.delay(1, None, &mut rng), Duration::from_millis(100));
/// assert_eq!(b.delay(3, None, &mut rng), Duration::from_millis(400));
/// assert_eq!(b.delay(60, None, &mut rng), Duration::from_secs(1)); // capped, no overflow
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay ceiling of the first retry (and lower bound for decorrelated jitter).
    pub base: Duration,
    /// Longest delay ever returned.
    pub cap: Duration,
    /// How noise is added.
    pub jitter: Jitter,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(300),
            jitter: Jitter::Full,
        }
    }
}

impl Backoff {
    /// A backoff with the given base and cap and full jitter.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            jitter: Jitter::Full,
        }
    }

    /// Replace the jitter mode.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The un-jittered ceiling for retry number `retry` (1 = first retry; 0 is treated as 1):
    /// `min(cap, base × 2^(retry−1))` ([`capped_doubling`]), saturating instead of
    /// overflowing for huge `retry`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        capped_doubling(self.base, self.cap, retry.saturating_sub(1))
    }

    /// The delay before retry number `retry` (1 = first retry). `previous` is the delay
    /// returned for the retry before (used by [`Jitter::Decorrelated`] only; `None` means
    /// `base`). Always within `[0, cap]`; never panics, whatever `retry` is.
    pub fn delay(&self, retry: u32, previous: Option<Duration>, rng: &mut dyn RngCore) -> Duration {
        match self.jitter {
            Jitter::None => self.ceiling(retry),
            Jitter::Full => uniform(rng, Duration::ZERO, self.ceiling(retry)),
            Jitter::Decorrelated => {
                let prev = previous.unwrap_or(self.base);
                let hi = prev.saturating_mul(3).max(self.base);
                uniform(rng, self.base, hi).min(self.cap)
            }
        }
    }
}

/// `min(cap, base × 2^doublings)`, exact to the nanosecond and saturating: never panics or
/// overflows, whatever `doublings` is (a zero `base` stays zero).
///
/// The one growing wait of the crate: our [`Backoff`], the pacer's pause after throttles
/// that named no delay, the host pause of a transport outage and of a refused credential,
/// and the wait after repeated GitHub secondary limits all double this way.
///
/// # Examples
/// ```
/// use abide_core::backoff::capped_doubling;
/// use std::time::Duration;
///
/// let s = Duration::from_secs;
/// assert_eq!(capped_doubling(s(1), s(30), 0), s(1));
/// assert_eq!(capped_doubling(s(1), s(30), 4), s(16));
/// assert_eq!(capped_doubling(s(1), s(30), 5), s(30));
/// assert_eq!(capped_doubling(s(1), s(30), u32::MAX), s(30));
/// ```
pub fn capped_doubling(base: Duration, cap: Duration, doublings: u32) -> Duration {
    let nanos = base.as_nanos();
    if nanos == 0 {
        return Duration::ZERO;
    }
    let scaled = if doublings >= nanos.leading_zeros() {
        u128::MAX
    } else {
        nanos << doublings
    };
    if scaled >= cap.as_nanos() {
        return cap;
    }
    // Below `cap`, so the whole seconds fit in a u64.
    let secs = u64::try_from(scaled / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (scaled % 1_000_000_000) as u32)
}

/// Uniform in `[lo, hi]` at nanosecond resolution (`hi` ≥ `lo`; spans beyond u64 nanoseconds,
/// about 584 years, are truncated).
fn uniform(rng: &mut dyn RngCore, lo: Duration, hi: Duration) -> Duration {
    let span = hi.saturating_sub(lo).as_nanos();
    let span = u64::try_from(span).unwrap_or(u64::MAX);
    lo.saturating_add(Duration::from_nanos(rng.random_range(0..=span)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn no_jitter_doubles_from_base_and_stops_at_cap() {
        let b = Backoff::new(ms(100), ms(1000)).with_jitter(Jitter::None);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let got: Vec<_> = (1..=6).map(|r| b.delay(r, None, &mut rng)).collect();
        assert_eq!(
            got,
            [ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        assert_eq!(b.delay(0, None, &mut rng), ms(100));
    }

    #[test]
    fn huge_retry_numbers_saturate_at_cap() {
        let b = Backoff::new(Duration::from_secs(u64::MAX / 2), Duration::MAX);
        assert_eq!(b.ceiling(u32::MAX), Duration::MAX);
        let b = Backoff::new(ms(500), Duration::from_secs(300));
        for r in [31, 32, 33, 64, 1000, u32::MAX] {
            assert_eq!(b.ceiling(r), Duration::from_secs(300), "retry {r}");
        }
        assert_eq!(
            Backoff::new(Duration::ZERO, ms(5)).ceiling(u32::MAX),
            Duration::ZERO
        );
    }

    #[test]
    fn same_seed_same_schedule_and_full_jitter_spreads() {
        let b = Backoff::default();
        let run = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (1..=10)
                .map(|r| b.delay(r, None, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        // Full jitter really uses the low half of the interval too.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let low = (0..1000)
            .filter(|_| b.delay(20, None, &mut rng) < Duration::from_secs(150))
            .count();
        assert!(
            (400..600).contains(&low),
            "{low} of 1000 below half the cap"
        );
    }

    #[test]
    fn decorrelated_stays_between_base_and_three_times_previous() {
        let b = Backoff::new(ms(100), Duration::from_secs(10)).with_jitter(Jitter::Decorrelated);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut prev = None;
        for r in 1..200 {
            let d = b.delay(r, prev, &mut rng);
            let hi = prev.unwrap_or(ms(100)) * 3;
            assert!(
                d >= ms(100) && d <= hi.min(Duration::from_secs(10)),
                "{d:?}"
            );
            prev = Some(d);
        }
    }

    #[test]
    fn capped_doubling_is_exact_and_saturates() {
        assert_eq!(capped_doubling(ms(100), ms(1000), 0), ms(100));
        assert_eq!(capped_doubling(ms(100), ms(1000), 3), ms(800));
        assert_eq!(capped_doubling(ms(100), ms(1000), 4), ms(1000));
        assert_eq!(
            capped_doubling(Duration::from_nanos(300), Duration::MAX, 2),
            Duration::from_nanos(1200)
        );
        assert_eq!(capped_doubling(Duration::MAX, ms(5), 1), ms(5));
        assert_eq!(
            capped_doubling(Duration::from_nanos(1), Duration::MAX, 127),
            Duration::MAX
        );
        assert_eq!(
            capped_doubling(Duration::ZERO, ms(5), u32::MAX),
            Duration::ZERO
        );
        // A cap below the base wins at once.
        assert_eq!(capped_doubling(ms(10), ms(5), 0), ms(5));
    }

    proptest! {
        #[test]
        fn capped_doubling_matches_checked_arithmetic(
            base_ns in 0u64..10_000_000_000_000,
            cap_ns in 0u64..u64::MAX,
            doublings in 0u32..40,
        ) {
            let want = Duration::from_nanos(base_ns)
                .checked_mul(1 << doublings.min(31))
                .filter(|_| doublings < 32)
                .map_or(Duration::from_nanos(cap_ns), |d| d.min(Duration::from_nanos(cap_ns)));
            let got = capped_doubling(Duration::from_nanos(base_ns), Duration::from_nanos(cap_ns), doublings);
            if doublings < 32 {
                prop_assert_eq!(got, want);
            }
            prop_assert!(got <= Duration::from_nanos(cap_ns));
        }

        #[test]
        fn delay_never_exceeds_cap(
            base_ms in 0u64..10_000_000,
            cap_ms in 0u64..10_000_000,
            retry in any::<u32>(),
            prev_ms in proptest::option::of(0u64..u64::MAX / 4),
            mode in 0u8..3,
            seed in any::<u64>(),
        ) {
            let jitter = [Jitter::None, Jitter::Full, Jitter::Decorrelated][usize::from(mode)];
            let b = Backoff::new(ms(base_ms), ms(cap_ms)).with_jitter(jitter);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let d = b.delay(retry, prev_ms.map(ms), &mut rng);
            prop_assert!(d <= ms(cap_ms));
        }
    }
}
