//! Sharing each host's limit with the policies of other processes through Redis
//! (feature `redis`): abide-redis's [`RedisCoordination`] behind each host's session, as
//! outbox nodes share a provider's.

use std::sync::Arc;

use abide_core::{Clock, Coordination, Local, SessionConfig};
use abide_redis::{CoordinationConfig, CoordinationTarget, RedisCoordination};

use crate::error::ConfigError;

/// Where this process shares its hosts' limits, and as which node.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    target: CoordinationTarget,
}

impl Shared {
    /// The target of `config` for this process, or `None` without a `redis_url`. The node
    /// id is random per policy (from the OS, never from the policy's seed: two processes
    /// seeded alike must still be two nodes).
    ///
    /// # Errors
    /// [`ConfigError`] for `redis_url` when the redis crate cannot read the URL.
    pub(crate) fn new(config: &CoordinationConfig) -> Result<Option<Self>, ConfigError> {
        let Some(url) = &config.redis_url else {
            return Ok(None);
        };
        url.check().map_err(|e| ConfigError {
            setting: "redis_url".into(),
            problem: e.problem,
        })?;
        let node = format!("abide-client-{}", uuid::Uuid::new_v4().simple());
        Ok(config.target(&node).map(|target| Self { target }))
    }

    /// The coordination of host `key` (its limit key in Redis), started at its first
    /// request. The URL was checked when the policy was built, so starting cannot fail on
    /// it; should the redis crate refuse it anyway, the host is paced by this process
    /// alone, with an error logged.
    pub(crate) fn start(
        &self,
        key: &str,
        rules: &SessionConfig,
        clock: Arc<dyn Clock>,
    ) -> Arc<dyn Coordination> {
        let started = RedisCoordination::start(
            &self.target,
            key,
            rules.pacer.initial_rate,
            rules.pacer.burst,
            rules.budget,
            clock,
        );
        match started {
            Ok(c) => Arc::new(c),
            Err(e) => {
                tracing::error!(host = %key, error = %abide_core::echo::redact_text(&e.to_string()),
                    "abide: Redis coordination did not start; this process paces the host alone");
                Arc::new(Local)
            }
        }
    }
}
