//! What the senders and the sync task share ([`Shared`]): this node's [`View`] of the
//! shared state, and the timings both sides keep to.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use abide_core::{Clock, CoordinationMode, NodeSeen, RetryBudgetConfig};
use tokio::sync::Notify;

/// Longest a sync may take before the node falls back.
pub const SYNC_TIMEOUT: Duration = Duration::from_millis(250);
/// A node not heard from for this long no longer counts as alive.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(2);
/// Sync at least this often (heartbeat, pauses and decreases of other nodes).
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(250);
/// How much of this node's share of the rate one sync reserves.
pub(crate) const BATCH_SPAN: Duration = Duration::from_millis(200);
/// Most slots reserved by one sync.
pub(crate) const MAX_BATCH: u32 = 64;
/// A granted slot not used within this long after its time is dropped (using it late
/// would be a burst).
pub(crate) const STALE_SLOT: Duration = Duration::from_millis(25);
/// A sender that found no slot asks again after this long.
pub(crate) const RETRY_SLOT: Duration = Duration::from_millis(10);
/// At start, how long senders wait for the first sync before falling back.
pub(crate) const JOIN_WAIT: Duration = Duration::from_secs(2);
/// Retry tokens a node keeps at hand.
pub(crate) const TOKENS_HELD: u32 = 2;

/// What the senders and the sync task share.
pub(crate) struct Shared {
    pub(crate) node: String,
    pub(crate) key: String,
    pub(crate) shown_url: String,
    pub(crate) budget: RetryBudgetConfig,
    pub(crate) burst: f64,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) view: Mutex<View>,
    pub(crate) wake: Notify,
}

/// This node's view of the shared state, and what it has yet to publish.
#[derive(Debug)]
pub(crate) struct View {
    pub(crate) mode: CoordinationMode,
    /// A sync has succeeded since start.
    pub(crate) joined: bool,
    pub(crate) started: Instant,
    /// Granted slots, earliest first (local monotonic time).
    pub(crate) slots: VecDeque<Instant>,
    /// Slots taken, and reservations that found none, since the last sync: demand.
    pub(crate) taken: u32,
    pub(crate) starved: u32,
    /// End of the shared pause, as last heard.
    pub(crate) pause_until: Option<Instant>,
    /// A pause of this node's pacer not yet published, and the last one published.
    pub(crate) pending_pause: Option<Instant>,
    pub(crate) published_pause: Option<Instant>,
    /// A decrease of this node's pacer not yet published: (rate, ceiling).
    pub(crate) pending_decrease: Option<(f64, Option<f64>)>,
    pub(crate) own_decreases: u64,
    /// A decrease made elsewhere (or the shared estimate at join), for the next pull.
    pub(crate) adopt: Option<(f64, Option<f64>)>,
    pub(crate) seen_dseq: i64,
    /// The pacer's rate and ceiling at the last push; `informed` once it has had an answer.
    pub(crate) rate: f64,
    pub(crate) informed: bool,
    pub(crate) ceiling: Option<f64>,
    pub(crate) share: f64,
    pub(crate) nodes: u32,
    pub(crate) deposits: u64,
    pub(crate) refunds: u64,
    pub(crate) tokens: u32,
    pub(crate) denied: u32,
    /// Fallback: the local schedule's next free slot.
    pub(crate) fallback_tat: Option<Instant>,
    /// The latest shared slot handed to a sender: a fallback schedule starts after it.
    pub(crate) handed_until: Option<Instant>,
    /// (when, slots granted to all nodes, slots granted to this one), for the share.
    pub(crate) samples: VecDeque<(Instant, i64, i64)>,
    pub(crate) granted: i64,
    /// Since when this node is in fallback (`None` unless it is).
    pub(crate) fallback_since: Option<Instant>,
    /// The node that set the shared pause, as last heard ('' unknown).
    pub(crate) pause_by: String,
    /// The learned rate and ceiling shared by every node, as last heard.
    pub(crate) shared_rate: Option<f64>,
    pub(crate) shared_ceiling: Option<f64>,
    /// The live nodes at the last listing, and when it was taken (midpoint of its sync).
    pub(crate) peers: Vec<NodeSeen>,
    pub(crate) listed_at: Option<Instant>,
}

impl Shared {
    pub(crate) fn view(&self) -> std::sync::MutexGuard<'_, View> {
        // Every update leaves the view consistent; a panicked holder is harmless.
        self.view.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl View {
    pub(crate) fn new(rate: f64, now: Instant, expected_nodes: u32) -> Self {
        Self {
            mode: CoordinationMode::Redis,
            joined: false,
            started: now,
            slots: VecDeque::new(),
            taken: 0,
            starved: 0,
            pause_until: None,
            pending_pause: None,
            published_pause: None,
            pending_decrease: None,
            own_decreases: 0,
            adopt: None,
            seen_dseq: 0,
            rate,
            informed: false,
            ceiling: None,
            share: 1.0,
            nodes: expected_nodes.max(1),
            deposits: 0,
            refunds: 0,
            tokens: 0,
            denied: 0,
            fallback_tat: None,
            handed_until: None,
            samples: VecDeque::new(),
            granted: 0,
            fallback_since: None,
            pause_by: String::new(),
            shared_rate: None,
            shared_ceiling: None,
            peers: Vec::new(),
            listed_at: None,
        }
    }

    /// Switch to fallback at `now` (a no-op when already there).
    pub(crate) fn fall_back(&mut self, now: Instant) {
        if self.mode != CoordinationMode::Fallback {
            self.mode = CoordinationMode::Fallback;
            self.fallback_since = Some(now);
        }
    }

    /// Slots one sync asks for: about [`BATCH_SPAN`] of this node's share of the rate, at
    /// least one, at most [`MAX_BATCH`]; none without demand.
    pub(crate) fn batch(&self) -> u32 {
        if self.taken == 0 && self.starved == 0 {
            return 0;
        }
        let per_node = self.rate / f64::from(self.nodes.max(1));
        let n = (per_node * BATCH_SPAN.as_secs_f64()).ceil();
        // In range by the clamp; the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = n.clamp(1.0, f64::from(MAX_BATCH)) as u32;
        n
    }

    /// Whether the senders need a sync now rather than at the next heartbeat.
    pub(crate) fn wants_slots(&self) -> bool {
        self.starved > 0 || (self.taken > 0 && self.slots.len() * 2 <= self.batch() as usize)
    }

    /// The next granted slot usable at `now`, not inside a pause ending at `paused`.
    pub(crate) fn take_slot(&mut self, now: Instant, paused: Option<Instant>) -> Option<Instant> {
        while let Some(&at) = self.slots.front() {
            let stale = at + STALE_SLOT < now;
            let voided = paused.is_some_and(|p| at < p);
            if !(stale || voided) {
                break;
            }
            self.slots.pop_front();
        }
        let at = self.slots.pop_front()?;
        self.taken = self.taken.saturating_add(1);
        self.handed_until = self.handed_until.max(Some(at));
        Some(at)
    }

    /// Fallback: this node's share of the rate, spaced locally.
    pub(crate) fn fallback_slot(
        &mut self,
        now: Instant,
        rate: f64,
        paused: Option<Instant>,
    ) -> Instant {
        let per_node = (rate / f64::from(self.nodes.max(1))).max(abide_core::pacer::MIN_RATE);
        let interval = Duration::try_from_secs_f64(1.0 / per_node).unwrap_or(Duration::MAX);
        // Shared slots already handed out (senders wait on them) come first: starting at
        // `now` beside them would send both.
        let first = self.handed_until.map_or(now, |h| (h + interval).max(now));
        let mut at = self.fallback_tat.map_or(first, |t| t.max(now));
        if let Some(p) = paused {
            at = at.max(p);
        }
        self.fallback_tat = at.checked_add(interval);
        at
    }
}
