//! Gate definitions: what a gate limits and what it is keyed on.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use crate::Error;

/// Which attribute of a request a gate is keyed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The caller's API key: each key has its own window or slots.
    Key,
    /// The account the key belongs to: all keys of one account share the window or slots.
    /// Requests without an account pass this gate.
    Account,
}

/// Longest rate window a [`RateQuota`] accepts (365 days): instants computed from it must
/// stay representable.
pub const MAX_WINDOW: Duration = Duration::from_secs(365 * 86_400);

/// Longest concurrency lease a [`Gate`] accepts (one day): a slot held longer is a leak.
pub const MAX_LEASE: Duration = Duration::from_secs(86_400);

/// Longest a delaying gate may hold a request ([`Gate::with_delay`]): one minute. A server
/// holding requests longer keeps connections open for nothing a 429 could not say better.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// How far past its rate a delaying gate lets requests wait ([`Gate::with_delay`]), the
/// `burst` and `delay` of nginx's `limit_req` in one bound: at most `burst` requests over
/// the rate wait at once, none longer than `max_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayBound {
    /// Requests over the rate that may wait at once (the `burst + 1`-th is refused).
    pub burst: NonZeroU32,
    /// The longest one request may be held.
    pub max_delay: Duration,
}

impl DelayBound {
    /// The longest wait this bound allows at a gate whose interval is `interval_ns`, in
    /// nanoseconds: the `k`-th request over the rate waits about `k` intervals.
    pub(crate) fn max_wait_ns(&self, interval_ns: u64) -> u64 {
        let by_burst = interval_ns.saturating_mul(u64::from(self.burst.get()));
        let by_time = u64::try_from(self.max_delay.as_nanos()).unwrap_or(u64::MAX);
        by_burst.min(by_time)
    }
}

/// How a rate gate counts.
///
/// All three answer with the same `429`, `Retry-After` (whole seconds, rounded up, at least 1)
/// and `RateLimit` / `RateLimit-Policy` fields; they differ in how much a caller may send in
/// a burst and when the quota comes back. Deserialises from its [`Algorithm::as_str`] name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum Algorithm {
    /// GCRA (the generic cell rate algorithm, a token bucket without a refill timer):
    /// `limit` per `window` on average, `burst` back to back from idle, one request's worth
    /// back every `window / limit`.
    #[default]
    Gcra,
    /// Fixed window: `limit` per window, the count reset when the window ends (the counter
    /// most web frameworks ship). A whole quota fits at the end of one window and another at
    /// the start of the next.
    FixedWindow,
    /// Sliding window counter: the current window's count plus the previous window's,
    /// weighted by how much of it the sliding window still covers, stays within `limit`.
    SlidingWindow,
}

impl Algorithm {
    /// Every algorithm, in the order of [`Algorithm::as_str`] names.
    pub const ALL: [Algorithm; 3] = [Self::Gcra, Self::FixedWindow, Self::SlidingWindow];

    /// The stable name: `gcra`, `fixed-window` or `sliding-window`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gcra => "gcra",
            Self::FixedWindow => "fixed-window",
            Self::SlidingWindow => "sliding-window",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Algorithm {
    type Err = Error;

    /// Parses [`Algorithm::as_str`] names.
    ///
    /// # Errors
    /// [`Error::UnknownAlgorithm`] naming the input.
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| Error::UnknownAlgorithm(s.to_owned()))
    }
}

impl TryFrom<String> for Algorithm {
    type Error = Error;

    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

/// A sustained rate with a burst, enforced by an [`Algorithm`] (GCRA unless chosen).
///
/// `limit` requests per `window`; under GCRA up to `burst` back to back from idle (window
/// algorithms allow the whole `limit` in a burst and ignore `burst`).
///
/// # Default
/// `burst` equals `limit` unless set with [`RateQuota::with_burst`]; the algorithm is
/// [`Algorithm::Gcra`] unless set with [`RateQuota::with_algorithm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateQuota {
    limit: NonZeroU32,
    window: Duration,
    burst: NonZeroU32,
    algorithm: Algorithm,
    /// `window` in nanoseconds, and the GCRA interval and tolerance derived from it:
    /// computed once here, not in every decision (each was a 128-bit multiply or a 64-bit
    /// division, tens of cycles apiece, two gates per decision).
    window_ns: u64,
    interval_ns: u64,
    tolerance_ns: u64,
}

impl RateQuota {
    /// `limit` requests per `window`.
    ///
    /// # Errors
    /// [`Error::InvalidQuota`] when `window` is zero or longer than [`MAX_WINDOW`].
    pub fn new(limit: NonZeroU32, window: Duration) -> Result<Self, Error> {
        if window.is_zero() {
            return Err(Error::InvalidQuota("window must be longer than zero"));
        }
        if window > MAX_WINDOW {
            return Err(Error::InvalidQuota("window must be at most 365 days"));
        }
        Ok(Self::derive(limit, window, limit, Algorithm::Gcra))
    }

    /// The quota with its nanosecond figures computed.
    fn derive(
        limit: NonZeroU32,
        window: Duration,
        burst: NonZeroU32,
        algorithm: Algorithm,
    ) -> Self {
        let window_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX / 4);
        let interval_ns = window_ns / u64::from(limit.get());
        Self {
            limit,
            window,
            burst,
            algorithm,
            window_ns,
            interval_ns,
            tolerance_ns: interval_ns * u64::from(burst.get() - 1),
        }
    }

    /// `n` requests per second (n per second, not one per n seconds).
    pub fn per_second(n: NonZeroU32) -> Self {
        Self::derive(n, Duration::from_secs(1), n, Algorithm::Gcra)
    }

    /// Allow up to `burst` requests back to back from idle.
    pub fn with_burst(self, burst: NonZeroU32) -> Self {
        Self::derive(self.limit, self.window, burst, self.algorithm)
    }

    /// Count with `algorithm` instead of GCRA.
    pub fn with_algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The counting algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Requests per window.
    pub fn limit(&self) -> u32 {
        self.limit.get()
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Requests allowed back to back from idle.
    pub fn burst(&self) -> u32 {
        self.burst.get()
    }

    /// The window in nanoseconds (at most 365 days, so it fits a `u64` with room to add).
    pub(crate) fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// Time between two requests at the sustained rate (GCRA's emission interval), in
    /// nanoseconds.
    pub(crate) fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// How far ahead of the schedule a caller may run (GCRA's tolerance), in nanoseconds.
    pub(crate) fn tolerance_ns(&self) -> u64 {
        self.tolerance_ns
    }
}

/// What a gate limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Rate(RateQuota),
    Concurrency {
        limit: NonZeroU32,
        lease: Duration,
        retry_hint: Duration,
    },
}

/// One gate: a name (the policy name in `RateLimit` headers), a reason category (the only
/// thing a rejected client learns), a scope and a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub(crate) name: String,
    pub(crate) category: String,
    pub(crate) scope: Scope,
    pub(crate) kind: Kind,
    /// For a GCRA rate gate: requests over the rate wait within this bound instead of
    /// being refused.
    pub(crate) delay: Option<DelayBound>,
}

impl Gate {
    /// A rate gate.
    ///
    /// `name` and `category` must be lowercase ASCII letters, digits, `_` or `-` (checked by
    /// [`crate::GateSetBuilder::build`]) because they go into headers and logs verbatim.
    pub fn rate(name: &str, category: &str, scope: Scope, quota: RateQuota) -> Self {
        Self {
            name: name.to_owned(),
            category: category.to_owned(),
            scope,
            kind: Kind::Rate(quota),
            delay: None,
        }
    }

    /// A concurrency gate: at most `limit` requests in flight per scope. A reservation
    /// expires after `lease` even if never released (a crashed handler cannot leak a slot).
    /// `lease` must lie within (0, [`MAX_LEASE`]], checked by
    /// [`crate::GateSetBuilder::build`].
    ///
    /// # Default
    /// A rejected caller is told to retry after 1 s (or sooner if a lease expires sooner);
    /// change it with [`Gate::with_retry_hint`].
    pub fn concurrency(
        name: &str,
        category: &str,
        scope: Scope,
        limit: NonZeroU32,
        lease: Duration,
    ) -> Self {
        Self {
            name: name.to_owned(),
            category: category.to_owned(),
            scope,
            kind: Kind::Concurrency {
                limit,
                lease,
                retry_hint: Duration::from_secs(1),
            },
            delay: None,
        }
    }

    /// For a concurrency gate: the wait suggested to a rejected caller when no lease expires
    /// sooner. No effect on a rate gate.
    pub fn with_retry_hint(mut self, hint: Duration) -> Self {
        if let Kind::Concurrency { retry_hint, .. } = &mut self.kind {
            *retry_hint = hint;
        }
        self
    }

    /// For a rate gate counted by GCRA: let a request over the rate wait for its slot
    /// (the moment the gate would admit it) instead of refusing it, while at most `burst`
    /// requests wait and none longer than `max_delay` (nginx's `limit_req burst=N delay=M`
    /// shape: the quota's own burst passes at once, these `N` more are held, the rest are
    /// refused with an honest `Retry-After`). Only [`crate::GateSet::check_delayed`] and a
    /// [`crate::GateLayer`] hold requests; [`crate::GateSet::check`] still refuses them.
    ///
    /// `max_delay` must lie within (0, [`MAX_DELAY`]] and the gate must be a GCRA rate gate,
    /// checked by [`crate::GateSetBuilder::build`].
    pub fn with_delay(mut self, burst: NonZeroU32, max_delay: Duration) -> Self {
        self.delay = Some(DelayBound { burst, max_delay });
        self
    }

    /// The delay bound, if requests over the rate may wait ([`Gate::with_delay`]).
    pub fn delay(&self) -> Option<DelayBound> {
        self.delay
    }

    /// Gate name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reason category.
    pub fn category(&self) -> &str {
        &self.category
    }

    /// Scope.
    pub fn scope(&self) -> Scope {
        self.scope
    }
}

impl Gate {
    /// Quota units (`q`) and, for a rate gate, the window (`w`).
    pub(crate) fn limit_and_window(&self) -> (u32, Option<Duration>) {
        match &self.kind {
            Kind::Rate(q) => (q.limit(), Some(q.window())),
            Kind::Concurrency { limit, .. } => (limit.get(), None),
        }
    }
}

pub(crate) fn valid_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}
