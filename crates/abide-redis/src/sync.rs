//! The background task of a [`RedisCoordination`](super::RedisCoordination): one `EVALSHA`
//! of `sync.lua` per sync (heartbeat, publish, take), on demand or every
//! [`HEARTBEAT_EVERY`]; fallback and rejoin.

use std::sync::Weak;
use std::time::{Duration, Instant};

use abide_core::pacer::MAX_PAUSE;
use abide_core::CoordinationMode;
use redis::aio::ConnectionManager;
use redis::Script;

use crate::view::{
    Shared, View, HEARTBEAT_EVERY, HEARTBEAT_TTL, MAX_BATCH, STALE_SLOT, SYNC_TIMEOUT, TOKENS_HELD,
};

/// Wait after a failed sync before the next attempt.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);
/// Longest wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Span over which this node's share of the granted slots is measured.
const SHARE_SPAN: Duration = Duration::from_secs(3);
/// Fewest slots granted to all nodes over the span before a share is computed.
const SHARE_LEAST: i64 = 10;
/// Most live nodes believed (a bound on a remote count).
const MAX_NODES: i64 = 10_000;
/// Longest a granted slot may lie ahead (µs): no hoarding of a far schedule.
const HORIZON_US: u64 = 2_000_000;
/// Most retry tokens asked for in one sync.
const MAX_TOKENS: u32 = 16;
/// After a Redis restart, how long the schedule waits for the nodes last seen to rejoin
/// before it no longer leaves their fallback share to them (µs; see `sync.lua`).
pub(super) const REJOIN_GRACE_US: u64 = 5_000_000;

/// What one sync publishes and asks for (taken from the view; put back if it fails).
#[derive(Debug, Default)]
pub(super) struct Args {
    slots: u32,
    pause: Option<Instant>,
    decrease: Option<(f64, Option<f64>)>,
    deposits: u64,
    refunds: u64,
    tokens: u32,
    /// The pacer's rate, once it has learned from an answer.
    rate: Option<f64>,
    /// Its rate before that (used when no node has learned one).
    start_rate: f64,
    ceiling: Option<f64>,
    seen_dseq: i64,
    /// Fallback slots handed out and still ahead (see `sync.lua`, ARGV 22).
    debt: u32,
    /// Live nodes last seen if this node had joined before, else 0 (ARGV 23).
    seen_nodes: u32,
    /// Shared slots at hand, charged to a lost state only (ARGV 25).
    held: u32,
    info: String,
    /// List the live nodes (ARGV 26).
    list_nodes: bool,
}

/// The script's answer, in its order.
pub(super) type Reply = (
    i64,
    i64,
    i64,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    Vec<i64>,
    Vec<String>,
);

/// How often a sync lists the live nodes (for status displays).
const LIST_EVERY: Duration = Duration::from_secs(1);

/// A connection that reports why it failed (a refused password, a closed port) rather than
/// retrying until [`CONNECT_TIMEOUT`] and saying only that it timed out; this loop retries.
async fn connect(client: redis::Client) -> redis::RedisResult<ConnectionManager> {
    let cfg = redis::aio::ConnectionManagerConfig::new()
        .set_number_of_retries(0)
        .set_connection_timeout(CONNECT_TIMEOUT);
    ConnectionManager::new_with_config(client, cfg).await
}

/// Sync until every [`RedisCoordination`](super::RedisCoordination) is dropped.
pub(super) async fn run(shared: Weak<Shared>, client: redis::Client) {
    let script = Script::new(include_str!("sync.lua"));
    let mut conn: Option<ConnectionManager> = None;
    let mut failing = false;
    loop {
        let Some(s) = shared.upgrade() else { return };
        let urgent = {
            let v = s.view();
            v.wants_slots() || v.pending_pause.is_some() || v.pending_decrease.is_some()
        };
        if !urgent {
            let _ = tokio::time::timeout(HEARTBEAT_EVERY, s.wake.notified()).await;
        }
        if conn.is_none() {
            let made = tokio::time::timeout(CONNECT_TIMEOUT, connect(client.clone()));
            match made.await {
                Ok(Ok(c)) => conn = Some(c),
                Ok(Err(e)) => {
                    s.fail(&mut failing, &e.to_string());
                    drop(s);
                    tokio::time::sleep(RETRY_AFTER_FAILURE).await;
                    continue;
                }
                Err(_) => {
                    s.fail(&mut failing, "connecting timed out");
                    drop(s);
                    tokio::time::sleep(RETRY_AFTER_FAILURE).await;
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let now = s.now();
        let args = s.view().take_args(now);
        let mut inv = script.prepare_invoke();
        s.fill(&mut inv, &args, now);
        let t0 = s.now();
        let res = tokio::time::timeout(SYNC_TIMEOUT, inv.invoke_async::<Reply>(c)).await;
        let t1 = s.now();
        match res {
            Ok(Ok(reply)) => {
                if failing {
                    tracing::info!(url = %s.shown_url, key = %s.key,
                        "coordination: Redis answers again; sharing the provider's limit");
                    failing = false;
                }
                s.view().apply(&args, reply, t0 + (t1 - t0) / 2);
            }
            Ok(Err(e)) => {
                s.view().restore(args);
                s.fail(&mut failing, &e.to_string());
                drop(s);
                tokio::time::sleep(RETRY_AFTER_FAILURE).await;
            }
            Err(_) => {
                s.view().restore(args);
                s.fail(&mut failing, "no answer within 250 ms");
                drop(s);
                tokio::time::sleep(RETRY_AFTER_FAILURE).await;
            }
        }
    }
}

impl Shared {
    fn now(&self) -> Instant {
        self.clock.monotonic()
    }

    /// A sync failed: fall back, warning once per episode (the URL without its password).
    fn fail(&self, failing: &mut bool, error: &str) {
        let now = self.now();
        let mut v = self.view();
        v.fall_back(now);
        let (nodes, joined, rate) = (v.nodes, v.joined, v.rate);
        drop(v);
        if !*failing {
            *failing = true;
            let error = abide_core::echo::redact_text(error);
            if joined {
                tracing::warn!(url = %self.shown_url, key = %self.key, nodes, %error,
                    "coordination: Redis unavailable; sending this node's share of the last shared rate until it answers");
            } else {
                tracing::warn!(url = %self.shown_url, key = %self.key, assumed_nodes = nodes,
                    per_node_rate = rate / f64::from(nodes.max(1)), %error,
                    "coordination: Redis unavailable at start; assuming [coordination] expected_nodes nodes and sending this node's share of its starting rate until it answers");
            }
        }
    }

    fn fill(&self, inv: &mut redis::ScriptInvocation<'_>, a: &Args, now: Instant) {
        let key = &self.key;
        inv.key(format!("{key}:state"))
            .key(format!("{key}:nodes"))
            .key(format!("{key}:info"));
        let ttl_ms = u64::try_from(HEARTBEAT_TTL.as_millis()).unwrap_or(u64::MAX);
        let pause_us = a.pause.map_or(0, |p| {
            u64::try_from(p.saturating_duration_since(now).min(MAX_PAUSE).as_micros()).unwrap_or(0)
        });
        let (dec, drate, dceil) = match a.decrease {
            Some((r, c)) => (
                "1",
                r.to_string(),
                c.map(|c| c.to_string()).unwrap_or_default(),
            ),
            None => ("0", String::new(), String::new()),
        };
        let b = &self.budget;
        let ttl = b
            .ttl
            .clamp(abide_core::budget::MIN_TTL, abide_core::budget::MAX_TTL)
            .as_secs_f64();
        let ratio = if b.retry_ratio.is_nan() {
            0.0
        } else {
            b.retry_ratio
                .clamp(0.0, abide_core::budget::MAX_RETRY_RATIO)
        };
        let floor = f64::from(b.min_per_sec);
        let rate = a.rate.unwrap_or(a.start_rate);
        let cap = (floor + ratio * rate) * ttl;
        inv.arg(&self.node)
            .arg(ttl_ms)
            .arg(a.rate.map(|r| r.to_string()).unwrap_or_default())
            .arg(self.burst.to_string())
            .arg(a.slots)
            .arg(pause_us)
            .arg(dec)
            .arg(drate)
            .arg(dceil)
            .arg(a.deposits)
            .arg(a.refunds)
            .arg(a.tokens)
            .arg(ratio.to_string())
            .arg(floor.to_string())
            .arg(cap.max(1.0).to_string())
            .arg((floor * ttl).to_string())
            .arg(a.ceiling.map(|c| c.to_string()).unwrap_or_default())
            .arg(&a.info)
            .arg(HORIZON_US)
            .arg(a.seen_dseq)
            .arg(a.start_rate.to_string())
            .arg(a.debt)
            .arg(a.seen_nodes)
            .arg(REJOIN_GRACE_US)
            .arg(a.held)
            .arg(if a.list_nodes { "1" } else { "0" });
    }
}

/// The live nodes from a sync's listing: (node, µs since its heartbeat, its info) triples.
pub(super) fn peers(mut seen: impl Iterator<Item = String>) -> Vec<abide_core::NodeSeen> {
    let mut out = Vec::new();
    while let (Some(node), Some(age), Some(info)) = (seen.next(), seen.next(), seen.next()) {
        if out.len() >= abide_core::MAX_NODES_SHOWN {
            break;
        }
        let field = |name: &str| {
            info.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .unwrap_or(0.0)
        };
        out.push(abide_core::NodeSeen {
            node: abide_core::echo::truncate(&node, 128),
            last_seen_ago: micros(age.parse().unwrap_or(0)).min(Duration::from_secs(3600)),
            mode: info
                .split_whitespace()
                .next()
                .unwrap_or("")
                .chars()
                .take(16)
                .collect(),
            share: field("share=").min(1.0),
            rate: field("rate="),
        });
    }
    out
}

pub(super) fn parse_rate(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0)
}

fn micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

impl View {
    /// What the next sync publishes and asks for; the demand counters start over.
    fn take_args(&mut self, now: Instant) -> Args {
        let slots = if self.wants_slots() || self.taken > 0 {
            self.batch()
        } else {
            0
        };
        // Never hoard: no more slots while those at hand reach far ahead.
        let far = self
            .slots
            .back()
            .is_some_and(|b| *b > now + Duration::from_millis(500));
        let slots = if far { 0 } else { slots.min(MAX_BATCH) };
        self.taken = 0;
        self.starved = 0;
        let tokens = (TOKENS_HELD.saturating_sub(self.tokens) + self.denied).min(MAX_TOKENS);
        // Slots this node spaced on its own in fallback and still to come: rejoining, the
        // shared schedule must not hand the same time out again.
        let ahead = self
            .fallback_tat
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
        let per_node = self.rate / f64::from(self.nodes.max(1));
        // Bounded by the clamp; the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let debt = (ahead.as_secs_f64() * per_node)
            .ceil()
            .clamp(0.0, f64::from(MAX_BATCH) * 4.0) as u32;
        self.denied = 0;
        let list_nodes = self
            .listed_at
            .is_none_or(|at| now.saturating_duration_since(at) >= LIST_EVERY);
        // Slots at hand still usable: a state that lost them must not grant them again.
        let held = self
            .slots
            .iter()
            .filter(|at| **at + STALE_SLOT >= now)
            .count();
        Args {
            slots,
            pause: self.pending_pause.take(),
            decrease: self.pending_decrease.take(),
            deposits: std::mem::take(&mut self.deposits),
            refunds: std::mem::take(&mut self.refunds),
            tokens,
            rate: self.informed.then_some(self.rate),
            start_rate: self.rate,
            ceiling: self.ceiling,
            seen_dseq: self.seen_dseq,
            debt,
            seen_nodes: if self.joined { self.nodes } else { 0 },
            held: u32::try_from(held).unwrap_or(u32::MAX),
            info: format!(
                "{} share={:.3} rate={:.2}",
                self.mode.as_str(),
                self.share,
                self.rate
            ),
            list_nodes,
        }
    }

    /// A rate decided elsewhere, for the pacer at the next pull. The slots at hand were
    /// spaced at the old rate: sent after the cut, their throttles would read as news and
    /// cut again (a second cut within half a window halves the rate), so they go.
    pub(super) fn take_decrease(&mut self, rate: f64, ceiling: Option<f64>) {
        self.adopt = Some((rate, ceiling));
        self.rate = rate;
        self.ceiling = ceiling;
        self.slots.clear();
    }

    /// A sync failed: what it was to publish waits for the next.
    fn restore(&mut self, a: Args) {
        if self.pending_pause.is_none() {
            self.pending_pause = a.pause;
        }
        if self.pending_decrease.is_none() {
            self.pending_decrease = a.decrease;
        }
        self.deposits = self.deposits.saturating_add(a.deposits);
        self.refunds = self.refunds.saturating_add(a.refunds);
    }

    /// Take in the shared state; `mid` is the round trip's midpoint, taken as the local
    /// instant of the server's `now`.
    fn apply(&mut self, a: &Args, r: Reply, mid: Instant) {
        let (
            nodes,
            pause_left,
            dseq,
            drate,
            dceil,
            cur_rate,
            cur_ceil,
            total,
            granted,
            fresh,
            slots,
            seen,
        ) = r;
        self.mode = CoordinationMode::Redis;
        self.fallback_since = None;
        self.fallback_tat = None;
        self.shared_rate = parse_rate(&cur_rate);
        self.shared_ceiling = parse_rate(&cur_ceil);
        let mut seen = seen.into_iter();
        self.pause_by = seen.next().unwrap_or_default();
        if a.list_nodes {
            self.peers = peers(seen);
            self.listed_at = Some(mid);
        }
        self.nodes = u32::try_from(nodes.clamp(1, MAX_NODES)).unwrap_or(1);
        self.pause_until = (pause_left > 0).then(|| mid + micros(pause_left).min(MAX_PAUSE));
        if a.pause.is_some() {
            self.published_pause = self.published_pause.max(a.pause);
        }
        let fresh = fresh == 1;
        if !self.joined {
            self.joined = true;
            // A node joining existing state starts from the shared estimate, not from its
            // own guess, even when it is the only live node yet: nodes started at once
            // each see only those that synced before them, and the first would otherwise
            // keep its cold-start search and overwrite the estimate the others took.
            if !fresh {
                if let Some(rate) = parse_rate(&cur_rate) {
                    self.take_decrease(rate, parse_rate(&cur_ceil));
                }
            }
        } else if dseq > self.seen_dseq && a.decrease.is_none() {
            // Another node decreased: take it (a Redis that lost its state says nothing,
            // and this node keeps its own rate).
            if let Some(rate) = parse_rate(&drate) {
                self.take_decrease(rate, parse_rate(&dceil));
            }
        }
        self.seen_dseq = dseq;
        if fresh {
            self.samples.clear();
        }
        let added = slots.len();
        for us in slots {
            self.slots.push_back(mid + micros(us));
        }
        if added > 0 {
            self.slots.make_contiguous().sort_unstable();
        }
        self.granted += i64::try_from(added).unwrap_or(0);
        self.tokens = self
            .tokens
            .saturating_add(u32::try_from(granted.clamp(0, i64::from(MAX_TOKENS))).unwrap_or(0));
        self.samples.push_back((mid, total, self.granted));
        while self.samples.len() > 2
            && self
                .samples
                .front()
                .is_some_and(|s| mid.saturating_duration_since(s.0) > SHARE_SPAN)
        {
            self.samples.pop_front();
        }
        if let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) {
            let all = last.1 - first.1;
            let mine = last.2 - first.2;
            if all >= SHARE_LEAST && mine >= 0 {
                // Counts in a 10 s span are far below 2^53.
                #[allow(clippy::cast_precision_loss)]
                let share = mine as f64 / all as f64;
                self.share = share.clamp(0.01, 1.0);
            }
        }
    }
}
