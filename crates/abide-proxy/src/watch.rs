//! Pauses in the logs: one line when a provider's pause begins (how long, how many
//! requests are inside), not one per held request.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use abide_core::Clock;

use crate::provider::Provider;

/// How often the pauses are looked at.
const EVERY: Duration = Duration::from_millis(250);

/// Watch `providers` until the task is aborted.
pub(crate) async fn pauses(providers: Vec<Arc<Provider>>) {
    let mut paused = vec![false; providers.len()];
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        for (p, was) in providers.iter().zip(paused.iter_mut()) {
            let now = p.clock.monotonic();
            let left = p
                .policy
                .pacer_snapshot(&p.name)
                .and_then(|s| s.paused_until)
                .map(|u| u.saturating_duration_since(now))
                .filter(|d| !d.is_zero());
            match (left, *was) {
                (Some(d), false) => {
                    tracing::info!(
                        provider = %p.name,
                        pause_s = d.as_secs_f64(),
                        inside = p.inside.load(Ordering::Relaxed),
                        "provider paused; requests are held until it resumes"
                    );
                    *was = true;
                }
                (None, true) => {
                    tracing::debug!(provider = %p.name, "provider resumed");
                    *was = false;
                }
                _ => {}
            }
        }
    }
}
