//! One provider's settings as the engine reads them: [`ProviderConfig`], its pacer
//! tuning ([`PacerSettings`]) and its fail-over ([`FailoverConfig`]).

use std::time::Duration;

use abide_core::{
    Classifier, ClassifyOverrides, Dialect, PacerConfig, RetryBudgetConfig, RetryConfig,
    SessionConfig,
};

use crate::transport::TransportConfig;

/// One provider.
///
/// # Default
/// - `transport`: see [`crate::transport::HttpConfig`] and the other transports' settings
/// - `retry`: see [`RetryConfig`]
/// - `budget`: [`RetryBudgetConfig::default`]
/// - `pacer`: see [`PacerSettings`] (no `rate_hint`: the pacer starts at
///   [`PacerConfig::cold_start_rate`] for the provider's senders and searches)
/// - `rate_limit_dialect`: `auto` (see [`abide_core::ratelimit`])
/// - no classification overrides, no failover
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// Unique name items refer to (unique ignoring case).
    pub name: String,
    /// How it is reached, with the transport's own settings.
    pub transport: TransportConfig,
    /// Attempt caps and backoff.
    pub retry: RetryConfig,
    /// Retry budget shared by the provider's senders.
    pub budget: RetryBudgetConfig,
    /// Pacer tuning for this provider, its starting rate included.
    pub pacer: PacerSettings,
    /// Classification overrides for this provider.
    pub classify: ClassifyOverrides,
    /// How this provider's rate-limit headers are read (TOML `rate_limit_dialect`): `auto`
    /// detects only unambiguous names; name the vendor where the same names differ (a
    /// GitHub 403 secondary limit, an epoch reset).
    pub rate_limit_dialect: Dialect,
    /// Where pending items go after a while.
    pub failover: Option<FailoverConfig>,
}

impl ProviderConfig {
    /// Concurrent senders (an HTTP provider's `concurrency`, an SMPP provider's `window`).
    pub fn concurrency(&self) -> usize {
        self.transport.settings().concurrency()
    }

    /// Longest time one attempt may take (see
    /// [`crate::transport::TransportSettings::attempt_timeout`]).
    pub fn attempt_timeout(&self) -> Duration {
        self.transport.settings().attempt_timeout()
    }

    /// The classifier for this provider: defaults plus overrides.
    pub fn classifier(&self) -> Classifier {
        Classifier::default()
            .with_overrides(self.classify.clone())
            .with_dialect(self.rate_limit_dialect)
    }

    /// The rules of this provider's [`abide_core::Session`]: its retry caps, budget, pacer
    /// settings (starting at `rate_hint`, or without one at
    /// [`PacerConfig::cold_start_rate`] for its senders) and classification overrides;
    /// everything else is [`SessionConfig::default`].
    pub fn session_config(&self) -> SessionConfig {
        let d = PacerConfig::default();
        let hint = self.pacer.rate_hint;
        // A hard cap when set; else a hint above the default ceiling raises it (it would
        // be clamped to it).
        let max_rate = self
            .pacer
            .max_rate
            .unwrap_or_else(|| hint.map_or(d.max_rate, |r| r.max(d.max_rate)));
        SessionConfig {
            retry: self.retry,
            pacer: PacerConfig {
                // Without a hint: from what the senders can do, then the search; never
                // above the cap.
                initial_rate: hint
                    .unwrap_or_else(|| PacerConfig::cold_start_rate(self.concurrency()))
                    .min(max_rate),
                max_rate,
                headroom: self.pacer.headroom,
                throttle_pause: self.pacer.throttle_pause,
                max_throttle_pause: self.pacer.max_throttle_pause,
                ..d
            },
            budget: self.budget,
            classify: self.classify.clone(),
            rate_limit_dialect: self.rate_limit_dialect,
            use_rate_limit_headers: self.pacer.use_rate_limit_headers,
            ..SessionConfig::default()
        }
    }
}

/// Per-provider pacer tuning (`rate_hint` and `[provider.pacer]`); the rest of
/// [`PacerConfig`] is abide-core's default, with the rate starting at `rate_hint`.
///
/// # Default
/// - `rate_hint`: none (start from what the senders can do, and search)
/// - `headroom`: [`PacerConfig::default`]'s (0.97 of an advertised limit)
/// - `use_rate_limit_headers`: true
/// - `throttle_pause`: 1 s, `max_throttle_pause`: 10 min
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerSettings {
    /// Starting send rate, requests per second (TOML `rate_hint`, beside `name`); `None`
    /// starts from what the senders can do ([`PacerConfig::cold_start_rate`]) and
    /// searches.
    pub rate_hint: Option<f64>,
    /// Hard cap on the send rate, requests per second (TOML `max_rate`, beside `name`):
    /// the pacer never goes above it, whatever the provider advertises or the search
    /// finds; for a quota agreed by contract, or a key shared with another client.
    /// `None`: the default ceiling ([`PacerConfig::default`]'s `max_rate`).
    pub max_rate: Option<f64>,
    /// Fraction of a rate the provider advertises (`RateLimit-Policy`, `X-RateLimit-*`) to
    /// aim at, in (0, 1].
    pub headroom: f64,
    /// Follow the provider's rate-limit headers (target rate, pause on an exhausted quota).
    /// Off for a provider known to advertise wrong numbers: the pacer then learns the limit
    /// from throttles alone. `Retry-After` is always obeyed.
    pub use_rate_limit_headers: bool,
    /// Pause of the provider after a throttle that named no delay (doubles per
    /// consecutive one).
    pub throttle_pause: Duration,
    /// Longest such pause.
    pub max_throttle_pause: Duration,
}

impl Default for PacerSettings {
    fn default() -> Self {
        let d = PacerConfig::default();
        Self {
            rate_hint: None,
            max_rate: None,
            headroom: d.headroom,
            use_rate_limit_headers: true,
            throttle_pause: d.throttle_pause,
            max_throttle_pause: d.max_throttle_pause,
        }
    }
}

/// Fail-over of pending items to another provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverConfig {
    /// The provider to move to.
    pub to: String,
    /// How long an item may wait before it moves, from the start of its attempt window:
    /// when it was enqueued, requeued, or moved to this provider by a fail-over (so along
    /// a chain `a → b → c` it waits this long at each). A chain that comes back to a
    /// provider on it is refused at load.
    pub after_pending: Duration,
}
