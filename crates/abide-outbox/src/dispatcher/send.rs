//! Senders: take a claimed item, let the provider's session decide when it goes, send it
//! through the transport, and turn the session's decision into a [`Completion`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use abide_core::{Decision, DeferReason, HandBackReason, Step, VerdictClass};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::{mpsc, watch, Mutex};

use super::inner::{sleep_or_stop, Done, Inner};
use super::mark::{mark_sent, Marks};
use super::runtime::{budget_role, ProviderRuntime};
use crate::model::{AttemptRecord, Completion, Item, Outcome};
use crate::progress::Stats;
use crate::store::Store;
use abide_core::BudgetRole;

/// What a sender takes items from and hands marks and results to.
pub(super) struct Channels {
    /// Claimed items of its provider, shared by the provider's senders.
    pub(super) items: Arc<Mutex<mpsc::Receiver<Item>>>,
    /// To the writer, before each request.
    pub(super) marks: Marks,
    /// To the writer, after it.
    pub(super) done: mpsc::Sender<Done>,
}

/// Sends claimed items of one provider, one at a time.
pub(super) async fn sender<S: Store>(
    inner: Arc<Inner<S>>,
    idx: usize,
    rt: Arc<ProviderRuntime>,
    ch: Channels,
    mut stop: watch::Receiver<bool>,
    seed: Option<u64>,
) {
    let Channels { items, marks, done } = ch;
    let mut rng = match seed {
        Some(s) => StdRng::seed_from_u64(s),
        None => StdRng::from_os_rng(),
    };
    loop {
        // Claimers exit on stop and drop the channel's sender, so this drains and ends.
        let item = { items.lock().await.recv().await };
        let Some(item) = item else { return };
        let c = attempt(&inner, &rt, item, &marks, &mut stop, &mut rng).await;
        if done.send((idx, c)).await.is_err() {
            return;
        }
    }
}

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

/// Hand a claimed item back: `PENDING`, due at `when`, with the attempts made under this
/// lease (none when nothing was sent).
///
/// An item whose next attempt spends no retry budget (reclaimed, failed over) keeps the
/// reason that says so, unless the budget itself refused it: a shutdown must not turn a
/// resumed item into a retry, nor a retry into a free one.
fn hand_back(
    rt: &ProviderRuntime,
    item: &Item,
    when: SystemTime,
    reason: HandBackReason,
    attempts: Vec<AttemptRecord>,
) -> Completion {
    Stats::bump(&rt.stats.lease_returns);
    give_back(item, when, reason.as_str(), attempts)
}

/// The completion that makes `item` `PENDING` again, due at `when`, charged `attempts`
/// only (the store's completion replaces its send mark by them).
fn give_back(
    item: &Item,
    when: SystemTime,
    reason: &str,
    attempts: Vec<AttemptRecord>,
) -> Completion {
    let reason = match (&item.reason, budget_role(item)) {
        (Some(kept), BudgetRole::Resume | BudgetRole::First)
            if item.attempts > 0 && attempts.is_empty() =>
        {
            kept.clone()
        }
        _ => reason.to_owned(),
    };
    let last_provider_code = attempts.last().map(|a| a.remote);
    Completion {
        id: item.id.clone(),
        lease_owner: item.lease_owner.clone().unwrap_or_default(),
        outcome: Outcome::Retry {
            next_attempt_at: when,
            reason,
        },
        attempts,
        last_provider_code,
        message_id: None,
    }
}

/// One item under one lease: the session paces it, we send, the session decides.
async fn attempt<S: Store>(
    inner: &Inner<S>,
    rt: &ProviderRuntime,
    item: Item,
    marks: &Marks,
    stop: &mut watch::Receiver<bool>,
    rng: &mut StdRng,
) -> Completion {
    // Not ever: no request can be made of it (a row edited by hand). Nothing goes out, so
    // it is no attempt and says nothing about the host.
    if let Some(why) = rt.transport.unsendable(&item) {
        tracing::warn!(provider = %rt.cfg.name, item = %item.id, error = %why,
            "item cannot be sent; failed without a request");
        return Completion {
            id: item.id.clone(),
            lease_owner: item.lease_owner.clone().unwrap_or_default(),
            outcome: Outcome::Failed {
                reason: format!("unsendable: {why}"),
            },
            attempts: Vec::new(),
            last_provider_code: None,
            message_id: None,
        };
    }
    let session = &rt.session;
    let mut records: Vec<AttemptRecord> = Vec::new();
    let mut delivery = session.delivery(rt.item_context(&item));
    loop {
        if *stop.borrow() {
            let now = inner.clock.now();
            return hand_back(rt, &item, now, HandBackReason::Shutdown, records);
        }
        let (mono, now) = (inner.clock.monotonic(), inner.clock.now());
        // Never send what cannot be recorded: wait while results fail to be written.
        if inner.health.failing() {
            if sleep_or_stop(inner, mono + Duration::from_millis(200), stop).await {
                let now = inner.clock.now();
                return hand_back(rt, &item, now, HandBackReason::Shutdown, records);
            }
            continue;
        }
        match delivery.poll(session, mono, now, rng) {
            Step::Send => {}
            Step::WaitUntil(at) => {
                if sleep_or_stop(inner, at, stop).await {
                    let now = inner.clock.now();
                    return hand_back(rt, &item, now, HandBackReason::Shutdown, records);
                }
                continue;
            }
            Step::HandBack { after, reason } => {
                if reason == HandBackReason::RetryBudgetExhausted {
                    Stats::bump(&rt.stats.budget_denied);
                }
                return hand_back(rt, &item, now + after, reason, records);
            }
        }

        // Wait for a connection being made (an SMPP bind), then: if the transport gave up
        // for this run (a bind refused for good), hand the item back unsent, due at once;
        // the claimer no longer claims for the provider.
        tokio::select! {
            () = rt.transport.ready() => {}
            _ = stop.changed() => {
                let now = inner.clock.now();
                return hand_back(rt, &item, now, HandBackReason::Shutdown, records);
            }
        }
        if rt.suspended().is_some() {
            let now = inner.clock.now();
            return hand_back(rt, &item, now, HandBackReason::ProviderPaused, records);
        }

        // An attempt is a request on the wire: marked (committed) before it goes, so that a
        // crash from here on charges it, and nothing before here does. Nothing may stop
        // between the mark and the send.
        if !mark_sent(marks, &item).await {
            let now = inner.clock.now();
            return hand_back(rt, &item, now, HandBackReason::Shutdown, records);
        }
        let sent_at = inner.clock.monotonic();
        let wire = OnWire::new(&rt.stats.on_wire);
        let response = rt.transport.send(&item).await;
        drop(wire);
        let latency = inner.clock.monotonic().saturating_duration_since(sent_at);
        let (mono, now) = (inner.clock.monotonic(), inner.clock.now());
        let answer = delivery.on_answer(session, mono, now, &response.observation(), rng);
        let verdict = &answer.verdict;
        // For operators: what paused this provider, raw, and any `Sunset` it announced.
        let until = session.pacer().paused_until(mono).map(|u| now + (u - mono));
        rt.stats.note_pause(verdict, now, until);
        if answer.credential_refused {
            // Item after item refused: the key is, not the items (abide_core::session).
            rt.stats.note_refusal(verdict, now, until);
            if answer.refusal_began {
                tracing::warn!(provider = %rt.cfg.name, reason = %verdict.reason,
                    "the provider refuses item after item: its credential is refused; \
                     pausing it and deferring the refused items (not failing them)");
            }
        }
        if let crate::transport::Response::Http { headers, .. } = &response {
            rt.stats.note_warnings(&abide_core::parse_warnings(headers));
        }
        let unanswered = matches!(response, crate::transport::Response::Transport(_));
        rt.stats.note_answered(!unanswered, mono);
        if unanswered {
            // What we saw, apart from what the remote said: refused connections included.
            Stats::bump(&rt.stats.transport_failures);
            if answer.outage_began {
                let error = rt.transport.last_failure().unwrap_or_default();
                tracing::warn!(provider = %rt.cfg.name,
                    endpoint = %rt.cfg.transport.settings().endpoint(),
                    reason = %verdict.reason, %error,
                    "no answer from the provider; pausing it (backing off until it answers)");
            }
        }
        if !answer.sent {
            // The connection was never made: no byte of the request reached the remote, so
            // this is no attempt (nothing recorded, nothing charged toward the attempt cap,
            // no `no_response`). The host's outage pause holds the item back; it waits,
            // `PENDING`, with the attempts of this lease only (a credential resend's).
            let when = match answer.decision {
                Decision::Retry { after } => now + after,
                // Past its maximum age the message is parked for a person, unsent.
                Decision::Deferred(reason) => {
                    let last_provider_code = records.last().map(|a| a.remote);
                    return Completion {
                        id: item.id.clone(),
                        lease_owner: item.lease_owner.clone().unwrap_or_default(),
                        outcome: Outcome::Deferred {
                            reason: reason.to_string(),
                        },
                        attempts: records,
                        last_provider_code,
                        message_id: None,
                    };
                }
                // Not produced for an unsent request; the outage pause still bounds it.
                _ => until.unwrap_or(now),
            };
            return give_back(&item, when, &verdict.reason, records);
        }
        Stats::bump(&rt.stats.attempts);
        match verdict.class {
            VerdictClass::Throttle => Stats::bump(&rt.stats.throttled),
            VerdictClass::Unknown => {
                tracing::warn!(provider = %rt.cfg.name, item = %item.id, reason = %verdict.reason,
                    "unrecognised response; retrying with a low attempt cap");
            }
            _ => {}
        }
        let mut record = AttemptRecord {
            at: now,
            provider: rt.cfg.name.clone(),
            remote: response.remote(),
            verdict_class: verdict.class,
            delay: None,
            delay_reason: None,
            latency,
        };
        if let Some(d) = &answer.delay {
            record.delay = Some(d.delay);
            record.delay_reason = Some(d.reason);
            if let Some(raw) = &d.raw {
                tracing::debug!(provider = %rt.cfg.name, raw = %raw,
                    delay_ms = d.delay.as_millis() as u64, "Retry-After");
            }
        }
        let outcome = match answer.decision {
            Decision::Resend => {
                Stats::bump(&rt.stats.credential_refreshes);
                rt.transport.refresh_credentials();
                records.push(record);
                continue;
            }
            Decision::Delivered => Outcome::Submitted,
            Decision::Failed => Outcome::Failed {
                reason: answer.verdict.reason.clone(),
            },
            Decision::Deferred(reason @ DeferReason::CredentialsRejected { .. })
                if rt.stats.delivered.load(Ordering::Relaxed) == 0 =>
            {
                // Refused again right after a fresh read, and nothing accepted this run:
                // the key is wrong, not this item. Sending the rest with it would only
                // collect more refusals: stop the provider for the run, naming the setting
                // to fix, and keep the item waiting (its attempt recorded).
                let setting = rt.cfg.transport.settings().credential_setting();
                rt.suspend(format!(
                    "its credential was refused ({}) again right after it was read afresh, \
                     and nothing was accepted this run: fix the secret named by {}; the items \
                     wait for the next run",
                    answer.verdict.reason,
                    setting.as_deref().unwrap_or("its credential setting"),
                ));
                records.push(record);
                return give_back(&item, now, &reason.to_string(), records);
            }
            Decision::Deferred(reason) => Outcome::Deferred {
                reason: reason.to_string(),
            },
            Decision::Retry { after } => Outcome::Retry {
                next_attempt_at: now + after,
                reason: answer.verdict.reason.clone(),
            },
        };
        let code = record.remote;
        records.push(record);
        let message_id = match outcome {
            Outcome::Submitted => response.message_id().map(str::to_owned),
            _ => None,
        };
        return Completion {
            id: item.id.clone(),
            lease_owner: item.lease_owner.clone().unwrap_or_default(),
            outcome,
            attempts: records,
            last_provider_code: Some(code),
            message_id,
        };
    }
}
