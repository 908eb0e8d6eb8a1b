//! [`DispatcherOptions`]: how a [`super::Dispatcher`] is tuned, and its defaults.

use std::sync::Arc;
use std::time::Duration;

use crate::credentials::CredentialSource;
use crate::sleep::Sleeper;

/// How much longer than a provider's request timeout the lease must be: an attempt that
/// runs to its timeout still completes (and writes its result) before the lease ends and
/// another worker could take the item and send it again.
pub const MIN_LEASE_MARGIN: Duration = Duration::from_secs(2);

/// How long a drained run waits for a provider that has not answered once since its
/// first attempt before it stops ([`super::Ending::Unreachable`]): long enough for a host that is
/// restarting, short enough that a wrong `base_url` is named within minutes instead of
/// after every item's maximum age.
pub const DEFAULT_UNREACHABLE_AFTER: Duration = Duration::from_secs(120);

/// Tuning of a [`super::Dispatcher`].
///
/// # Default
/// - `lease`: 60 s (a claimed item not completed by then is reclaimed as `PENDING`)
/// - `claim_batch`: 256 items per claim (never more than the pace can send within a
///   quarter of the lease)
/// - `idle_poll`: 500 ms (longest idle sleep before looking for new items; items enqueued
///   through this dispatcher wake its claimers at once, this is for other writers)
/// - `maintenance_interval`: 1 s (lease reclaim, maximum age, fail-over, drain check)
/// - `budget_denied_delay`: 5 s (minimum wait of a retry the budget refused)
/// - `max_response_body`: 64 KiB read from each response, the rest discarded
/// - `seed`: `None` (jitter from the OS RNG); set it for reproducible schedules
/// - `sleeper`: `None` = [`crate::sleep::TokioSleeper`] on the dispatcher's clock
/// - `credentials`: `None` = [`crate::EnvCredentials`] (each provider's `credentials_env`)
/// - `store_fault_limit`: 60 s (results failing to be written this long stop the run)
/// - `unreachable_after`: [`DEFAULT_UNREACHABLE_AFTER`] (a drained run stops when a
///   provider has not answered once in that long)
/// - `redis_url` (feature `redis`): `None` (each provider's limit is this node's alone,
///   in memory)
/// - `coordination_prefix` (feature `redis`): `abide:coord`
#[derive(Debug, Clone)]
pub struct DispatcherOptions {
    /// Lease on claimed items; at least every provider's attempt timeout +
    /// [`MIN_LEASE_MARGIN`].
    pub lease: Duration,
    /// Most items per claim.
    pub claim_batch: usize,
    /// Longest idle sleep.
    pub idle_poll: Duration,
    /// Period of the maintenance sweep.
    pub maintenance_interval: Duration,
    /// Minimum delay of a retry refused by the retry budget.
    pub budget_denied_delay: Duration,
    /// Bytes of each response body read before the rest is dropped.
    pub max_response_body: usize,
    /// Seed for jitter.
    pub seed: Option<u64>,
    /// How to wait.
    pub sleeper: Option<Arc<dyn Sleeper>>,
    /// Prefix of lease owners (default `abide-<uuid>`); must be unique per process.
    pub owner: Option<String>,
    /// Where the HTTP transport reads provider credentials.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    /// How long results may fail to be written (disk full, database read-only or down)
    /// before the run stops with [`crate::Error::ResultsNotRecorded`]. Nothing is claimed or
    /// sent while they fail.
    pub store_fault_limit: Duration,
    /// Share each provider's schedule, pauses, learned rate and retry budget with the
    /// other nodes on this Redis ([`abide_redis::RedisCoordination`]); the node id is the
    /// lease owner. May hold a password: it is shown only redacted.
    #[cfg(feature = "redis")]
    pub redis_url: Option<String>,
    /// Prefix of the Redis keys (nodes that share limits use the same one).
    #[cfg(feature = "redis")]
    pub coordination_prefix: String,
    /// A drained run ([`super::Dispatcher::run_drained`]) stops with [`super::Ending::Unreachable`]
    /// when a provider has not answered once this long after its first failed attempt
    /// (a wrong `base_url`, a host that is down): its items wait for the next run. `None`
    /// waits as for any outage (up to each item's maximum age). A host that answered
    /// earlier in the run and then went down is always waited for.
    pub unreachable_after: Option<Duration>,
}

impl Default for DispatcherOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            claim_batch: 256,
            idle_poll: Duration::from_millis(500),
            maintenance_interval: Duration::from_secs(1),
            budget_denied_delay: Duration::from_secs(5),
            max_response_body: 64 * 1024,
            seed: None,
            sleeper: None,
            owner: None,
            credentials: None,
            store_fault_limit: Duration::from_secs(60),
            #[cfg(feature = "redis")]
            redis_url: None,
            #[cfg(feature = "redis")]
            coordination_prefix: "abide:coord".into(),
            unreachable_after: Some(DEFAULT_UNREACHABLE_AFTER),
        }
    }
}
