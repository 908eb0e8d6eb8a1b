//! Injected time.
//!
//! Every policy in abide reads time through a [`Clock`] so that tests can run hours of
//! schedule in microseconds with a [`ManualClock`]. Wall time ([`SystemTime`], UTC) is used
//! only to interpret HTTP-dates and to stamp records; interval arithmetic (pacing, budgets,
//! leases measured in-process) uses the monotonic reading, which never jumps backwards.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// A source of wall and monotonic time.
///
/// Implementations must be cheap to call and safe to share between threads.
pub trait Clock: Debug + Send + Sync {
    /// Current wall-clock time (UTC). Used for HTTP-dates and persisted timestamps.
    fn now(&self) -> SystemTime;
    /// Current monotonic time. Used for all interval arithmetic.
    fn monotonic(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> SystemTime {
        (**self).now()
    }
    fn monotonic(&self) -> Instant {
        (**self).monotonic()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> SystemTime {
        (**self).now()
    }
    fn monotonic(&self) -> Instant {
        (**self).monotonic()
    }
}

/// The real clock of the machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the one place the real clock is read
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
    #[allow(clippy::disallowed_methods)]
    fn monotonic(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// Wall and monotonic readings advance together by [`ManualClock::advance`]; the wall
/// reading can also be set on its own with [`ManualClock::set_now`] to model a clock step
/// (the monotonic reading is unaffected, as on a real machine).
///
/// # Examples
/// ```
/// use abide_core::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000));
/// let t0 = clock.monotonic();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.monotonic() - t0, Duration::from_millis(1500));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    base: Instant,
    state: Arc<Mutex<ManualState>>,
}

#[derive(Debug)]
struct ManualState {
    wall: SystemTime,
    elapsed: Duration,
}

impl ManualClock {
    /// A manual clock whose wall time starts at `wall`.
    #[allow(clippy::disallowed_methods)] // an arbitrary anchor; only differences are observable
    pub fn new(wall: SystemTime) -> Self {
        Self {
            base: Instant::now(),
            state: Arc::new(Mutex::new(ManualState {
                wall,
                elapsed: Duration::ZERO,
            })),
        }
    }

    /// Move both readings forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.wall += by;
        s.elapsed += by;
    }

    /// Set the wall reading only (a clock step); monotonic time does not move.
    pub fn set_now(&self, wall: SystemTime) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wall = wall;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wall
    }
    fn monotonic(&self) -> Instant {
        self.base
            + self
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .elapsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn clones_share_time_and_advance_moves_both_readings() {
        let a = ManualClock::new(UNIX_EPOCH);
        let b = a.clone();
        let m0 = b.monotonic();
        a.advance(Duration::from_secs(3));
        assert_eq!(b.now(), UNIX_EPOCH + Duration::from_secs(3));
        assert_eq!(b.monotonic() - m0, Duration::from_secs(3));
    }

    #[test]
    fn set_now_steps_wall_time_only() {
        let c = ManualClock::new(UNIX_EPOCH + Duration::from_secs(100));
        let m0 = c.monotonic();
        c.set_now(UNIX_EPOCH);
        assert_eq!(c.now(), UNIX_EPOCH);
        assert_eq!(c.monotonic(), m0);
    }
}
