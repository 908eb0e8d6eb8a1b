//! The fail-over graph: each provider moves its waiting items to at most one other, so the
//! graph is a set of chains; a chain that comes back to a provider already on it (`a → b →
//! a`) would move items round it for ever and none would be delivered, so it is refused.

use std::collections::HashSet;

use super::provider::ProviderConfig;
use crate::echo::clip;
use crate::error::{Error, Result};

/// Check every `[provider.failover]`: `to` names another configured provider, and no
/// chain of fail-overs comes back to where it started.
///
/// # Errors
/// [`Error::Config`] naming the provider and `failover.to`; for a cycle, the cycle
/// (`a → b → a`).
pub(super) fn check(providers: &[ProviderConfig]) -> Result<()> {
    let to_of = |name: &str| {
        providers
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.failover.as_ref())
            .map(|f| f.to.as_str())
    };
    for p in providers {
        let Some(f) = &p.failover else { continue };
        if f.to == p.name {
            let why = "cannot fail over to itself";
            return Err(Error::config(&p.name, "failover.to", why));
        }
        if !providers.iter().any(|q| q.name == f.to) {
            let why = format!("{} is not a configured provider", clip(&f.to));
            return Err(Error::config(&p.name, "failover.to", why));
        }
    }
    for p in providers {
        // Walk the chain from p; every step lands on a configured provider (checked above).
        let mut path = vec![p.name.as_str()];
        let mut seen: HashSet<&str> = path.iter().copied().collect();
        let mut at = p.name.as_str();
        while let Some(next) = to_of(at) {
            path.push(next);
            if !seen.insert(next) {
                if next != p.name {
                    // The cycle does not pass through p: it is reported from one of its own.
                    break;
                }
                let why = format!(
                    "fail-over cycle {}: items would move round it and never be delivered",
                    path.join(" → ")
                );
                return Err(Error::config(&p.name, "failover.to", why));
            }
            at = next;
        }
    }
    Ok(())
}
