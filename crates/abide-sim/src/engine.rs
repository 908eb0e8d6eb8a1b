//! The discrete-event engine: a binary heap of events keyed by virtual time, ties broken by a
//! sequence number so the order never depends on anything but the seed.
//!
//! Virtual time is a `Duration` since the run began. It maps to `Instant = base + offset` and
//! `SystemTime = epoch + offset`, which is what lets the real abide-core policy run unchanged.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use abide_core::{Clock, ManualClock, PacerConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::abide_policy::AbidePolicy;
use crate::policy::{Attempt, ClientPolicy, Decision, Naive, NaiveKind, Next, PolicyKind};
use crate::provider::{schedule_at, Outcome, Provider, ProviderConfig, Response};
use crate::report::{Bucket, PolicyResult};

/// Wall time at virtual zero: 2026-06-15 08:00:00 UTC, the morning of the incident the
/// `http-date-switch` scenario replays.
const EPOCH_SECS: u64 = 1_781_510_400;

/// One run's set-up: provider, workers, offered load.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The provider's behaviour.
    pub provider: ProviderConfig,
    /// Concurrent workers.
    pub workers: usize,
    /// Round trip of one request.
    pub latency: Duration,
    /// Logical requests offered in total.
    pub items: usize,
    /// Arrival rate schedule (requests per second from each virtual time on).
    pub arrivals: Vec<(Duration, f64)>,
    /// Nothing happens after this virtual time; unresolved items count as unfinished.
    pub horizon: Duration,
    /// Width of one bucket of the time series.
    pub bucket: Duration,
    /// The abide policy's pacer configuration (an outbox's `[provider.pacer]`).
    pub pacer: PacerConfig,
}

#[derive(Debug)]
enum Event {
    Arrive(usize),
    Ready,
    Send(usize),
    Respond(usize, Box<Response>),
    Wake(usize),
}

#[derive(Debug)]
struct Scheduled {
    at: Duration,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    // Reversed: BinaryHeap is a max-heap and we want the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Item {
    retries: u32,
    /// Virtual time the item arrived (the start of its attempt window).
    arrived: Duration,
    done: bool,
    throttled: bool,
}

/// The policy `kind`, its clock starting at `epoch`; `pacer` configures abide's.
pub(crate) fn build(kind: PolicyKind, epoch: Instant, pacer: PacerConfig) -> Box<dyn ClientPolicy> {
    match kind {
        PolicyKind::Abide => Box::new(AbidePolicy::new(epoch, pacer)),
        PolicyKind::NoRetry => Box::new(Naive(NaiveKind::NoRetry)),
        PolicyKind::FixedRetries => Box::new(Naive(NaiveKind::Fixed)),
        PolicyKind::HonourRetryAfter => Box::new(Naive(NaiveKind::Honour)),
        PolicyKind::IntegerOnly => Box::new(Naive(NaiveKind::IntegerOnly)),
        PolicyKind::FullJitter => Box::new(Naive(NaiveKind::FullJitter)),
    }
}

/// One policy against one provider configuration.
#[derive(Debug)]
struct Sim {
    cfg: RunConfig,
    now: Duration,
    seq: u64,
    heap: BinaryHeap<Scheduled>,
    base: Instant,
    epoch: SystemTime,
    /// Arrival gaps: its own stream, so every policy faces the same arrivals for a seed.
    arrivals_rng: ChaCha8Rng,
    /// Network latency jitter.
    latency_rng: ChaCha8Rng,
    /// Handed to the policy (backoff jitter, unparseable waits).
    rng: ChaCha8Rng,
    remote: Remote,
    policy: Box<dyn ClientPolicy>,
    /// Every send and decision, when asked for ([`crate::replay`]).
    trace: Option<Vec<Traced>>,
    items: Vec<Item>,
    fresh: VecDeque<usize>,
    /// Items waiting for a retry, with the virtual time they become ready.
    delayed: BinaryHeap<std::cmp::Reverse<(Duration, usize)>>,
    idle: usize,
    result: PolicyResult,
}

/// An independent ChaCha8 stream per purpose, all derived from the one seed.
fn stream(seed: u64, purpose: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(purpose);
    rng
}

/// A script of answers: the answer to request `n` (from 0) arriving at wall time `wall`.
pub type Script = Box<dyn FnMut(usize, SystemTime) -> Response + Send>;

/// What answers the requests: the simulated provider, or a script.
pub(crate) enum Remote {
    /// The simulated provider of [`RunConfig::provider`].
    Sim(Box<Provider>),
    /// Answers from a script, with the number of requests answered so far.
    Script(Script, usize),
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Remote::Sim(p) => f.debug_tuple("Sim").field(p).finish(),
            Remote::Script(_, n) => f.debug_tuple("Script").field(n).finish(),
        }
    }
}

impl Remote {
    fn handle(&mut self, now: Duration, wall: SystemTime, item: usize) -> Response {
        match self {
            Remote::Sim(p) => p.handle(now, item),
            Remote::Script(script, n) => {
                *n += 1;
                script(*n - 1, wall)
            }
        }
    }
}

/// One event of a traced run, at virtual time since its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Traced {
    /// Item `item` was sent.
    Sent {
        /// When.
        at: Duration,
        /// Which item.
        item: usize,
    },
    /// The policy decided on an answer for `item`.
    Decided {
        /// When.
        at: Duration,
        /// Which item.
        item: usize,
        /// `delivered`, `lost`, `deferred` or `retry`.
        decision: &'static str,
        /// For a retry: the wait chosen.
        after: Option<Duration>,
    },
}

/// Run `policy` against `cfg` with `seed`: one row of a scenario table.
pub fn run(cfg: &RunConfig, policy: PolicyKind, seed: u64) -> PolicyResult {
    let remote = Remote::Sim(Box::new(Provider::new(cfg.provider.clone(), epoch())));
    run_with(cfg, policy, seed, remote, false).0
}

fn epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH_SECS)
}

/// [`run`] against `remote`, with the trace of every send and decision when `trace`.
pub(crate) fn run_with(
    cfg: &RunConfig,
    policy: PolicyKind,
    seed: u64,
    remote: Remote,
    trace: bool,
) -> (PolicyResult, Vec<Traced>) {
    let epoch = epoch();
    // Only differences between instants are observable, so any anchor will do.
    let base = ManualClock::new(epoch).monotonic();
    let mut sim = Sim {
        now: Duration::ZERO,
        seq: 0,
        heap: BinaryHeap::new(),
        base,
        epoch,
        arrivals_rng: stream(seed, 1),
        latency_rng: stream(seed, 2),
        rng: stream(seed, 3),
        remote,
        policy: build(policy, base, cfg.pacer),
        trace: trace.then(Vec::new),
        items: vec![Item::default(); cfg.items],
        fresh: VecDeque::new(),
        delayed: BinaryHeap::new(),
        idle: cfg.workers,
        result: PolicyResult::new(policy, cfg.items),
        cfg: cfg.clone(),
    };
    if cfg.items > 0 {
        sim.schedule(Duration::ZERO, Event::Arrive(0));
    }
    while let Some(Scheduled { at, event, .. }) = sim.heap.pop() {
        if at > sim.cfg.horizon {
            break;
        }
        sim.now = at;
        sim.handle(event);
        if sim.result.resolved() == sim.cfg.items {
            break;
        }
    }
    let trace = sim.trace.take().unwrap_or_default();
    (sim.finish(), trace)
}

impl Sim {
    fn schedule(&mut self, at: Duration, event: Event) {
        self.seq += 1;
        self.heap.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    fn instant(&self, at: Duration) -> Instant {
        self.base + at
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Arrive(i) => {
                self.items[i].arrived = self.now;
                self.fresh.push_back(i);
                if i + 1 < self.cfg.items {
                    let rate = schedule_at(&self.cfg.arrivals, self.now).unwrap_or(1.0);
                    // Poisson arrivals: exponential gaps with mean 1 / rate.
                    let u: f64 = self.arrivals_rng.random_range(f64::EPSILON..1.0);
                    let gap = Duration::from_secs_f64(-u.ln() / rate.max(1e-6));
                    self.schedule(self.now + gap, Event::Arrive(i + 1));
                }
                self.dispatch();
            }
            Event::Ready => self.dispatch(),
            Event::Send(i) => {
                match self.poll(i) {
                    Next::Send => {}
                    Next::At(at) => {
                        let at = at.max(self.instant(self.now)) - self.base;
                        self.schedule(at, Event::Send(i));
                        return;
                    }
                    Next::Back(after) => return self.back(i, after),
                }
                self.result.attempts += 1;
                if let Some(t) = &mut self.trace {
                    t.push(Traced::Sent {
                        at: self.now,
                        item: i,
                    });
                }
                let resp = self.remote.handle(self.now, self.epoch + self.now, i);
                if resp.is_throttle() && !self.items[i].throttled {
                    self.items[i].throttled = true;
                    self.result.throttled_items += 1;
                }
                self.result.record(self.now, &resp, self.cfg.bucket);
                let round_trip = resp.held
                    + self
                        .cfg
                        .latency
                        .mul_f64(self.latency_rng.random_range(0.6..1.4));
                if resp.status.is_success() {
                    self.result.accepted_latencies.push(round_trip);
                }
                let at = self.now + round_trip;
                self.schedule(at, Event::Respond(i, Box::new(resp)));
            }
            Event::Respond(i, resp) => self.respond(i, &resp),
            Event::Wake(i) => self.start(i),
        }
    }

    /// Hand ready items to idle workers: due retries first, then fresh arrivals.
    fn dispatch(&mut self) {
        while self.idle > 0 {
            let next = match self.delayed.peek() {
                Some(std::cmp::Reverse((at, i))) if *at <= self.now => {
                    let i = *i;
                    self.delayed.pop();
                    Some(i)
                }
                _ => self.fresh.pop_front(),
            };
            let Some(i) = next else { break };
            self.idle -= 1;
            self.start(i);
        }
    }

    fn attempt(&self, i: usize) -> Attempt {
        Attempt {
            item: i,
            retries: self.items[i].retries,
            arrived: self.epoch + self.items[i].arrived,
        }
    }

    fn poll(&mut self, i: usize) -> Next {
        let (now, wall) = (self.instant(self.now), self.epoch + self.now);
        let attempt = self.attempt(i);
        self.policy.poll(now, wall, attempt, &mut self.rng)
    }

    /// A worker holding item `i` asks the policy when it may send.
    fn start(&mut self, i: usize) {
        match self.poll(i) {
            Next::Send => self.schedule(self.now, Event::Send(i)),
            Next::At(at) => {
                let at = at.max(self.instant(self.now)) - self.base;
                self.schedule(at, Event::Send(i));
            }
            Next::Back(after) => self.back(i, after),
        }
    }

    /// Item `i` goes back to the queue unsent, due after `after`; its worker is free.
    fn back(&mut self, i: usize, after: Duration) {
        let at = self.now + after;
        self.delayed.push(std::cmp::Reverse((at, i)));
        self.schedule(at, Event::Ready);
        self.idle += 1;
        self.dispatch();
    }

    fn respond(&mut self, i: usize, resp: &Response) {
        let attempt = self.attempt(i);
        let now = self.instant(self.now);
        let wall = self.epoch + self.now;
        let decision = self.policy.decide(now, wall, resp, attempt, &mut self.rng);
        if let Some(t) = &mut self.trace {
            let (name, after) = match decision {
                Decision::Delivered => ("delivered", None),
                Decision::Lost => ("lost", None),
                Decision::Deferred => ("deferred", None),
                Decision::Retry(d) => ("retry", Some(d)),
                Decision::Unsent(d) => ("unsent", Some(d)),
            };
            t.push(Traced::Decided {
                at: self.now,
                item: i,
                decision: name,
                after,
            });
        }
        match decision {
            Decision::Retry(delay) | Decision::Unsent(delay) => {
                let item = &mut self.items[i];
                if matches!(decision, Decision::Retry(_)) {
                    item.retries += 1;
                }
                let at = self.now + delay;
                if self.policy.holds_worker() {
                    self.schedule(at, Event::Wake(i));
                    return;
                }
                self.delayed.push(std::cmp::Reverse((at, i)));
                self.schedule(at, Event::Ready);
            }
            done => {
                self.items[i].done = true;
                self.result
                    .resolve(self.now, done, resp.outcome, self.cfg.bucket);
            }
        }
        self.idle += 1;
        self.dispatch();
    }

    fn finish(mut self) -> PolicyResult {
        let limits = &self.cfg.provider.limits;
        let mut end = self.result.completion.unwrap_or(self.cfg.horizon);
        if let Some(w) = self.cfg.provider.window {
            // A fixed window's whole quota is usable as soon as the window opens.
            end = w * (bucket_of(end, w) as u32 + 1);
        }
        let capacity = capacity(limits, end);
        self.result.goodput = if capacity > 0.0 {
            self.result.delivered as f64 / capacity
        } else {
            0.0
        };
        if let Remote::Sim(p) = &self.remote {
            self.result.suspensions = p.suspensions();
            self.result.suspended_for = p.suspended_total();
        }
        self.result.unfinished = self.items.iter().filter(|i| !i.done).count();
        self.result.p99_accepted = p99(&mut self.result.accepted_latencies);
        self.result
    }
}

/// The 99th percentile (nearest rank) of `d`, sorting it; `None` when empty.
fn p99(d: &mut [Duration]) -> Option<Duration> {
    d.sort_unstable();
    let rank = (d.len() * 99).div_ceil(100);
    d.get(rank.checked_sub(1)?).copied()
}

/// Requests the limit allowed over `[0, end)`: the integral of the rate schedule.
pub(crate) fn capacity(limits: &[(Duration, f64)], end: Duration) -> f64 {
    let mut total = 0.0;
    for (k, (from, rate)) in limits.iter().enumerate() {
        let to = limits.get(k + 1).map_or(end, |(next, _)| (*next).min(end));
        if to > *from && rate.is_finite() {
            total += rate * (to - *from).as_secs_f64();
        }
    }
    total
}

/// Bucket index of virtual time `at`.
pub(crate) fn bucket_of(at: Duration, width: Duration) -> usize {
    (at.as_nanos() / width.as_nanos().max(1)) as usize
}

impl PolicyResult {
    fn record(&mut self, at: Duration, resp: &Response, width: Duration) {
        let b = self.bucket_mut(bucket_of(at, width));
        b.attempts += 1;
        if resp.is_throttle() {
            b.throttles += 1;
            self.throttles += 1;
        }
        if !resp.status.is_success() {
            self.rejections += 1;
        }
        if resp.outcome == Outcome::Suspended {
            self.blocked_answers += 1;
        }
    }

    fn bucket_mut(&mut self, idx: usize) -> &mut Bucket {
        if self.series.len() <= idx {
            self.series.resize(idx + 1, Bucket::default());
        }
        &mut self.series[idx]
    }

    fn resolve(&mut self, at: Duration, decision: Decision, outcome: Outcome, width: Duration) {
        match decision {
            Decision::Delivered if outcome == Outcome::Accepted => {
                self.delivered += 1;
                self.bucket_mut(bucket_of(at, width)).delivered += 1;
            }
            // The client took a refusal (a throttle answered 200) for an acceptance.
            Decision::Delivered => self.false_delivered += 1,
            Decision::Deferred => self.deferred += 1,
            Decision::Lost if outcome == Outcome::Bad => self.terminal_bad += 1,
            Decision::Lost => self.lost += 1,
            Decision::Retry(_) | Decision::Unsent(_) => return,
        }
        if self.resolved() == self.logical {
            self.completion = Some(at);
        }
    }
}
