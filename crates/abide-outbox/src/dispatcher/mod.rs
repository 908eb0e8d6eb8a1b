//! Delivery: per provider, one claimer feeding N senders that share one pacer and one
//! retry budget; one writer recording each request as sent before it goes and writing
//! results back, both in the same batched transactions.
//!
//! ```text
//!   store ──claim (bounded batch, lease)──▶ channel ──▶ N senders ──result──▶ writer ──▶ store
//!              ▲ waits while the provider        pacer.reserve,              one transaction
//!              │ is paused                       mark ─▶ writer (commit) ─▶  per batch of
//!                                                send, classify, decide      marks + results
//! ```
//!
//! An item's `attempts` counts requests that went on the wire: the writer commits "sent"
//! before each request (batched over the senders), a later result replaces the mark with
//! the attempts it records, and a lease reclaimed without a recorded answer is charged the
//! marks alone. A claim handed back or reclaimed unsent costs nothing.
//!
//! Why the shape: SQLite has one writer, so claims and completions are batched; a throttle
//! says the *sender* is too fast, so the pacer (and its pauses) is per provider, not per
//! item; retries draw on one budget per provider so an outage cannot turn N workers into
//! a hot loop. Nothing is dropped: a denied retry, a lost lease, a shutdown all leave the
//! item `PENDING` (or `IN_FLIGHT` until its lease expires) with the same idempotency key.

mod claim;
mod drain;
mod health;
mod inner;
mod maintain;
mod mark;
mod options;
mod preflight;
mod receipts;
mod runtime;
mod send;
mod writer;

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use abide_core::{Clock, Coordination, Local, Pacer, RetryBudget, Session};
use tokio::sync::{mpsc, watch, Mutex};
use tokio::task::JoinSet;

use crate::config::{Config, ProviderConfig};
use crate::error::Result;
use crate::model::{Enqueued, Item, NewItem};
use crate::progress::{Progress, ProviderProgress, Stats, Totals};
use crate::sleep::TokioSleeper;
use crate::store::Store;
use crate::transport::{HttpTransport, Transport, TransportStats};
#[cfg(feature = "redis")]
use abide_redis::{CoordinationTarget, RedisCoordination};
use runtime::ProviderRuntime;

pub use drain::{Ending, Feed, FeedCloser, FeedState};
#[cfg(feature = "redis")]
use preflight::credentials;
pub use preflight::preflight;
use preflight::{build_env, lease_rule};

pub use options::{DispatcherOptions, DEFAULT_UNREACHABLE_AFTER, MIN_LEASE_MARGIN};

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

use inner::{Done, Inner};

impl<S: Store> Dispatcher<S> {
    /// A dispatcher over `store` for the providers in `config`, reading time from `clock`,
    /// sending through each provider's transport (HTTP, SMPP, ...: `transport` in the
    /// providers file) with credentials from `opts.credentials` (default: the environment
    /// variables the providers file names). Nothing starts before every provider passes
    /// its preflight ([`preflight`]).
    ///
    /// # Errors
    /// [`crate::Error::HttpClient`] if the HTTP client cannot be built;
    /// [`crate::Error::Preflight`] naming the first provider that cannot send as
    /// configured; [`crate::Error::Coordination`] for an unusable `redis_url`.
    pub fn new(
        store: S,
        config: Config,
        clock: Arc<dyn Clock>,
        opts: DispatcherOptions,
    ) -> Result<Self> {
        let client =
            HttpTransport::client().map_err(|e| crate::Error::HttpClient(e.to_string()))?;
        Self::with_client(store, config, clock, opts, client)
    }

    /// Like [`Dispatcher::new`] with a caller-built HTTP client (keep redirects off) for
    /// its HTTP providers.
    ///
    /// # Errors
    /// As [`Dispatcher::new`].
    pub fn with_client(
        store: S,
        config: Config,
        clock: Arc<dyn Clock>,
        opts: DispatcherOptions,
        client: reqwest::Client,
    ) -> Result<Self> {
        let env = build_env(&opts, client, &clock);
        Self::with_transports(store, config, clock, opts, |p| {
            p.transport.settings().build(&p.name, &env)
        })
    }

    /// A dispatcher whose providers send through the transports `transport` builds, one
    /// per provider (HTTP, SMPP, a [`crate::transport::ScriptedTransport`] in tests).
    ///
    /// # Errors
    /// [`crate::Error::Preflight`] naming the first provider whose lease rule or
    /// transport preflight ([`Transport::preflight`]) fails;
    /// [`crate::Error::Coordination`] for an unusable `redis_url`.
    pub fn with_transports(
        store: S,
        config: Config,
        clock: Arc<dyn Clock>,
        opts: DispatcherOptions,
        mut transport: impl FnMut(&ProviderConfig) -> Arc<dyn Transport>,
    ) -> Result<Self> {
        for p in &config.providers {
            lease_rule(p, opts.lease)?;
        }
        let mono = clock.monotonic();
        #[cfg(feature = "redis")]
        let credentials = credentials(&opts);
        let owner = opts
            .owner
            .clone()
            .unwrap_or_else(|| format!("abide-{}", uuid::Uuid::new_v4().simple()));
        let mut providers = Vec::with_capacity(config.providers.len());
        for p in &config.providers {
            let mut rules = p.session_config();
            rules.budget_denied_delay = opts.budget_denied_delay;
            #[cfg(not(feature = "redis"))]
            let coordination: Arc<dyn Coordination> = Arc::new(Local);
            #[cfg(feature = "redis")]
            let coordination: Arc<dyn Coordination> = match &opts.redis_url {
                None => Arc::new(Local),
                Some(url) => {
                    let target = CoordinationTarget {
                        url: url.clone(),
                        prefix: opts.coordination_prefix.clone(),
                        node: owner.clone(),
                        expected_nodes: config.coordination.expected_nodes,
                    };
                    // The limit belongs to the credential: its digest is in the key.
                    let credential = p.transport.settings().account(&*credentials);
                    let c = RedisCoordination::start(
                        &target,
                        &abide_redis::limit_key(&p.name, credential.as_deref()),
                        rules.pacer.initial_rate,
                        rules.pacer.burst,
                        rules.budget,
                        Arc::clone(&clock),
                    )
                    .map_err(|e| {
                        crate::Error::Coordination(format!(
                            "redis_url {}: {}",
                            crate::echo::redact_url(url),
                            crate::echo::redact_url(&e.to_string())
                        ))
                    })?;
                    Arc::new(c)
                }
            };
            let transport = transport(p);
            transport.preflight()?;
            providers.push(Arc::new(ProviderRuntime {
                session: Arc::new(Session::with_coordination(rules, mono, coordination)),
                transport,
                stats: Stats::default(),
                suspension: std::sync::Mutex::new(None),
                cfg: p.clone(),
            }));
        }
        let sleeper = opts
            .sleeper
            .clone()
            .unwrap_or_else(|| Arc::new(TokioSleeper::new(Arc::clone(&clock))));
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                config,
                sleeper,
                opts,
                providers,
                started: mono,
                owner,
                claim_seq: AtomicU64::new(0),
                health: health::StoreHealth::default(),
                enqueued: tokio::sync::Notify::new(),
                clock,
            }),
        })
    }

    /// When results cannot be written (disk full, database read-only or unreachable): for
    /// how long, and the last database error. Nothing is claimed or sent meanwhile; a
    /// service reports itself unhealthy.
    pub fn store_fault(&self) -> Option<(Duration, String)> {
        let now = self.inner.clock.monotonic();
        self.inner
            .health
            .fault()
            .map(|(since, e)| (now.saturating_duration_since(since), e))
    }

    /// This node's id: the prefix of its lease owners, and its name among the nodes that
    /// share a provider's limit.
    pub fn node(&self) -> &str {
        &self.inner.owner
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
        self.runtime(name).map(|rt| Arc::clone(rt.session.pacer()))
    }

    /// The shared retry budget of provider `name`.
    pub fn budget(&self, name: &str) -> Option<Arc<RetryBudget>> {
        self.runtime(name).map(|rt| Arc::clone(rt.session.budget()))
    }

    /// What the transport of provider `name` has seen beyond the answers (an SMPP bind's
    /// binds, drops, timeouts, receipts); `None` for transports with nothing to add.
    pub fn transport_stats(&self, name: &str) -> Option<TransportStats> {
        self.runtime(name).and_then(|rt| rt.transport.stats())
    }

    /// The providers that will not send again this run, each with why (an SMPP bind
    /// refused for good, naming the field to fix). Their items wait, unclaimed.
    pub fn suspended(&self) -> Vec<(String, String)> {
        self.inner
            .providers
            .iter()
            .filter_map(|rt| rt.suspended().map(|why| (rt.cfg.name.clone(), why)))
            .collect()
    }

    /// The providers that have not answered once this run for
    /// [`DispatcherOptions::unreachable_after`], each with where they are reached, how
    /// long, and the last error (never a credential).
    pub fn unreachable(&self) -> Vec<(String, String)> {
        let Some(limit) = self.inner.opts.unreachable_after else {
            return Vec::new();
        };
        let now = self.inner.clock.monotonic();
        self.inner
            .providers
            .iter()
            .filter_map(|rt| {
                let for_ = rt.stats.never_answered_for(now).filter(|d| *d >= limit)?;
                let error = rt
                    .transport
                    .last_failure()
                    .unwrap_or_else(|| "no answer".into());
                Some((
                    rt.cfg.name.clone(),
                    format!(
                        "{} has not answered once in {} s: {error}",
                        rt.cfg.transport.settings().endpoint(),
                        for_.as_secs()
                    ),
                ))
            })
            .collect()
    }

    /// Say goodbye to every provider (SMPP: `unbind`, waiting up to its `pdu_timeout`).
    /// Call it once, after the last run; later sends fail as connection failures.
    pub async fn close(&self) {
        for rt in &self.inner.providers {
            rt.transport.close().await;
        }
    }

    fn runtime(&self, name: &str) -> Option<&Arc<ProviderRuntime>> {
        self.inner.providers.iter().find(|rt| rt.cfg.name == name)
    }

    /// Validate every item against the configuration, then enqueue them all in one
    /// transaction (see [`Store::enqueue`]).
    ///
    /// # Errors
    /// [`crate::Error::UnknownProvider`] or [`crate::Error::InvalidRequest`] for the first
    /// bad item, [`crate::Error::KeyConflict`] for a known key given with a different
    /// message (nothing is stored), database errors.
    pub async fn enqueue(&self, items: &[NewItem]) -> Result<Vec<Enqueued>> {
        for it in items {
            self.inner.config.check_item(it)?;
        }
        let done = self
            .inner
            .store
            .enqueue(items, self.inner.clock.now())
            .await?;
        self.inner.enqueued.notify_waiters();
        Ok(done)
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
        let receipts = inner.store.receipt_counts(None).await?;
        let mut providers = Vec::with_capacity(inner.providers.len());
        let mut totals = Totals::default();
        for rt in &inner.providers {
            let t = rt.stats.totals();
            add_totals(&mut totals, &t);
            let pacer = rt.session.pacer();
            providers.push(ProviderProgress {
                taken_at: now,
                name: rt.cfg.name.clone(),
                rate: pacer.rate(),
                target_rate: pacer.target(),
                ceiling: pacer.ceiling(),
                advertised_rate: pacer.target().map(|t| t / pacer.config().headroom),
                paused_for: pacer.paused_until(mono).map(|u| u - mono),
                throttle_rate: pacer.throttle_rate(mono),
                last_pause: rt.stats.last_pause(),
                sunset: rt.stats.sunset(),
                limited_by_concurrency: t.on_wire >= rt.cfg.concurrency() as u64
                    && pacer.next_slot(mono) <= mono,
                concurrency: rt.cfg.concurrency(),
                slots: pacer.slot_counts(),
                host_in_flight: rt.session.in_flight(),
                coordination: {
                    let mut c = rt.session.coordination().status(pacer, mono);
                    c.node.clone_from(&inner.owner);
                    c
                },
                counts: inner.store.counts_by_state(Some(&rt.cfg.name)).await?,
                receipts: inner.store.receipt_counts(Some(&rt.cfg.name)).await?,
                transport: rt.transport.stats(),
                suspended: rt.suspended(),
                totals: t,
            });
        }
        Ok(Progress {
            counts,
            receipts,
            totals,
            providers,
            elapsed: mono.saturating_duration_since(inner.started),
            oldest_pending_age: inner.store.oldest_pending_age(now).await?,
        })
    }

    /// Deliver until `shutdown` resolves, then stop claiming, hand unsent claimed items
    /// back (`PENDING`, due at once), wait for requests on the wire, write every result,
    /// and return the final [`Progress`].
    ///
    /// # Errors
    /// [`crate::Error::ResultsNotRecorded`] when results could not be written for
    /// `store_fault_limit` (the run stopped itself); database errors from the final
    /// snapshot.
    ///
    /// # Cancel safety
    /// Dropping the future aborts the workers; claimed items then wait for their lease to
    /// expire and are retried with the same idempotency key.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()> + Send) -> Result<Progress> {
        self.run(shutdown, true).await
    }

    /// [`Dispatcher::run_until`]; with `interrupts`, `shutdown` also ends the waits for a
    /// database that refuses writes (the caller's stop, not the end of a drained run).
    pub(super) async fn run(
        &self,
        shutdown: impl Future<Output = ()> + Send,
        interrupts: bool,
    ) -> Result<Progress> {
        self.inner.health.start();
        let (stop_tx, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = mpsc::channel::<Done>(4096);
        let (mark_tx, mark_rx) = mpsc::channel::<mark::MarkRequest>(1024);
        let mut workers = JoinSet::new();
        for (idx, rt) in self.inner.providers.iter().enumerate() {
            let cap = (rt.cfg.concurrency() * 2).max(self.inner.opts.claim_batch.min(256));
            let (item_tx, item_rx) = mpsc::channel::<Item>(cap);
            let item_rx = Arc::new(Mutex::new(item_rx));
            if let Some(inbox) = rt.transport.receipts() {
                workers.spawn(receipts::recorder(
                    Arc::clone(&self.inner),
                    Arc::clone(rt),
                    inbox,
                    stop_rx.clone(),
                ));
            }
            workers.spawn(claim::claimer(
                Arc::clone(&self.inner),
                Arc::clone(rt),
                item_tx,
                stop_rx.clone(),
            ));
            for w in 0..rt.cfg.concurrency() {
                let seed = self
                    .inner
                    .opts
                    .seed
                    .map(|s| s ^ ((idx as u64) << 32 | w as u64));
                workers.spawn(send::sender(
                    Arc::clone(&self.inner),
                    idx,
                    Arc::clone(rt),
                    send::Channels {
                        items: Arc::clone(&item_rx),
                        marks: mark_tx.clone(),
                        done: done_tx.clone(),
                    },
                    stop_rx.clone(),
                    seed,
                ));
            }
        }
        drop(done_tx);
        drop(mark_tx);
        let writer = tokio::spawn(writer::writer(Arc::clone(&self.inner), mark_rx, done_rx));
        let maintenance = tokio::spawn(maintain::maintenance(
            Arc::clone(&self.inner),
            stop_rx.clone(),
        ));

        tokio::select! {
            () = shutdown => {
                if interrupts {
                    self.inner.health.stop();
                }
            }
            () = self.inner.health.fatal.notified() => {}
        }
        let _ = stop_tx.send(true);
        while workers.join_next().await.is_some() {}
        let _ = writer.await;
        let _ = maintenance.await;
        if let Some((lasted, cause, interrupted)) = self.inner.health.gave_up() {
            return Err(crate::Error::ResultsNotRecorded {
                seconds: lasted.as_secs(),
                cause,
                interrupted,
            });
        }
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
    sum.transport_failures += t.transport_failures;
}
