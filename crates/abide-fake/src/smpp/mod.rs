//! The SMPP side: a fake SMSC speaking SMPP 3.4 over TCP (`abide provider --smpp ADDR`),
//! built on `rusmpp` and limited by the same gates as the HTTP side.
//!
//! - `bind_transmitter` / `bind_receiver` / `bind_transceiver`: system_id and password
//!   checked against [`SmppConfig::accounts`] (unknown system_id `ESME_RINVSYSID`, wrong
//!   password `ESME_RINVPASWD`, the `bind=refuse` quirk `ESME_RBINDFAIL`).
//! - `submit_sm` → `submit_sm_resp` with a `message_id`; the text in `short_message`, or
//!   in the `message_payload` TLV (long messages, counted as `long_messages`; refused
//!   with `ESME_RINVMSGLEN` when `short_message` is not empty then, SMPP 3.4 §5.3.2.32);
//!   over a rate gate the command_status is `behaviour.smpp_status` (0x58
//!   `ESME_RTHROTTLED` by default), over a concurrency gate (PDUs awaiting their answer)
//!   [`SmppConfig::concurrency_status`] (0x14 `ESME_RMSGQFUL`).
//! - Exactly-once checking: the vendor TLV 0x1400 (SMPP 3.4 §5.3.2) carries the item's
//!   idempotency key; a key already accepted is a repeat, answered with the same `message_id`,
//!   neither delivered nor receipted again.
//! - Delivery receipts as `deliver_sm` to receiver and transceiver binds of the system_id,
//!   [`SmppConfig::receipt_delay_ms`] after acceptance ([`receipt`]).
//! - `enquire_link`, `unbind`, `generic_nack` for PDUs that do not decode or are not served.
//!
//! [`SmppConfig`]: config::SmppConfig
//! [`SmppConfig::accounts`]: config::SmppConfig::accounts
//! [`SmppConfig::concurrency_status`]: config::SmppConfig::concurrency_status
//! [`SmppConfig::receipt_delay_ms`]: config::SmppConfig::receipt_delay_ms

mod codec;
pub mod config;
mod conn;
mod listen;
pub(crate) mod receipt;
pub mod stats;

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use abide_core::Clock;
use abide_gate::{GateSet, RedisGates};
use rusmpp::pdus::SubmitSm;
use rusmpp::tlvs::{TlvTag, TlvValue};
use rusmpp::CommandStatus;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::{Behaviour, ProviderConfig, ReceiptState};
use crate::idempotency::escape_key;
use crate::noise::Picker;
use crate::shared::{self, Guard, Shared};
pub(crate) use listen::Listener;
use receipt::{Receipt, Receipts};
use stats::SmppStats;

/// The vendor-specific TLV carrying an idempotency key (SMPP 3.4 §5.3.2 reserves
/// 0x1400–0x3FFF for vendors): the key's bytes, 1 to 255 of them.
pub const IDEMPOTENCY_TLV: u16 = 0x1400;

/// Idempotency answers and content keys remembered (oldest forgotten first).
const MEMORY: usize = 100_000;

/// The system_id the SMSC names itself with in bind responses.
pub(crate) const SMSC_SYSTEM_ID: &str = "abide";

/// A successful bind.
#[derive(Debug, Clone)]
pub(crate) struct Login {
    pub(crate) system_id: String,
    pub(crate) account: Option<String>,
}

/// What became of a `submit_sm`.
pub(crate) enum Submitted {
    /// A new message: answer `message_id` after `delay`, then release `guard`.
    Accepted {
        message_id: String,
        guard: Option<Box<Guard>>,
        delay: Duration,
    },
    /// A repeat of an accepted idempotency key: answer the same `message_id` at once.
    Repeat {
        message_id: String,
    },
    Refused(CommandStatus),
}

#[derive(Default)]
struct State {
    stats: SmppStats,
    /// `submit_sm` PDUs received (the `#N` of schedule triggers).
    submits: u64,
    seq: u64,
    /// (system_id, idempotency key) -> message_id.
    answers: HashMap<(String, String), String>,
    answer_order: VecDeque<(String, String)>,
    /// Hash of (system_id, source, destination, text) -> times accepted.
    content: HashMap<u64, u64>,
    content_order: VecDeque<u64>,
    receipts: Receipts,
    acc_congestion: f64,
    /// Which `submit_sm` are refused whatever the rate.
    noise: Picker,
    /// `drop_connections` schedule entries already fired.
    drops_fired: Vec<bool>,
}

/// The SMSC shared by all SMPP connections.
pub(crate) struct Smsc {
    cfg: ProviderConfig,
    clock: Arc<dyn Clock>,
    start: Instant,
    gates: Arc<GateSet>,
    redis: Option<RedisGates>,
    state: Mutex<State>,
    /// Woken when a receipt is queued.
    receipts_queued: Notify,
    /// Bumped by each `drop=all` event; every connection open then closes.
    drops: watch::Sender<u64>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Smsc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smsc").finish_non_exhaustive()
    }
}

impl Smsc {
    pub(crate) fn new(app: &App) -> Self {
        let cfg = app.cfg.clone();
        let drops_fired = vec![false; cfg.schedule.len()];
        Self {
            clock: Arc::clone(&app.clock),
            start: app.start,
            gates: Arc::clone(&app.gates),
            redis: app.redis.clone(),
            state: Mutex::new(State {
                drops_fired,
                ..State::default()
            }),
            receipts_queued: Notify::new(),
            drops: watch::Sender::new(0),
            shutdown: CancellationToken::new(),
            cfg,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stats(&self) -> SmppStats {
        let st = self.lock();
        let mut s = st.stats.clone();
        s.receipts_pending = st.receipts.held() as u64;
        s
    }

    /// The behaviour now, counting `submit_sm` PDUs for `#N` triggers; fires `drop=all`
    /// events that are due.
    pub(crate) fn behaviour(&self) -> Behaviour {
        let elapsed = self.clock.monotonic().saturating_duration_since(self.start);
        let mut st = self.lock();
        self.fire_drops(&mut st, elapsed);
        self.cfg.behaviour_at(elapsed, st.submits)
    }

    fn fire_drops(&self, st: &mut State, elapsed: Duration) {
        for (i, e) in self.cfg.schedule.iter().enumerate() {
            if e.drop_connections == Some(true)
                && !st.drops_fired[i]
                && e.reached(elapsed, st.submits)
            {
                st.drops_fired[i] = true;
                self.drops.send_modify(|g| *g += 1);
                tracing::info!(schedule = i, "smpp quirk: dropping every open connection");
            }
        }
    }

    /// Check a bind's credentials against the accounts and the `bind` quirk.
    pub(crate) fn bind(
        &self,
        b: &Behaviour,
        system_id: &str,
        password: &str,
    ) -> Result<Login, CommandStatus> {
        if b.bind_refusal {
            return Err(CommandStatus::EsmeRbindfail);
        }
        let a = self
            .cfg
            .smpp
            .accounts
            .iter()
            .find(|a| a.system_id == system_id)
            .ok_or(CommandStatus::EsmeRinvsysid)?;
        if a.password != password {
            return Err(CommandStatus::EsmeRinvpaswd);
        }
        Ok(Login {
            system_id: a.system_id.clone(),
            account: a.account.clone(),
        })
    }

    /// Decide a `submit_sm` from `login`: repeat, refusal or a new message (with its receipt
    /// queued when one is due).
    pub(crate) async fn submit(&self, login: &Login, sm: &SubmitSm) -> Submitted {
        let key = match idempotency_key(sm) {
            Ok(k) => k,
            Err(()) => return Submitted::Refused(CommandStatus::EsmeRinvtlvval),
        };
        // SMPP 3.4 §5.3.2.32: with message_payload, short_message must be empty.
        let payload = has_payload(sm);
        if payload && !sm.short_message().is_empty() {
            return Submitted::Refused(CommandStatus::EsmeRinvmsglen);
        }
        let shared = match &self.redis {
            Some(store) => Some(
                shared::ask_for(
                    store,
                    &login.system_id,
                    login.account.as_deref(),
                    key.as_deref(),
                    false,
                )
                .await,
            ),
            None => None,
        };
        let now = self.clock.monotonic();
        let elapsed = now.saturating_duration_since(self.start);
        let mut st = self.lock();
        st.submits += 1;
        self.fire_drops(&mut st, elapsed);
        let b = self.cfg.behaviour_at(elapsed, st.submits);

        let idem = key.map(|k| (login.system_id.clone(), k));
        if let Some(message_id) = idem.as_ref().and_then(|k| st.answers.get(k)).cloned() {
            st.stats.repeats += 1;
            if let Some((_, k)) = &idem {
                st.stats.repeat_of(k);
            }
            return Submitted::Repeat { message_id };
        }
        if b.congestion > 0.0 {
            st.acc_congestion += b.congestion;
            if st.acc_congestion >= 1.0 - 1e-9 {
                st.acc_congestion -= 1.0;
                st.stats.throttled += 1;
                return Submitted::Refused(CommandStatus::from(b.smpp_status));
            }
        }
        // Throttles that do not follow the pace: whatever the rate, this share is refused.
        if st.noise.picks(&b) {
            st.stats.throttled += 1;
            return Submitted::Refused(CommandStatus::from(b.smpp_status));
        }
        let trace = idem.as_ref().map(|k| k.1.as_str());
        let verdict = match shared {
            None => self
                .gates
                .check_traced(&login.system_id, login.account.as_deref(), trace, now)
                .map(|adm| Guard::Local(adm.into_guard(Arc::clone(&self.gates)))),
            Some(Shared::Admitted(a)) => Ok(Guard::Shared(Box::new(a.1))),
            Some(Shared::Refused(r)) => Err(r),
            Some(Shared::Unavailable) => {
                return Submitted::Refused(CommandStatus::EsmeRsyserr);
            }
        };
        let guard = match verdict {
            Ok(g) => g,
            Err(rej) => {
                st.stats.throttled += 1;
                let status = if rej.category().contains("concurrency") {
                    self.cfg.smpp.concurrency_status
                } else {
                    b.smpp_status
                };
                return Submitted::Refused(CommandStatus::from(status));
            }
        };

        st.seq += 1;
        let message_id = format!("{:010}", st.seq);
        if let Some(k) = idem {
            let s = &mut *st;
            remember(&mut s.answers, &mut s.answer_order, k, message_id.clone());
        } else {
            self.count_content(&mut st, login, sm);
        }
        st.stats.accepted += 1;
        if payload {
            st.stats.long_messages += 1;
        }
        if self.wants_receipt(sm, b.receipt_state) {
            self.queue_receipt(&mut st, login, sm, &message_id, b.receipt_state);
        }
        drop(st);
        Submitted::Accepted {
            message_id,
            guard: Some(Box::new(guard)),
            delay: Duration::from_millis(self.cfg.latency_ms.saturating_add(b.slow_ms)),
        }
    }

    fn count_content(&self, st: &mut State, login: &Login, sm: &SubmitSm) {
        let mut h = std::hash::DefaultHasher::new();
        (
            &login.system_id,
            sm.source_addr.as_str(),
            sm.destination_addr.as_str(),
            message_text(sm),
        )
            .hash(&mut h);
        let hash = h.finish();
        let seen = st.content.entry(hash).or_insert(0);
        *seen += 1;
        if *seen > 1 {
            st.stats.content_repeats += 1;
            let k = format!(
                "{}>{}#{hash:016x}",
                sm.source_addr.as_str(),
                sm.destination_addr.as_str()
            );
            st.stats.repeat_of(&k);
        } else {
            st.content_order.push_back(hash);
            if st.content_order.len() > MEMORY {
                if let Some(old) = st.content_order.pop_front() {
                    st.content.remove(&old);
                }
            }
        }
    }

    fn wants_receipt(&self, sm: &SubmitSm, state: ReceiptState) -> bool {
        use config::ReceiptPolicy::*;
        let delivered = state == ReceiptState::Delivered;
        match self.cfg.smpp.receipts {
            Always => true,
            Never => false,
            // 01: on success or failure; 10: on failure only; 11 (SMPP 5.0): on success only.
            Requested => match u8::from(sm.registered_delivery) & 0x03 {
                0x01 => true,
                0x02 => !delivered,
                0x03 => delivered,
                _ => false,
            },
        }
    }

    fn queue_receipt(
        &self,
        st: &mut State,
        login: &Login,
        sm: &SubmitSm,
        message_id: &str,
        state: ReceiptState,
    ) {
        let r = Receipt {
            message_id: message_id.to_owned(),
            from: sm.destination_addr.clone(),
            from_ton: sm.dest_addr_ton,
            from_npi: sm.dest_addr_npi,
            to: sm.source_addr.clone(),
            to_ton: sm.source_addr_ton,
            to_npi: sm.source_addr_npi,
            submitted: self.clock.now(),
            text: message_text(sm),
            state,
        };
        let due =
            tokio::time::Instant::now() + Duration::from_millis(self.cfg.smpp.receipt_delay_ms);
        if st.receipts.push(&login.system_id, due, r) {
            self.receipts_queued.notify_waiters();
        } else {
            st.stats.receipts_dropped += 1;
        }
    }

    fn with_stats<T>(&self, f: impl FnOnce(&mut SmppStats) -> T) -> T {
        f(&mut self.lock().stats)
    }
}

fn remember(
    answers: &mut HashMap<(String, String), String>,
    order: &mut VecDeque<(String, String)>,
    k: (String, String),
    id: String,
) {
    answers.insert(k.clone(), id);
    order.push_back(k);
    if order.len() > MEMORY {
        if let Some(old) = order.pop_front() {
            answers.remove(&old);
        }
    }
}

/// Whether the message carries a `message_payload` TLV.
fn has_payload(sm: &SubmitSm) -> bool {
    sm.tlvs()
        .iter()
        .any(|t| matches!(t.value(), Some(TlvValue::MessagePayload(_))))
}

/// The message's octets: `short_message`, or the `message_payload` TLV when that is empty.
fn message_text(sm: &SubmitSm) -> Vec<u8> {
    if !sm.short_message().is_empty() {
        return sm.short_message().to_vec();
    }
    sm.tlvs()
        .iter()
        .find_map(|t| match t.value() {
            Some(TlvValue::MessagePayload(p)) => Some(p.value.to_vec()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The idempotency key of TLV [`IDEMPOTENCY_TLV`]: `Ok(None)` without it, `Err` when empty,
/// over 255 bytes or repeated.
fn idempotency_key(sm: &SubmitSm) -> Result<Option<String>, ()> {
    let mut found = None;
    for tlv in sm.tlvs() {
        if tlv.tag() != TlvTag::Other(IDEMPOTENCY_TLV) {
            continue;
        }
        let Some(TlvValue::Other { value, .. }) = tlv.value() else {
            return Err(());
        };
        if found.is_some() {
            return Err(());
        }
        found = Some(escape_key(value)?);
    }
    Ok(found)
}
