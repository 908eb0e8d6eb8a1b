//! The bound on request bodies held for resending, across every provider: a request
//! reserves what its body may take before it is read, and gives it back when it leaves.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of request bodies the proxy may hold at once.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    limit: usize,
    used: AtomicUsize,
}

/// A reservation, given back on drop.
#[derive(Debug)]
pub(crate) struct Held {
    budget: Arc<BodyBudget>,
    bytes: usize,
}

impl BodyBudget {
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Reserve `bytes`, unless that would pass the limit (then `None`).
    pub(crate) fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Held> {
        let mut cur = self.used.load(Ordering::Acquire);
        loop {
            let next = cur.checked_add(bytes).filter(|&n| n <= self.limit)?;
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    return Some(Held {
                        budget: Arc::clone(self),
                        bytes,
                    })
                }
                Err(seen) => cur = seen,
            }
        }
    }

    /// Bytes reserved now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stop_at_the_limit_and_come_back_on_drop() {
        let b = BodyBudget::new(10);
        let a = b.reserve(6).unwrap();
        assert!(b.reserve(5).is_none());
        let c = b.reserve(4).unwrap();
        assert_eq!(b.used(), 10);
        drop(a);
        drop(c);
        assert_eq!(b.used(), 0);
        assert!(b.reserve(usize::MAX).is_none());
    }
}
