//! [`Policy`]: the rules and the shared per-host state; [`PolicyBuilder`] in the
//! providers-file vocabulary.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use abide_core::{
    Backoff, BodyRule, BudgetSnapshot, ClassifyOverrides, Clock, CoordinationStatus, HeaderRule,
    Jitter, PacerSnapshot, Session, SessionConfig, SystemClock, VerdictClass,
};
use http::{HeaderMap, HeaderName, Method};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{BoxError, ConfigError};
use crate::registry::{Host, Registry};
use crate::sleep::{Sleeper, TokioSleeper};

/// What a policy may look at to pick a request's host key.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// The method.
    pub method: &'a Method,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The host name or address.
    pub host: &'a str,
    /// The port, when the URL names one.
    pub port: Option<u16>,
    /// The request headers (never use a secret as a key: keys appear in logs and errors).
    pub headers: &'a HeaderMap,
}

impl RequestInfo<'_> {
    /// The default host key: `scheme://host[:port]`.
    pub fn default_key(&self) -> String {
        match self.port {
            Some(p) => format!("{}://{}:{p}", self.scheme, self.host),
            None => format!("{}://{}", self.scheme, self.host),
        }
    }
}

/// A boxed future of the refresh hook.
pub type RefreshFuture = Pin<Box<dyn Future<Output = Result<HeaderMap, BoxError>> + Send>>;
type RefreshFn = Arc<dyn Fn() -> RefreshFuture + Send + Sync>;
type KeyFn = Arc<dyn Fn(&RequestInfo<'_>) -> String + Send + Sync>;

/// The default name of the idempotency key header
/// (draft-ietf-httpapi-idempotency-key-header).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The rules, the clock and one shared [`Session`] per host.
///
/// # Clone
/// Cheap (an `Arc`). Every clone, and every layer, middleware and task built from it, shares
/// the same per-host pacer, retry budget and pauses: a throttle seen by one task slows every
/// task sending to that host.
#[derive(Clone)]
pub struct Policy {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) session: SessionConfig,
    pub(crate) max_wait: Duration,
    pub(crate) idempotency: Option<HeaderName>,
    pub(crate) terminal_as_error: bool,
    key: Option<KeyFn>,
    pub(crate) refresh: Option<RefreshFn>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) sleeper: Arc<dyn Sleeper>,
    rng: Mutex<ChaCha8Rng>,
    registry: Registry,
    /// Where the hosts' limits are shared with other processes, if anywhere.
    #[cfg(feature = "redis")]
    shared: Option<crate::coordination::Shared>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Policy")
            .field("session", &i.session)
            .field("max_wait", &i.max_wait)
            .field("idempotency", &i.idempotency)
            .field("terminal_as_error", &i.terminal_as_error)
            .field("custom_key", &i.key.is_some())
            .field("refresh_hook", &i.refresh.is_some())
            .field("clock", &i.clock)
            .finish_non_exhaustive()
    }
}

impl Default for Policy {
    /// [`PolicyBuilder::default`], built.
    fn default() -> Self {
        Self::from_valid(PolicyBuilder::default())
    }
}

impl Policy {
    /// A builder with the defaults of [`PolicyBuilder`].
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// The session rules (retry, pacer, budget, `Retry-After` clamp, classification).
    pub fn session_config(&self) -> &SessionConfig {
        &self.inner.session
    }

    /// Longest single wait a request takes before abide gives up on it.
    pub fn max_wait(&self) -> Duration {
        self.inner.max_wait
    }

    /// The host key of a request.
    pub fn key_for(&self, info: &RequestInfo<'_>) -> String {
        match &self.inner.key {
            Some(f) => f(info),
            None => info.default_key(),
        }
    }

    /// The pacer of host `key` now, if a request to it was made.
    pub fn pacer_snapshot(&self, key: &str) -> Option<PacerSnapshot> {
        let now = self.inner.clock.monotonic();
        self.inner
            .registry
            .get(key)
            .map(|h| h.session.pacer().snapshot(now))
    }

    /// The retry budget of host `key` now, if a request to it was made.
    pub fn budget_snapshot(&self, key: &str) -> Option<BudgetSnapshot> {
        let now = self.inner.clock.monotonic();
        self.inner
            .registry
            .get(key)
            .map(|h| h.session.budget().snapshot(now))
    }

    /// The coordination status of host `key` now (how its limit is shared: `local` alone,
    /// or through Redis), if a request to it was made.
    pub fn coordination_status(&self, key: &str) -> Option<CoordinationStatus> {
        let now = self.inner.clock.monotonic();
        self.inner.registry.get(key).map(|h| {
            let s = &h.session;
            s.coordination().status(s.pacer(), now)
        })
    }

    pub(crate) fn host(&self, key: &str) -> Arc<Host> {
        let i = &self.inner;
        let now = i.clock.monotonic();
        i.registry.host(key, || {
            #[cfg(feature = "redis")]
            if let Some(shared) = &i.shared {
                let c = shared.start(key, &i.session, Arc::clone(&i.clock));
                return Session::with_coordination(i.session.clone(), now, c);
            }
            Session::new(i.session.clone(), now)
        })
    }

    /// A per-request RNG drawn from the policy's seeded one (reproducible with `with_seed`).
    pub(crate) fn rng(&self) -> ChaCha8Rng {
        let seed = self
            .inner
            .rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_u64();
        ChaCha8Rng::seed_from_u64(seed)
    }

    fn from_valid(b: PolicyBuilder) -> Self {
        let clock = b.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let sleeper = b
            .sleeper
            .unwrap_or_else(|| Arc::new(TokioSleeper::new(Arc::clone(&clock))));
        let rng = match b.seed {
            Some(s) => ChaCha8Rng::seed_from_u64(s),
            None => ChaCha8Rng::from_os_rng(),
        };
        Self {
            inner: Arc::new(Inner {
                session: b.session,
                max_wait: b.max_wait,
                idempotency: b.idempotency,
                terminal_as_error: b.terminal_as_error,
                key: b.key,
                refresh: b.refresh,
                clock,
                sleeper,
                rng: Mutex::new(rng),
                registry: Registry::default(),
                #[cfg(feature = "redis")]
                shared: b.shared.ok().flatten(),
            }),
        }
    }
}

/// Builds a [`Policy`], with the providers-file vocabulary.
///
/// # Default
/// Safe for an API you know nothing about: polite first, and a caller never waits long.
/// - `max_attempts`: 4 requests per logical request (3 retries); 2 for unrecognised answers
/// - `max_age`: 60 s from the first try
/// - `max_wait`: 30 s, the longest single wait (a longer `Retry-After` or host pause stops
///   the request with [`StopReason::WaitTooLong`](crate::StopReason::WaitTooLong) instead)
/// - backoff when the server names no delay: full jitter, 500 ms base, 10 s cap, floored
///   at the `Retry-After` floor (1 s)
/// - `Retry-After`: floor 1 s, cap 10 min, unparseable → 5 min plus up to 1 min jitter
/// - pacer: starts at 10/s and searches upward (slow start) until the host throttles or
///   advertises a limit; `headroom` 0.97 of an advertised limit; at most 1000/s
/// - `use_rate_limit_headers`: true; no `classify` overrides
/// - idempotency key: `Idempotency-Key`, generated for non-idempotent methods (RFC 9110
///   §9.2.2) when the request has none
/// - terminal answers (`400`, `404`, ...) are returned as responses, not errors
/// - host key: `scheme://host[:port]`; clock: the system clock, tokio timers
#[must_use]
pub struct PolicyBuilder {
    session: SessionConfig,
    max_wait: Duration,
    idempotency: Option<HeaderName>,
    terminal_as_error: bool,
    key: Option<KeyFn>,
    refresh: Option<RefreshFn>,
    clock: Option<Arc<dyn Clock>>,
    sleeper: Option<Arc<dyn Sleeper>>,
    seed: Option<u64>,
    #[cfg(feature = "redis")]
    shared: Result<Option<crate::coordination::Shared>, ConfigError>,
}

impl fmt::Debug for PolicyBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyBuilder")
            .field("session", &self.session)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl Default for PolicyBuilder {
    fn default() -> Self {
        let mut session = SessionConfig::default();
        session.retry.max_attempts = 4;
        session.retry.unknown_max_attempts = 2;
        session.retry.max_age = Duration::from_secs(60);
        session.retry.backoff = Backoff {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(10),
            jitter: Jitter::Full,
        };
        Self {
            session,
            max_wait: Duration::from_secs(30),
            idempotency: Some(IDEMPOTENCY_KEY),
            terminal_as_error: false,
            key: None,
            refresh: None,
            clock: None,
            sleeper: None,
            seed: None,
            #[cfg(feature = "redis")]
            shared: Ok(None),
        }
    }
}

impl PolicyBuilder {
    /// Requests per logical request, first try included (`max_attempts`, at least 1).
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.session.retry.max_attempts = n;
        self.session.retry.unknown_max_attempts = self.session.retry.unknown_max_attempts.min(n);
        self
    }

    /// Give up once a logical request is this old (`max_age`).
    pub fn with_max_age(mut self, d: Duration) -> Self {
        self.session.retry.max_age = d;
        self
    }

    /// Longest single wait (a retry delay, a host pause, a send slot) a caller takes.
    pub fn with_max_wait(mut self, d: Duration) -> Self {
        self.max_wait = d;
        self
    }

    /// Fraction of an advertised rate limit to aim at, in (0, 1] (`headroom`).
    pub fn with_headroom(mut self, f: f64) -> Self {
        self.session.pacer.headroom = f;
        self
    }

    /// Classify HTTP `status` as `class` for this policy's hosts (`[classify.http]`).
    pub fn with_classify(mut self, status: u16, class: VerdictClass) -> Self {
        self.session.classify.http.insert(status, class);
        self
    }

    /// Replace all classification overrides (`[classify]`).
    pub fn with_classify_overrides(mut self, o: ClassifyOverrides) -> Self {
        self.session.classify = o;
        self
    }

    /// Add a rule on a JSON body field (`[[classify.body]]`): tried before every table, in
    /// the order added; see [`abide_core::classify::rules`]. Checked by
    /// [`PolicyBuilder::build`].
    pub fn with_body_rule(mut self, rule: BodyRule) -> Self {
        self.session.classify.body.push(rule);
        self
    }

    /// Add a rule on a response header (`[[classify.header]]`), tried after the body rules,
    /// in the order added. Checked by [`PolicyBuilder::build`].
    pub fn with_header_rule(mut self, rule: HeaderRule) -> Self {
        self.session.classify.header.push(rule);
        self
    }

    /// Follow rate-limit headers (`use_rate_limit_headers`); `Retry-After` is always obeyed.
    pub fn with_rate_limit_headers(mut self, on: bool) -> Self {
        self.session.use_rate_limit_headers = on;
        self
    }

    /// The pacer's starting rate, requests per second (`rate_hint`).
    pub fn with_initial_rate(mut self, per_sec: f64) -> Self {
        self.session.pacer.initial_rate = per_sec;
        self
    }

    /// The pacer's highest rate, requests per second.
    pub fn with_max_rate(mut self, per_sec: f64) -> Self {
        self.session.pacer.max_rate = per_sec;
        self
    }

    /// Replace every session rule at once (retry, pacer, budget, `Retry-After` clamp,
    /// classification); the other setters then adjust it.
    pub fn with_session_config(mut self, cfg: SessionConfig) -> Self {
        self.session = cfg;
        self
    }

    /// Send the idempotency key in this header instead of `Idempotency-Key`.
    pub fn with_idempotency_header(mut self, name: HeaderName) -> Self {
        self.idempotency = Some(name);
        self
    }

    /// Never generate idempotency keys. A `POST` without one is then retried only after a
    /// throttle or a refused connection (answers that say it was not acted on).
    pub fn without_idempotency_keys(mut self) -> Self {
        self.idempotency = None;
        self
    }

    /// Return terminal answers (`400`, `404`, ...) as [`Stopped`](crate::Stopped) errors
    /// instead of responses.
    pub fn with_terminal_as_error(mut self, on: bool) -> Self {
        self.terminal_as_error = on;
        self
    }

    /// Key hosts with `f` instead of `scheme://host[:port]` (e.g. one key per tenant when
    /// each has its own quota). Requests with the same key share one session.
    pub fn with_key<F>(mut self, f: F) -> Self
    where
        F: Fn(&RequestInfo<'_>) -> String + Send + Sync + 'static,
    {
        self.key = Some(Arc::new(f));
        self
    }

    /// On a `401`, call `hook` once and send again with the headers it returns set (e.g. a
    /// fresh `Authorization`). A second `401` stops with
    /// [`StopReason::CredentialsRejected`](crate::StopReason::CredentialsRejected).
    /// Without a hook, a `401` is returned as it came.
    pub fn with_refresh<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<HeaderMap, BoxError>> + Send + 'static,
    {
        self.refresh = Some(Arc::new(move || Box::pin(hook()) as RefreshFuture));
        self
    }

    /// Read time from `clock` and wait with `sleeper` (tests: a `ManualClock` and a
    /// [`ManualSleeper`](crate::ManualSleeper) over it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>, sleeper: Arc<dyn Sleeper>) -> Self {
        self.clock = Some(clock);
        self.sleeper = Some(sleeper);
        self
    }

    /// Seed the jitter and key generator, for reproducible schedules.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Share each host's limit (send schedule, pauses, learned rate, retry budget) with
    /// the policies of other processes through Redis, as outbox nodes share a provider's
    /// (abide-redis; `[coordination]` of a providers file: `redis_url`, `expected_nodes`,
    /// `key_prefix`). A host's Redis key is `<key_prefix>:coord:<host key>`, so policies
    /// share a host's limit when they use the same prefix and the same host key
    /// (`scheme://host[:port]`, or your `with_key`). Without a `redis_url` each process
    /// keeps its hosts alone. Redis down or slow is never unlimited: each process then
    /// sends its share of the rate (the pacer's rate ÷ the nodes last seen, or ÷
    /// `expected_nodes` before Redis ever answered), and rejoins when it answers.
    ///
    /// Each policy is one node, with a random id. Feature `redis`.
    ///
    /// # Panics
    /// At the first request to a host, outside a tokio runtime (the coordination of each
    /// host syncs on a tokio task).
    #[cfg(feature = "redis")]
    pub fn with_coordination(mut self, config: &abide_redis::CoordinationConfig) -> Self {
        self.shared = crate::coordination::Shared::new(config);
        self
    }

    /// The policy.
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting: `max_wait` zero, or any setting of the session
    /// outside its documented range, as [`SessionConfig::validate`] (the one validator the
    /// providers file uses too) reports it (`max_attempts` 0, `max_age` zero, `headroom`
    /// outside its range, a rate not positive and finite, a classification override or
    /// rule that cannot apply, ...), or a `redis_url` the redis crate cannot read.
    pub fn build(self) -> Result<Policy, ConfigError> {
        if self.max_wait.is_zero() {
            return Err(ConfigError {
                setting: "max_wait".into(),
                problem: "must be positive".to_owned(),
            });
        }
        self.session.validate().map_err(ConfigError::from_session)?;
        #[cfg(feature = "redis")]
        if let Err(e) = &self.shared {
            return Err(e.clone());
        }
        Ok(Policy::from_valid(self))
    }
}
