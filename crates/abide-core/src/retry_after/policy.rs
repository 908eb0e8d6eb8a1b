//! Turning a `Retry-After` (or another server delay) into a wait within [floor, cap]:
//! [`RetryAfterPolicy`], and what it decided ([`RetryDelay`], [`DelayReason`]).

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

use super::{escape_raw, is_lenient, Elements, MAX_RAW_LEN};

crate::named_enum! {
    /// Why a delay was chosen. `as_str` is the stable name stored with an attempt and
    /// shown by `abide inspect` (serialised the same, snake_case); `FromStr` reads it back.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    #[non_exhaustive]
    pub enum DelayReason("delay reason") {
        /// The server's value lay within [floor, cap] and was used as is.
        Honoured = "honoured",
        /// The server asked for less than the floor (e.g. `0`, a past date); the floor was used.
        Floored = "floored",
        /// The server asked for more than the cap (e.g. `86400`); the cap was used.
        Capped = "capped",
        /// The value could not be parsed; a long jittered wait was used and the raw value kept.
        Unparseable = "unparseable",
        /// No `Retry-After` was sent; the delay came from our own backoff.
        Absent = "absent",
        /// No answer was seen: the item's lease ran out (its worker crashed or hung) and it
        /// was taken back with no wait. Never chosen by a [`RetryAfterPolicy`]; a queue
        /// records it for the attempts its reclaim accounts for.
        LeaseExpired = "lease_expired",
    }
}

/// A delay decision: how long to wait, why, and what the server actually said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryDelay {
    /// The delay to wait, always within the policy's [floor, cap].
    pub delay: Duration,
    /// Why this delay was chosen.
    pub reason: DelayReason,
    /// The raw header value(s) as received (lossy UTF-8, joined with ", "), for the log;
    /// escaped and cut after about [`MAX_RAW_LEN`] bytes (per line and in total), with `…`.
    pub raw: Option<String>,
    /// What the header parsed to before any floor or cap; `None` when absent or unparseable.
    pub retry_after: Option<Duration>,
}

/// Hard minimum of every delay a [`RetryAfterPolicy`] returns, whatever its configured
/// `floor`: 100 ms.
///
/// The fields are public, so a floor of zero is representable; without this minimum it would
/// turn `Retry-After: 0` (or a date in the past) back into "retry at once, with every worker",
/// the very failure the clamp exists to prevent (an edge answering `403` with
/// `Retry-After: 0` had every client that obeyed it retry at once until the account was
/// suspended). 100 ms is far below any delay a
/// server means and far above a busy loop.
pub const MIN_FLOOR: Duration = Duration::from_millis(100);

/// A delay capped by a [`RetryAfterPolicy`] is shortened by up to `cap / CAP_SPREAD`,
/// drawn uniformly (see [`RetryAfterPolicy::decide`]).
pub const CAP_SPREAD: u32 = 10;

/// Turns `Retry-After` into a delay within [floor, cap].
///
/// The effective floor is `max(floor, MIN_FLOOR)` (see [`MIN_FLOOR`]). If that floor is above
/// `cap` (a misconfiguration the public fields cannot prevent), the cap is raised to it, so
/// the result is still never below the floor.
///
/// # Default
/// - floor: 1 s (never below [`MIN_FLOOR`], 100 ms, whatever is configured)
/// - cap: 10 min (a value above it waits the cap less up to `cap /` [`CAP_SPREAD`], drawn
///   uniformly, so nodes refused together do not resume together)
/// - unparseable wait: 5 min, with up to 1 min (20 %) added jitter (never below the floor)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryAfterPolicy {
    /// Shortest delay ever returned.
    pub floor: Duration,
    /// Longest delay ever returned.
    pub cap: Duration,
    /// Base wait when a value cannot be parsed.
    pub unparseable_wait: Duration,
    /// Extra random wait added to `unparseable_wait`, uniformly in [0, this].
    pub unparseable_jitter: Duration,
}

impl Default for RetryAfterPolicy {
    fn default() -> Self {
        Self {
            floor: Duration::from_secs(1),
            cap: Duration::from_secs(600),
            unparseable_wait: Duration::from_secs(300),
            unparseable_jitter: Duration::from_secs(60),
        }
    }
}

impl RetryAfterPolicy {
    /// Decide the delay from every `Retry-After` field line in `values` (a repeated header is
    /// a real case). Returns `None` when there are no values (reason `Absent` is then the
    /// caller's, via [`RetryAfterPolicy::from_backoff`]).
    ///
    /// Every element of every line is read (see the module docs for lenient cases); the
    /// largest delay wins. A value read only leniently ([`is_lenient`]: fractional
    /// seconds) is logged at `WARN` with its raw text. When nothing can be read the delay is `unparseable_wait` plus a
    /// uniform jitter in `[0, unparseable_jitter]` drawn from `rng`. The result always lies
    /// within `[floor, cap]`.
    pub fn decide<'a, I>(
        &self,
        values: I,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Option<RetryDelay>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut any_line = false;
        let mut raw = String::new();
        let mut largest: Option<Duration> = None;
        let mut lenient = false;
        for line in values {
            // Each line is cut by `escape_raw`; the joined value is cut too, or a response
            // repeating the header thousands of times would flood the log line.
            if raw.len() < MAX_RAW_LEN {
                if any_line {
                    raw.push_str(", ");
                }
                raw.push_str(&escape_raw(line));
            } else if !raw.ends_with('…') {
                raw.push('…');
            }
            any_line = true;
            lenient |= is_lenient(line);
            for element in Elements::new(line, now).flatten() {
                let d = element.delay_from(now);
                largest = Some(largest.map_or(d, |l| if d > l { d } else { l }));
            }
        }
        if !any_line {
            return None;
        }
        if lenient {
            tracing::warn!(
                raw = %raw,
                read_as_secs = largest.map(|d| d.as_secs()),
                "non-conforming Retry-After read leniently: delay-seconds is 1*DIGIT \
                 (RFC 9110 §10.2.3); a fraction is rounded up"
            );
        }
        let (floor, cap) = self.bounds();
        let (delay, reason) = match largest {
            Some(d) if d < floor => (floor, DelayReason::Floored),
            Some(d) if d > cap => (self.capped_delay(rng), DelayReason::Capped),
            Some(d) => (d, DelayReason::Honoured),
            None => (self.unparseable_delay(rng), DelayReason::Unparseable),
        };
        Some(RetryDelay {
            delay,
            reason,
            raw: Some(raw),
            retry_after: largest,
        })
    }

    /// [`RetryAfterPolicy::decide`] over the `Retry-After` lines of a header map.
    pub fn from_headers(
        &self,
        headers: &HeaderMap,
        now: SystemTime,
        rng: &mut dyn RngCore,
    ) -> Option<RetryDelay> {
        self.decide(
            headers
                .get_all(http::header::RETRY_AFTER)
                .iter()
                .map(|v| v.as_bytes()),
            now,
            rng,
        )
    }

    /// A delay the server gave outside `Retry-After` (`retry-after-ms`, a vendor's documented
    /// minimum), clamped to [floor, cap] exactly like a `Retry-After` of that length (a
    /// capped one jittered from `rng`, as there); `raw` is what was received, for the log.
    pub fn from_server_delay(
        &self,
        delay: Duration,
        raw: Option<String>,
        rng: &mut dyn RngCore,
    ) -> RetryDelay {
        let (floor, cap) = self.bounds();
        let (clamped, reason) = if delay < floor {
            (floor, DelayReason::Floored)
        } else if delay > cap {
            (self.capped_delay(rng), DelayReason::Capped)
        } else {
            (delay, DelayReason::Honoured)
        };
        RetryDelay {
            delay: clamped,
            reason,
            raw,
            retry_after: Some(delay),
        }
    }

    /// A delay the server gave that could not be read (a body field that is no number, a
    /// negative value): `unparseable_wait` plus jitter from `rng`, within [floor, cap], with
    /// reason [`DelayReason::Unparseable`]; `raw` is what was received, for the log.
    pub fn unparseable(&self, raw: String, rng: &mut dyn RngCore) -> RetryDelay {
        RetryDelay {
            delay: self.unparseable_delay(rng),
            reason: DelayReason::Unparseable,
            raw: Some(raw),
            retry_after: None,
        }
    }

    fn unparseable_delay(&self, rng: &mut dyn RngCore) -> Duration {
        let (floor, cap) = self.bounds();
        let jitter = self.unparseable_jitter.as_nanos();
        let extra = if jitter == 0 {
            0
        } else {
            rng.random_range(0..=u64::try_from(jitter).unwrap_or(u64::MAX))
        };
        self.unparseable_wait
            .saturating_add(Duration::from_nanos(extra))
            .clamp(floor, cap)
    }

    /// The delay for a server value above the cap: the cap less a uniform jitter of up to
    /// `cap /` [`CAP_SPREAD`], never below the floor.
    ///
    /// Every client that reads `86400` waits exactly the cap otherwise, so nodes that share
    /// no coordination and were refused together resume in the same millisecond. The spread
    /// is taken *below* the cap, not around it: the cap is the promise that no remote value
    /// holds an item longer, and the server asked for more than the cap anyway, so ending a
    /// little early costs it nothing it was promised. Full jitter (`U(0, cap)`) would turn a
    /// request for a day into a retry in seconds; a tenth of the cap (up to 60 s at the
    /// default 10 min) is wide enough to spread a herd and keeps the wait near what was meant.
    fn capped_delay(&self, rng: &mut dyn RngCore) -> Duration {
        let (floor, cap) = self.bounds();
        let spread = u64::try_from(cap.as_nanos() / u128::from(CAP_SPREAD)).unwrap_or(u64::MAX);
        let less = if spread == 0 {
            0
        } else {
            rng.random_range(0..=spread)
        };
        cap.saturating_sub(Duration::from_nanos(less)).max(floor)
    }

    /// A delay computed by our own backoff when no `Retry-After` was sent, clamped to
    /// [floor, cap], with reason [`DelayReason::Absent`].
    pub fn from_backoff(&self, delay: Duration) -> RetryDelay {
        let (floor, cap) = self.bounds();
        RetryDelay {
            delay: delay.clamp(floor, cap),
            reason: DelayReason::Absent,
            raw: None,
            retry_after: None,
        }
    }

    /// `(floor, cap)`: the floor raised to [`MIN_FLOOR`], the cap raised to the floor if
    /// misconfigured (so `clamp` cannot panic).
    fn bounds(&self) -> (Duration, Duration) {
        let floor = if self.floor < MIN_FLOOR {
            MIN_FLOOR
        } else {
            self.floor
        };
        if self.cap < floor {
            (floor, floor)
        } else {
            (floor, self.cap)
        }
    }
}
