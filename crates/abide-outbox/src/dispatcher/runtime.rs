//! What one provider's senders share: its session (pace, pauses, budget, rules), its
//! transport and its counters.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use abide_core::{BudgetRole, ItemContext, Session};

use crate::config::ProviderConfig;
use crate::model::Item;
use crate::progress::Stats;
use crate::transport::Transport;

/// Everything shared by one provider's senders.
#[derive(Debug)]
pub(crate) struct ProviderRuntime {
    pub(crate) cfg: ProviderConfig,
    pub(crate) session: Arc<Session>,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) stats: Stats,
    /// Why the dispatcher stopped sending to this provider for the run (its credential
    /// refused before anything was accepted); a transport's own reason comes first.
    pub(crate) suspension: Mutex<Option<String>>,
}

/// How long before its lease ends an item may still be sent: the request's timeout plus a
/// second, so an answer always arrives (and is written) while the lease is ours.
fn lease_margin(cfg: &ProviderConfig) -> Duration {
    cfg.attempt_timeout() + Duration::from_secs(1)
}

impl ProviderRuntime {
    /// Why this provider will not send again this run: its transport's reason (an SMPP
    /// bind refused for good) or the dispatcher's ([`ProviderRuntime::suspend`]).
    pub(crate) fn suspended(&self) -> Option<String> {
        self.transport.suspended().or_else(|| {
            self.suspension
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    /// Stop sending to this provider for the run, saying why (kept: the first reason).
    pub(crate) fn suspend(&self, why: String) {
        self.suspension
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(why);
    }

    /// What the session needs to know of a claimed item.
    pub(crate) fn item_context(&self, item: &Item) -> ItemContext {
        let margin = lease_margin(&self.cfg);
        ItemContext {
            window_attempts: item.window_attempts,
            window_start: item.window_start,
            role: budget_role(item),
            send_by: item.lease_expires_at.map(|exp| {
                exp.checked_sub(margin)
                    .unwrap_or(std::time::SystemTime::UNIX_EPOCH)
            }),
        }
    }
}

/// The budget role of `item`'s next attempt (see [`BudgetRole`]).
pub(crate) fn budget_role(item: &Item) -> BudgetRole {
    if item.attempts == 0 || item.just_failed_over() {
        BudgetRole::First
    } else if item.lease_reclaimed() {
        BudgetRole::Resume
    } else {
        BudgetRole::Retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MovedBy, Request, FAILED_OVER_PREFIX, LEASE_EXPIRED_REASON};
    use crate::state::State;
    use std::time::UNIX_EPOCH;

    fn item(attempts: u32, reason: Option<&str>, moved_by: Option<MovedBy>) -> Item {
        Item {
            id: "i".into(),
            provider: "p".into(),
            current_provider: "p".into(),
            request: Request::post_json("/m", serde_json::json!({})),
            idempotency_key: "k".into(),
            created_at: UNIX_EPOCH,
            state: State::InFlight,
            attempts,
            window_attempts: attempts,
            window_start: UNIX_EPOCH,
            next_attempt_at: UNIX_EPOCH,
            last_provider_code: None,
            reason: reason.map(str::to_owned),
            moved_by,
            lease_owner: Some("o".into()),
            lease_expires_at: None,
            message_id: None,
        }
    }

    #[test]
    fn only_retries_of_remote_failures_spend_budget() {
        assert_eq!(budget_role(&item(0, None, None)), BudgetRole::First);
        let failed = item(3, Some("http_503"), None);
        assert_eq!(budget_role(&failed), BudgetRole::Retry);
        let denied = item(3, Some("retry_budget_exhausted"), None);
        assert_eq!(budget_role(&denied), BudgetRole::Retry);
        let reclaimed = item(3, Some(LEASE_EXPIRED_REASON), Some(MovedBy::LeaseExpired));
        assert_eq!(budget_role(&reclaimed), BudgetRole::Resume);
        let reason = format!("{FAILED_OVER_PREFIX}q");
        let moved = item(3, Some(&reason), Some(MovedBy::FailedOver));
        assert_eq!(budget_role(&moved), BudgetRole::First);
        // A reason that merely reads like one of those decides nothing.
        let lookalike = item(3, Some(LEASE_EXPIRED_REASON), None);
        assert_eq!(budget_role(&lookalike), BudgetRole::Retry);
        let lookalike = item(3, Some(&reason), None);
        assert_eq!(budget_role(&lookalike), BudgetRole::Retry);
    }
}
