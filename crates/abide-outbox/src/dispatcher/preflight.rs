//! What a dispatcher checks before it starts, and what its transports are built with.

use std::sync::Arc;
use std::time::Duration;

use abide_core::Clock;

use super::options::{DispatcherOptions, MIN_LEASE_MARGIN};
use crate::config::{Config, ProviderConfig};
use crate::credentials::{CredentialSource, EnvCredentials};
use crate::error::Result;
use crate::transport::{BuildEnv, Preflight};

/// Check, without a store, what [`crate::Dispatcher::new`] checks before it starts: every
/// provider's lease rule (the lease outlasts its longest attempt by [`MIN_LEASE_MARGIN`])
/// and its transport's preflight (its credential set, and fit for the protocol). For a
/// caller that would rather refuse a run before it opens or creates a database.
///
/// # Errors
/// [`crate::Error::Preflight`] naming the first provider that cannot send.
pub fn preflight(config: &Config, opts: &DispatcherOptions) -> Result<()> {
    let credentials = credentials(opts);
    for p in &config.providers {
        lease_rule(p, opts.lease)?;
        p.transport.settings().preflight(&p.name, &*credentials)?;
    }
    Ok(())
}

/// Where the transports read credentials: `opts.credentials`, else the environment.
pub(super) fn credentials(opts: &DispatcherOptions) -> Arc<dyn CredentialSource> {
    opts.credentials
        .clone()
        .unwrap_or_else(|| Arc::new(EnvCredentials))
}

/// What the transports of a dispatcher are built with.
pub(super) fn build_env(
    opts: &DispatcherOptions,
    client: reqwest::Client,
    clock: &Arc<dyn Clock>,
) -> BuildEnv {
    BuildEnv {
        client,
        credentials: credentials(opts),
        max_response_body: opts.max_response_body,
        clock: Arc::clone(clock),
    }
}

/// A lease that ends while the request may still be on the wire lets a second worker
/// send the item again while the first still waits for its answer (and a sender hands
/// back, unsent, an item whose lease would end during its request).
pub(super) fn lease_rule(
    p: &ProviderConfig,
    lease: Duration,
) -> std::result::Result<(), Preflight> {
    let attempt_timeout = p.attempt_timeout();
    let least = attempt_timeout + MIN_LEASE_MARGIN;
    if lease < least {
        return Err(Preflight::LeaseTooShort {
            provider: p.name.clone(),
            lease,
            attempt_timeout,
            least,
        });
    }
    Ok(())
}
