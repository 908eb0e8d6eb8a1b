//! What the queue knows of the item being delivered: [`ItemContext`], [`BudgetRole`].

/// What the item being delivered has been through, as its queue knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemContext {
    /// Attempts made in the item's current attempt window (reset by a person's requeue).
    pub window_attempts: u32,
    /// When the current attempt window began (enqueue or requeue time).
    pub window_start: std::time::SystemTime,
    /// What the next attempt means for the retry budget.
    pub role: BudgetRole,
    /// Latest wall time at which a request for this item may still start (e.g. a lease's
    /// end minus the request timeout); `None` without such a bound.
    pub send_by: Option<std::time::SystemTime>,
}

impl ItemContext {
    /// A new item, never tried, whose window starts at `window_start`.
    pub fn first(window_start: std::time::SystemTime) -> Self {
        Self {
            window_attempts: 0,
            window_start,
            role: BudgetRole::First,
            send_by: None,
        }
    }
}

/// What an item's next attempt means for the host's retry budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetRole {
    /// New work for this host (never tried, or just failed over to it): deposits.
    First,
    /// Repeats an attempt the remote refused or failed: withdraws, or waits if refused.
    Retry,
    /// Repeats an attempt whose answer was never seen (a reclaimed lease after a crash or
    /// hang). No remote failure is being retried, so it spends nothing; it is not new work
    /// either (a crash loop must not inflate the allowance), so it earns nothing. It is
    /// still paced like every other send.
    Resume,
}
