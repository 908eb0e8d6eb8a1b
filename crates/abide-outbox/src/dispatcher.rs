//! Delivery: per provider, one claimer feeding N senders that share one pacer and one
//! retry budget; one completer writing results back in batches.
//!
//! ```text
//!   store ──claim (bounded batch, lease)──▶ channel ──▶ N senders ──▶ completer ──▶ store
//!              ▲ waits while the provider        pacer.reserve, send,       one transaction
//!              │ is paused                       classify, decide           per batch
//! ```
//!
//! Why the shape: SQLite has one writer, so claims and completions are batched; a throttle
//! says the *sender* is too fast, so the pacer (and its pauses) is per provider, not per
//! item; retries draw on one budget per provider so an outage cannot turn N workers into
//! a hot loop. Nothing is dropped: a denied retry, a lost lease, a shutdown all leave the
//! item `PENDING` (or `IN_FLIGHT` until its lease expires) with the same idempotency key.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use abide_core::{Clock, Pacer, PacerConfig, RetryBudget, VerdictClass};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::{mpsc, watch, Mutex};
use tokio::task::JoinSet;

use crate::config::Config;
use crate::error::Result;
use crate::model::{AttemptRecord, Completion, Enqueued, Item, NewItem, Outcome};
use crate::progress::{Progress, ProviderProgress, Stats, Totals};
use crate::sleep::{Sleeper, TokioSleeper};
use crate::state::State;
use crate::store::Store;
use crate::worker::{self, BudgetRole, DecideInput, ProviderRuntime};

/// How much longer than a provider's request timeout the lease must be: an attempt that
/// runs to its timeout still completes (and writes its result) before the lease ends and
/// another worker could take the item and send it again.
pub const MIN_LEASE_MARGIN: Duration = Duration::from_secs(2);

/// Tuning of a [`Dispatcher`].
///
/// # Default
/// - `lease`: 60 s (a claimed item not completed by then is reclaimed as `PENDING`)
/// - `claim_batch`: 256 items per claim (never more than the pace can send within a
///   quarter of the lease)
/// - `idle_poll`: 500 ms (longest idle sleep before looking for new items)
/// - `maintenance_interval`: 1 s (lease reclaim, maximum age, fail-over, drain check)
/// - `budget_denied_delay`: 5 s (minimum wait of a retry the budget refused)
/// - `max_response_body`: 64 KiB read from each response, the rest discarded
/// - `seed`: `None` (jitter from the OS RNG); set it for reproducible schedules
/// - `sleeper`: `None` = [`TokioSleeper`] on the dispatcher's clock
#[derive(Debug, Clone)]
pub struct DispatcherOptions {
    /// Lease on claimed items; at least every provider's `timeout` + [`MIN_LEASE_MARGIN`].
    pub lease: Duration,
    /// Most items per claim.
    pub claim_batch: usize,
    /// Longest idle sleep.
    pub idle_poll: Duration,
    /// Period of the maintenance sweep.
    pub maintenance_interval: Duration,
    /// Minimum delay of a retry refused by the retry budget.
    pub budget_denied_delay: Duration,
    /// Bytes of each response body read before the rest is dropped.
    pub max_response_body: usize,
    /// Seed for jitter.
    pub seed: Option<u64>,
    /// How to wait.
    pub sleeper: Option<Arc<dyn Sleeper>>,
    /// Prefix of lease owners (default `abide-<uuid>`); must be unique per process.
    pub owner: Option<String>,
}

impl Default for DispatcherOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            claim_batch: 256,
            idle_poll: Duration::from_millis(500),
            maintenance_interval: Duration::from_secs(1),
            budget_denied_delay: Duration::from_secs(5),
            max_response_body: 64 * 1024,
            seed: None,
            sleeper: None,
            owner: None,
        }
    }
}

/// Delivers the items of a [`Store`] to the configured providers.
///
/// # Clone
/// Clones share everything (store, pacers, budgets, counters): run it in one task and
/// call [`Dispatcher::progress`] or [`Dispatcher::enqueue`] from another.
#[derive(Debug)]
pub struct Dispatcher<S: Store> {
    inner: Arc<Inner<S>>,
}

impl<S: Store> Clone for Dispatcher<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

#[derive(Debug)]
struct Inner<S> {
    store: S,
    config: Config,
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    opts: DispatcherOptions,
    providers: Vec<Arc<ProviderRuntime>>,
    client: reqwest::Client,
    started: Instant,
    owner: String,
    claim_seq: AtomicU64,
}

/// A completion on its way to the store, with the provider it counts for.
type Done = (usize, Completion);

impl<S: Store> Dispatcher<S> {
    /// A dispatcher over `store` for the providers in `config`, reading time from `clock`.
    /// Credentials are read from the environment now (and again once after a 401).
    ///
    /// # Errors
    /// [`crate::Error::Config`] if the HTTP client cannot be built, or naming the first
    /// provider whose request timeout + [`MIN_LEASE_MARGIN`] exceeds `opts.lease`.
    pub fn new(
        store: S,
        config: Config,
        clock: Arc<dyn Clock>,
        opts: DispatcherOptions,
    ) -> Result<Self> {
        let client = reqwest::Client::builder()
            // A redirect could lead anywhere; items may only reach their provider.
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(256)
            .build()
            .map_err(|e| crate::Error::Config {
                provider: "<all>".into(),
                field: "http client".into(),
                message: e.to_string(),
            })?;
        Self::with_client(store, config, clock, opts, client)
    }

    /// Like [`Dispatcher::new`] with a caller-built HTTP client (keep redirects off).
    ///
    /// # Errors
    /// [`crate::Error::Config`] naming the first provider whose request timeout +
    /// [`MIN_LEASE_MARGIN`] exceeds `opts.lease`.
    pub fn with_client(
        store: S,
        config: Config,
        clock: Arc<dyn Clock>,
        opts: DispatcherOptions,
        client: reqwest::Client,
    ) -> Result<Self> {
        // A lease that ends while the request may still be on the wire lets a second
        // worker send the item again while the first is still waiting for its answer.
        for p in &config.providers {
            let least = p.timeout + MIN_LEASE_MARGIN;
            if opts.lease < least {
                return Err(crate::Error::Config {
                    provider: p.name.clone(),
                    field: "timeout_secs".into(),
                    message: format!(
                        "the lease ({:?}) must be at least the request timeout ({:?}) + {:?}; \
                         lengthen the lease or shorten the timeout",
                        opts.lease, p.timeout, MIN_LEASE_MARGIN
                    ),
                });
            }
        }
        let mono = clock.monotonic();
        let providers = config
            .providers
            .iter()
            .map(|p| {
                let pacer = Pacer::new(
                    PacerConfig {
                        initial_rate: p.rate_hint,
                        // A hint above the default ceiling would otherwise be clamped to it.
                        max_rate: p.rate_hint.max(PacerConfig::default().max_rate),
                        headroom: p.pacer.headroom,
                        throttle_pause: p.pacer.throttle_pause,
                        max_throttle_pause: p.pacer.max_throttle_pause,
                        ..PacerConfig::default()
                    },
                    mono,
                );
                Arc::new(ProviderRuntime {
                    pacer: Arc::new(pacer),
                    budget: Arc::new(RetryBudget::new(p.budget, mono)),
                    classifier: p.classifier(),
                    token: RwLock::new(p.read_credentials()),
                    stats: Stats::default(),
                    cfg: p.clone(),
                })
            })
            .collect();
        let sleeper = opts
            .sleeper
            .clone()
            .unwrap_or_else(|| Arc::new(TokioSleeper::new(Arc::clone(&clock))));
        let owner = opts
            .owner
            .clone()
            .unwrap_or_else(|| format!("abide-{}", uuid::Uuid::new_v4().simple()));
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                config,
                sleeper,
                opts,
                providers,
                client,
                started: mono,
                owner,
                claim_seq: AtomicU64::new(0),
                clock,
            }),
        })
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The shared pacer of provider `name`.
    pub fn pacer(&self, name: &str) -> Option<Arc<Pacer>> {
        self.runtime(name).map(|rt| Arc::clone(&rt.pacer))
    }

    /// The shared retry budget of provider `name`.
    pub fn budget(&self, name: &str) -> Option<Arc<RetryBudget>> {
        self.runtime(name).map(|rt| Arc::clone(&rt.budget))
    }

    fn runtime(&self, name: &str) -> Option<&Arc<ProviderRuntime>> {
        self.inner.providers.iter().find(|rt| rt.cfg.name == name)
    }

    /// Validate every item against the configuration, then enqueue them all in one
    /// transaction (see [`Store::enqueue`]).
    ///
    /// # Errors
    /// [`crate::Error::UnknownProvider`] or [`crate::Error::InvalidRequest`] for the first
    /// bad item (nothing is stored), database errors.
    pub async fn enqueue(&self, items: &[NewItem]) -> Result<Vec<Enqueued>> {
        for it in items {
            self.inner.config.check_item(it)?;
        }
        self.inner
            .store
            .enqueue(items, self.inner.clock.now())
            .await
    }

    /// This dispatcher's counters over all providers, without touching the store: cheap
    /// enough to poll every few milliseconds (a live display, a benchmark's stop
    /// condition). `delivered` counts results already committed to the store.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for rt in &self.inner.providers {
            add_totals(&mut totals, &rt.stats.totals());
        }
        totals
    }

    /// A live snapshot: store counts plus this dispatcher's counters and pacer states.
    ///
    /// # Errors
    /// Database errors.
    pub async fn progress(&self) -> Result<Progress> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let mono = inner.clock.monotonic();
        let counts = inner.store.counts_by_state(None).await?;
        let mut providers = Vec::with_capacity(inner.providers.len());
        let mut totals = Totals::default();
        for rt in &inner.providers {
            let t = rt.stats.totals();
            add_totals(&mut totals, &t);
            providers.push(ProviderProgress {
                name: rt.cfg.name.clone(),
                rate: rt.pacer.rate(),
                target_rate: rt.pacer.target(),
                paused_for: rt.pacer.paused_until(mono).map(|u| u - mono),
                throttle_rate: rt.pacer.throttle_rate(mono),
                counts: inner.store.counts_by_state(Some(&rt.cfg.name)).await?,
                totals: t,
            });
        }
        Ok(Progress {
            counts,
            totals,
            providers,
            elapsed: mono.saturating_duration_since(inner.started),
            oldest_pending_age: inner.store.oldest_pending_age(now).await?,
        })
    }

    /// Deliver until no item of a configured provider is `QUEUED`, `IN_FLIGHT` or
    /// `PENDING` (deferred and failed items do not keep it running), then return the
    /// final [`Progress`].
    ///
    /// # Errors
    /// Database errors from the final snapshot; errors during the run are logged and
    /// retried, never fatal.
    pub async fn run_until_drained(&self) -> Result<Progress> {
        let this = self.clone();
        self.run_forever(async move {
            loop {
                let deadline = this.inner.clock.monotonic() + this.inner.opts.maintenance_interval;
                this.inner.sleeper.sleep_until(deadline).await;
                if this.drained().await.unwrap_or(false) {
                    return;
                }
            }
        })
        .await
    }

    async fn drained(&self) -> Result<bool> {
        for rt in &self.inner.providers {
            if self.inner.store.has_active(&rt.cfg.name).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Deliver until `shutdown` resolves, then stop claiming, hand unsent claimed items
    /// back (`PENDING`, due at once), wait for requests on the wire, write every result,
    /// and return the final [`Progress`].
    ///
    /// # Errors
    /// Database errors from the final snapshot.
    ///
    /// # Cancel safety
    /// Dropping the future aborts the workers; claimed items then wait for their lease to
    /// expire and are retried with the same idempotency key.
    pub async fn run_forever(&self, shutdown: impl Future<Output = ()> + Send) -> Result<Progress> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = mpsc::channel::<Done>(4096);
        let mut workers = JoinSet::new();
        for (idx, rt) in self.inner.providers.iter().enumerate() {
            let cap = (rt.cfg.concurrency * 2).max(self.inner.opts.claim_batch.min(256));
            let (item_tx, item_rx) = mpsc::channel::<Item>(cap);
            let item_rx = Arc::new(Mutex::new(item_rx));
            workers.spawn(claimer(
                Arc::clone(&self.inner),
                Arc::clone(rt),
                item_tx,
                stop_rx.clone(),
            ));
            for w in 0..rt.cfg.concurrency {
                let seed = self
                    .inner
                    .opts
                    .seed
                    .map(|s| s ^ ((idx as u64) << 32 | w as u64));
                workers.spawn(sender(
                    Arc::clone(&self.inner),
                    idx,
                    Arc::clone(rt),
                    Arc::clone(&item_rx),
                    done_tx.clone(),
                    stop_rx.clone(),
                    seed,
                ));
            }
        }
        drop(done_tx);
        let completer = tokio::spawn(completer(Arc::clone(&self.inner), done_rx));
        let maintenance = tokio::spawn(maintenance(Arc::clone(&self.inner), stop_rx.clone()));

        shutdown.await;
        let _ = stop_tx.send(true);
        while workers.join_next().await.is_some() {}
        let _ = completer.await;
        let _ = maintenance.await;
        self.progress().await
    }
}

fn add_totals(sum: &mut Totals, t: &Totals) {
    sum.attempts += t.attempts;
    sum.delivered += t.delivered;
    sum.throttled += t.throttled;
    sum.retries_scheduled += t.retries_scheduled;
    sum.terminal_failures += t.terminal_failures;
    sum.deferred += t.deferred;
    sum.budget_denied += t.budget_denied;
    sum.credential_refreshes += t.credential_refreshes;
    sum.lease_returns += t.lease_returns;
    sum.in_flight += t.in_flight;
    sum.on_wire += t.on_wire;
}

/// Sleep until `deadline` or until stopped; true when stopped.
async fn sleep_or_stop<S>(
    inner: &Inner<S>,
    deadline: Instant,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        () = inner.sleeper.sleep_until(deadline) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

/// Claims batches for one provider while there is room in its channel.
async fn claimer<S: Store>(
    inner: Arc<Inner<S>>,
    rt: Arc<ProviderRuntime>,
    tx: mpsc::Sender<Item>,
    mut stop: watch::Receiver<bool>,
) {
    let lease = inner.opts.lease;
    loop {
        if *stop.borrow() {
            return;
        }
        let mono = inner.clock.monotonic();
        // While the provider is paused, claiming would only run leases down.
        if let Some(until) = rt.pacer.paused_until(mono) {
            if sleep_or_stop(&inner, until, &mut stop).await {
                return;
            }
            continue;
        }
        let permit = tokio::select! {
            p = tx.reserve() => match p { Ok(p) => p, Err(_) => return },
            _ = stop.changed() => return,
        };
        drop(permit);
        let free = tx.capacity();
        let backlog = tx.max_capacity() - free;
        // Claim no more than can be sent well within the lease at the current pace.
        let sendable = (rt.pacer.rate() * lease.as_secs_f64() / 4.0).floor() as usize;
        let limit = free
            .min(inner.opts.claim_batch)
            .min(sendable.max(1).saturating_sub(backlog));
        if limit == 0 {
            let wait = Duration::from_secs_f64((1.0 / rt.pacer.rate()).clamp(0.001, 1.0));
            if sleep_or_stop(&inner, mono + wait, &mut stop).await {
                return;
            }
            continue;
        }
        let now = inner.clock.now();
        let owner = format!(
            "{}#{}",
            inner.owner,
            inner.claim_seq.fetch_add(1, Ordering::Relaxed)
        );
        match inner
            .store
            .claim(&rt.cfg.name, &owner, now, lease, limit)
            .await
        {
            Ok(items) if !items.is_empty() => {
                rt.stats
                    .in_flight
                    .fetch_add(items.len() as u64, Ordering::Relaxed);
                for it in items {
                    if tx.send(it).await.is_err() {
                        return;
                    }
                }
            }
            Ok(_) => {
                let next = inner.store.next_due(&rt.cfg.name).await.ok().flatten();
                let idle = inner.opts.idle_poll;
                let wait = next.map_or(idle, |t| {
                    t.duration_since(now).unwrap_or_default().min(idle)
                });
                let wait = wait.max(Duration::from_millis(1));
                if sleep_or_stop(&inner, mono + wait, &mut stop).await {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(provider = %rt.cfg.name, error = %e, "claim failed; retrying");
                if sleep_or_stop(&inner, mono + Duration::from_secs(1), &mut stop).await {
                    return;
                }
            }
        }
    }
}

/// Sends claimed items of one provider, one at a time.
async fn sender<S: Store>(
    inner: Arc<Inner<S>>,
    idx: usize,
    rt: Arc<ProviderRuntime>,
    rx: Arc<Mutex<mpsc::Receiver<Item>>>,
    done: mpsc::Sender<Done>,
    mut stop: watch::Receiver<bool>,
    seed: Option<u64>,
) {
    let mut rng = match seed {
        Some(s) => StdRng::seed_from_u64(s),
        None => StdRng::from_os_rng(),
    };
    loop {
        // Claimers exit on stop and drop the channel's sender, so this drains and ends.
        let item = { rx.lock().await.recv().await };
        let Some(item) = item else { return };
        let c = attempt(&inner, &rt, item, &mut stop, &mut rng).await;
        if done.send((idx, c)).await.is_err() {
            return;
        }
    }
}

/// Longest provider pause a sender waits through while holding a claimed item; a longer
/// one hands the item back (`PENDING`, due at the pause's end).
const HOLD_THROUGH_PAUSE: Duration = Duration::from_secs(2);

/// Counts one request on the wire while it lives (dropped with an aborted task too).
struct OnWire<'a>(&'a AtomicU64);

impl<'a> OnWire<'a> {
    fn new(c: &'a AtomicU64) -> Self {
        c.fetch_add(1, Ordering::Relaxed);
        Self(c)
    }
}

impl Drop for OnWire<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Hand a claimed item back unsent: `PENDING`, due at `when`, no attempt recorded.
///
/// An item whose next attempt spends no retry budget (reclaimed, failed over) keeps the
/// reason that says so, unless the budget itself refused it: a shutdown must not turn a
/// resumed item into a retry, nor a retry into a free one.
fn hand_back(rt: &ProviderRuntime, item: &Item, when: SystemTime, reason: &str) -> Completion {
    Stats::bump(&rt.stats.lease_returns);
    let reason = match (&item.reason, worker::budget_role(item)) {
        (Some(kept), BudgetRole::Resume | BudgetRole::First) if item.attempts > 0 => kept.clone(),
        _ => reason.to_owned(),
    };
    Completion {
        id: item.id.clone(),
        lease_owner: item.lease_owner.clone().unwrap_or_default(),
        outcome: Outcome::Retry {
            next_attempt_at: when,
            reason,
        },
        attempts: Vec::new(),
        last_provider_code: None,
    }
}

/// Pace, send (and re-send once after refreshing credentials), classify and decide.
async fn attempt<S: Store>(
    inner: &Inner<S>,
    rt: &ProviderRuntime,
    item: Item,
    stop: &mut watch::Receiver<bool>,
    rng: &mut StdRng,
) -> Completion {
    let mut records: Vec<AttemptRecord> = Vec::new();
    let mut refreshed = false;
    // When this lease's retry was withdrawn from the budget (refunded if it succeeds).
    let mut withdrawn_at: Option<Instant> = None;
    loop {
        if *stop.borrow() {
            return hand_back(rt, &item, inner.clock.now(), "shutdown");
        }
        // Wait for a send slot; a pause that began while we waited voids it (`admit`).
        let mut rounds = 0;
        let reserved_at = loop {
            let mono = inner.clock.monotonic();
            // A long pause (a suspension backing off, a long `Retry-After`): do not hold the
            // item through it under a lease, where fail-over and other dispatchers cannot
            // see it. It waits `PENDING`, due when the pause ends.
            if let Some(until) = rt.pacer.paused_until(mono) {
                let left = until - mono;
                if left > HOLD_THROUGH_PAUSE {
                    return hand_back(rt, &item, inner.clock.now() + left, "provider_paused");
                }
            }
            let at = rt.pacer.reserve(mono);
            if sleep_or_stop(inner, at, stop).await {
                return hand_back(rt, &item, inner.clock.now(), "shutdown");
            }
            match rt.pacer.admit(inner.clock.monotonic()) {
                Ok(()) => break mono,
                // Paused again and again while holding the item: give it back, due when
                // the pause ends, rather than keep it from other dispatchers (and never
                // send into a pause).
                Err(until) if rounds >= 16 => {
                    let left = until.saturating_duration_since(inner.clock.monotonic());
                    let when = inner.clock.now() + left;
                    return hand_back(rt, &item, when, "provider_paused");
                }
                Err(_) => rounds += 1,
            }
        };
        let now = inner.clock.now();
        let mono = inner.clock.monotonic();
        // Too close to the lease's end: another worker may soon own it. Give it back.
        let margin = rt.cfg.timeout + Duration::from_secs(1);
        if item.lease_expires_at.is_some_and(|exp| now + margin >= exp) {
            return hand_back(rt, &item, now, "lease_near_expiry");
        }
        if records.is_empty() {
            // A first attempt on this provider (new, or just failed over to it) earns
            // budget; a retry of a remote failure must draw on it; a resumed attempt
            // (reclaimed lease) does neither ([`BudgetRole`]).
            match worker::budget_role(&item) {
                BudgetRole::First => rt.budget.deposit(mono),
                BudgetRole::Resume => {}
                BudgetRole::Retry if rt.budget.try_withdraw(mono) => withdrawn_at = Some(mono),
                BudgetRole::Retry => {
                    // Budget exhaustion never drops work: the item waits longer.
                    Stats::bump(&rt.stats.budget_denied);
                    let backoff =
                        rt.cfg
                            .retry
                            .backoff
                            .delay(item.window_attempts.max(1), None, rng);
                    let wait = backoff.max(inner.opts.budget_denied_delay);
                    return hand_back(rt, &item, now + wait, "retry_budget_exhausted");
                }
            }
        }

        let sent_at = inner.clock.monotonic();
        let wire = OnWire::new(&rt.stats.on_wire);
        let response = worker::send(&inner.client, rt, &item, inner.opts.max_response_body).await;
        drop(wire);
        let latency = inner.clock.monotonic().saturating_duration_since(sent_at);
        let now = inner.clock.now();
        let mono = inner.clock.monotonic();
        let mut verdict = response.classify(&rt.classifier, now, rng);
        if !rt.cfg.pacer.use_rate_limit_headers {
            // Told not to trust them: the pacer learns from throttles alone.
            verdict.rate_limit = None;
        }
        // The reservation time tells the pacer whether this answer is news about its
        // current rate or an echo of a round it already cut.
        rt.pacer.on_verdict_for(mono, reserved_at, &verdict);
        if verdict.class == VerdictClass::Success {
            // A retry that succeeded added no failing traffic: it pays for the next one
            // (abide_core::budget, "Recovery").
            if let Some(at) = withdrawn_at.take() {
                rt.budget.refund(at);
            }
        }
        Stats::bump(&rt.stats.attempts);
        if verdict.class == VerdictClass::Throttle {
            Stats::bump(&rt.stats.throttled);
        }
        if verdict.class == VerdictClass::Unknown {
            tracing::warn!(provider = %rt.cfg.name, item = %item.id, reason = %verdict.reason,
                "unrecognised response; retrying with a low attempt cap");
        }
        let mut record = AttemptRecord {
            at: now,
            provider: rt.cfg.name.clone(),
            remote: response.remote(),
            verdict_class: verdict.class.as_str().to_owned(),
            delay: None,
            delay_reason: None,
            latency,
        };

        if verdict.class == VerdictClass::RefreshCredentials && !refreshed {
            refreshed = true;
            Stats::bump(&rt.stats.credential_refreshes);
            rt.refresh_token();
            records.push(record);
            continue;
        }

        let made = u32::try_from(records.len() + 1).unwrap_or(u32::MAX);
        let pause_left = rt.pacer.paused_until(mono).map(|u| u - mono);
        let input = DecideInput {
            cfg: &rt.cfg,
            item: &item,
            made,
            now,
            pause_left,
        };
        let (outcome, delay) = worker::decide(input, &verdict, &rt.classifier, rng);
        if let Some(d) = &delay {
            record.delay = Some(d.delay);
            record.delay_reason = Some(worker::delay_reason_str(d.reason).to_owned());
            if let Some(raw) = &d.raw {
                tracing::debug!(provider = %rt.cfg.name, raw = %raw, delay_ms = d.delay.as_millis() as u64,
                    "Retry-After");
            }
        }
        let code = record.remote.to_string();
        records.push(record);
        return Completion {
            id: item.id.clone(),
            lease_owner: item.lease_owner.clone().unwrap_or_default(),
            outcome,
            attempts: records,
            last_provider_code: Some(code),
        };
    }
}

/// Writes completions in batches (one transaction each) and counts what was stored.
async fn completer<S: Store>(inner: Arc<Inner<S>>, mut rx: mpsc::Receiver<Done>) {
    const MAX_BATCH: usize = 512;
    let mut batch: Vec<Done> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(d) => batch.push(d),
                Err(_) => break,
            }
        }
        let completions: Vec<Completion> = batch.iter().map(|(_, c)| c.clone()).collect();
        let mut tries = 0;
        let results = loop {
            match inner.store.complete(&completions, inner.clock.now()).await {
                Ok(r) => break Some(r),
                Err(e) if tries < 5 => {
                    tries += 1;
                    tracing::warn!(error = %e, "writing results failed; retrying");
                    let at = inner.clock.monotonic() + Duration::from_millis(200 * tries);
                    inner.sleeper.sleep_until(at).await;
                }
                Err(e) => {
                    // The leases will expire and the items be retried with the same
                    // idempotency keys: nothing is lost, at worst re-sent and deduplicated.
                    tracing::error!(error = %e, items = completions.len(),
                        "could not write results; items will be retried after their lease");
                    break None;
                }
            }
        };
        for (i, (idx, c)) in batch.drain(..).enumerate() {
            let rt = &inner.providers[idx];
            rt.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
            let Some(results) = &results else { continue };
            match &results[i] {
                Ok(State::Submitted) => Stats::bump(&rt.stats.delivered),
                Ok(State::Failed) => Stats::bump(&rt.stats.terminal_failures),
                Ok(State::Deferred) => Stats::bump(&rt.stats.deferred),
                Ok(State::Pending) if !c.attempts.is_empty() => {
                    Stats::bump(&rt.stats.retries_scheduled)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(item = %c.id, error = %e, "result refused by the store"),
            }
        }
    }
}

/// Periodic sweeps: reclaim expired leases, defer items past their maximum age, fail over.
async fn maintenance<S: Store>(inner: Arc<Inner<S>>, mut stop: watch::Receiver<bool>) {
    loop {
        let now = inner.clock.now();
        if let Err(e) = inner.store.reclaim_expired(now).await {
            tracing::warn!(error = %e, "lease reclaim failed");
        }
        for rt in &inner.providers {
            let cfg = &rt.cfg;
            if let Some(cut) = now.checked_sub(cfg.retry.max_age) {
                let reason = format!("maximum age {}s reached", cfg.retry.max_age.as_secs());
                if let Err(e) = inner
                    .store
                    .defer_older_than(&cfg.name, cut, &reason, now)
                    .await
                {
                    tracing::warn!(provider = %cfg.name, error = %e, "deferral sweep failed");
                }
            }
            if let Some(f) = &cfg.failover {
                if let Some(cut) = now.checked_sub(f.after_pending) {
                    match inner.store.fail_over(&cfg.name, &f.to, cut, now).await {
                        Ok(0) => {}
                        Ok(n) => {
                            tracing::info!(from = %cfg.name, to = %f.to, items = n, "failed over")
                        }
                        Err(e) => {
                            tracing::warn!(provider = %cfg.name, error = %e, "fail-over failed")
                        }
                    }
                }
            }
        }
        let next = inner.clock.monotonic() + inner.opts.maintenance_interval;
        if sleep_or_stop(&inner, next, &mut stop).await {
            return;
        }
    }
}
