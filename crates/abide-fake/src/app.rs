//! [`App`]: the fake provider's state shared by the HTTP and SMPP sides: its configuration,
//! gates, keys, counters and the answers it remembers.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use abide_core::Clock;
use abide_gate::{BearerKeys, Gate, GateSet, RateQuota, Scope};

use crate::config::{Behaviour, GateMode, Rate};
use crate::noise::Picker;
use crate::smpp::stats::SmppStats;
use crate::stats::{KeyCounts, Stats, StatsSnapshot};
use crate::{Error, ProviderConfig};

/// Idempotency answers remembered (oldest forgotten first).
pub(crate) const IDEMPOTENCY_MEMORY: usize = 100_000;

/// Throttled idempotency keys remembered for a grace pass; when full, the set is cleared
/// (those retries are then judged by the limits again).
pub(crate) const GRACE_MEMORY: usize = 100_000;

/// Reads the SMPP listener's counters at the moment of a `/_stats` answer.
pub(crate) type SmppStatsReader = Arc<dyn Fn() -> SmppStats + Send + Sync>;

pub(crate) struct App {
    pub(crate) cfg: ProviderConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) start: Instant,
    pub(crate) gates: Arc<GateSet>,
    pub(crate) keys: BearerKeys,
    /// The same gates shared through Redis (`--redis`); `None`: in memory.
    pub(crate) redis: Option<abide_gate::RedisGates>,
    /// The SMPP listener's counters, when it runs (they join `/_stats`): a reader, so
    /// that the SMPP side, which holds an `App`, is not held here.
    pub(crate) smpp_stats: Option<SmppStatsReader>,
    inner: Mutex<Inner>,
}

impl fmt::Debug for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("App")
            .field("cfg", &self.cfg)
            .field("gates", &self.gates)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) stats: Stats,
    pub(crate) seq: u64,
    /// (API key, idempotency key) -> message id.
    pub(crate) answers: HashMap<(String, String), String>,
    pub(crate) answer_order: VecDeque<(String, String)>,
    /// Throttled during grace: the next attempt is let through.
    pub(crate) grace_pending: HashSet<(String, String)>,
    /// Recent limit rejections per API key.
    pub(crate) abuse: HashMap<String, VecDeque<Instant>>,
    pub(crate) suspended: HashMap<String, Instant>,
    pub(crate) acc_503: f64,
    /// Which requests are refused whatever the rate.
    pub(crate) noise: Picker,
}

fn gate_set(cfg: &ProviderConfig) -> Result<GateSet, Error> {
    let l = &cfg.limits;
    let nz = |n: u32, what: &str| {
        NonZeroU32::new(n).ok_or_else(|| Error::Config(format!("{what} must be at least 1")))
    };
    let quota = |r: Rate, burst: Option<u32>, what: &str| -> Result<RateQuota, Error> {
        let q = RateQuota::new(nz(r.count, what)?, r.per).map_err(Error::Gate)?;
        Ok(q.with_burst(nz(burst.unwrap_or(r.count), what)?)
            .with_algorithm(l.algorithm))
    };
    let lease = Duration::from_secs(l.lease_secs.max(1));
    let delay = |g: Gate| -> Result<Gate, Error> {
        Ok(match l.gate_mode {
            GateMode::Refuse => g,
            GateMode::Delay => g.with_delay(
                nz(l.delay_burst, "delay burst")?,
                Duration::from_millis(l.max_delay_ms),
            ),
        })
    };
    let mut b = GateSet::builder();
    if let Some(r) = l.key_rate {
        let q = quota(r, l.key_burst, "key burst")?;
        b = b.with_gate(delay(Gate::rate("key", "key_rate", Scope::Key, q))?);
    }
    if let Some(r) = l.account_rate {
        let q = quota(r, l.account_burst, "account burst")?;
        b = b.with_gate(delay(Gate::rate(
            "account",
            "account_rate",
            Scope::Account,
            q,
        ))?);
    }
    if let Some(n) = l.key_concurrency {
        let n = nz(n, "key concurrency")?;
        b = b.with_gate(Gate::concurrency(
            "conc",
            "concurrency",
            Scope::Key,
            n,
            lease,
        ));
    }
    if let Some(n) = l.account_concurrency {
        let n = nz(n, "account concurrency")?;
        b = b.with_gate(Gate::concurrency(
            "account-conc",
            "account_concurrency",
            Scope::Account,
            n,
            lease,
        ));
    }
    b.build().map_err(Error::Gate)
}

impl App {
    pub(crate) fn new(cfg: ProviderConfig, clock: Arc<dyn Clock>) -> Result<Self, Error> {
        if cfg.api_keys.is_empty() {
            return Err(Error::Config("at least one API key is needed".into()));
        }
        cfg.check_values()?;
        let gates = Arc::new(gate_set(&cfg)?);
        let keys = cfg.api_keys.iter().fold(BearerKeys::new(), |k, a| {
            k.with_key(&a.key, a.account.as_deref())
        });
        Ok(Self {
            start: clock.monotonic(),
            cfg,
            clock,
            gates,
            keys,
            redis: None,
            smpp_stats: None,
            inner: Mutex::new(Inner::default()),
        })
    }

    pub(crate) fn stats(&self) -> StatsSnapshot {
        let mut s = self.lock().stats.snapshot();
        s.smpp = self.smpp_stats.as_ref().map(|read| read());
        s
    }

    pub(crate) fn key_counts(&self) -> KeyCounts {
        self.lock().stats.key_counts()
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn behaviour(&self, elapsed: Duration, request: u64) -> Behaviour {
        self.cfg.behaviour_at(elapsed, request)
    }
}
