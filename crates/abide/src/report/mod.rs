//! What an outbox database holds, read from the store: used by `status`, the final report
//! of `send` and `demo`, and `serve`'s `/v1/stats`.
//!
//! Two kinds of number are kept apart on purpose: what the remote side SAID (attempts per
//! HTTP status or SMPP code, straight from the attempts table) and what abide DECIDED
//! (item states: submitted, pending, deferred, failed).

pub(crate) mod coord;
pub(crate) mod progress;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use abide_outbox::{Counts, ReceiptCounts, ReceiptState, RemoteCode, Store};
use serde::Serialize;

/// A point-in-time view of an outbox database.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Snapshot {
    /// Items per state (what abide decided).
    pub(crate) counts: Counts,
    /// Of the `IN_FLIGHT` items, those whose lease had run out at the snapshot: a run that
    /// stopped (crash, kill, hang) left them, nothing is sending them, and the next reclaim
    /// (the next `abide send` on the database, or a running `serve`) moves them back to
    /// `PENDING` with their keys. Read from the items' `lease_expires_at`.
    pub(crate) in_flight_expired: u64,
    /// All items (logical requests).
    pub(crate) items: u64,
    /// Age of the oldest item still waiting (QUEUED or PENDING), seconds.
    pub(crate) oldest_pending_age_secs: Option<f64>,
    /// Attempts made, all providers (every request put on the wire, as recorded).
    pub(crate) attempts: u64,
    /// Attempts the remote answered with HTTP 429.
    pub(crate) http_429: u64,
    /// `http_429 / items`: the issue-4 target is at most 0.05.
    pub(crate) http_429_per_item: f64,
    /// Attempts the remote refused as a throttle, whatever the transport: HTTP 429 and
    /// SMPP `ESME_RTHROTTLED` (0x58) and `ESME_RMSGQFUL` (0x14) (SMPP 3.4 §5.1.3).
    pub(crate) throttle_answers: u64,
    /// `throttle_answers / items`: the per-message politeness figure over SMPP too.
    pub(crate) throttle_answers_per_item: f64,
    /// Attempts per remote code (`http_202`, `http_429`, `smpp_0x58`, `no_response`):
    /// what the remote side said.
    pub(crate) remote_counts: BTreeMap<String, u64>,
    /// Delivery receipts (SMPP): items per receipt state, and receipts naming no item
    /// (`unmatched`). What became of accepted messages; never changes their state.
    pub(crate) receipts: ReceiptCounts,
}

impl Snapshot {
    /// Read it from `store`.
    pub(crate) async fn load<S: Store>(store: &S, now: SystemTime) -> anyhow::Result<Self> {
        let counts = store.counts_by_state(None).await?;
        let in_flight_expired = store.expired_leases(now).await?;
        let age = store.oldest_pending_age(now).await?;
        let remote = store.remote_counts(None).await?;
        let attempts = remote.iter().map(|(_, n)| n).sum();
        let http_429 = remote
            .iter()
            .filter(|(c, _)| *c == RemoteCode::Http(429))
            .map(|(_, n)| n)
            .sum();
        let throttle_answers = remote
            .iter()
            .filter(|(c, _)| is_throttle_answer(*c))
            .map(|(_, n)| n)
            .sum();
        let items = counts.total();
        let receipts = store.receipt_counts(None).await?;
        Ok(Self {
            receipts,
            counts,
            in_flight_expired,
            items,
            oldest_pending_age_secs: age.map(|d| d.as_secs_f64()),
            attempts,
            http_429,
            http_429_per_item: ratio(http_429, items),
            throttle_answers,
            throttle_answers_per_item: ratio(throttle_answers, items),
            remote_counts: remote
                .into_iter()
                .map(|(c, n)| (c.to_string(), n))
                .collect(),
        })
    }

    /// A table for a terminal; `db` is shown without its password.
    pub(crate) fn render_table(&self, db: &str) -> String {
        let c = &self.counts;
        let mut s = String::new();
        let _ = writeln!(s, "outbox {}: {} items", crate::db::shown(db), self.items);
        let _ = writeln!(s, "  what abide decided (items per state)");
        for (name, n) in [
            ("QUEUED", c.queued),
            ("IN_FLIGHT", c.in_flight),
            ("PENDING", c.pending),
            ("SUBMITTED", c.submitted),
            ("FAILED", c.failed),
            ("DEFERRED", c.deferred),
        ] {
            let _ = writeln!(s, "    {name:<10} {n:>9}");
            if name == "IN_FLIGHT" {
                s.push_str(&expired_note(c.in_flight, self.in_flight_expired));
            }
        }
        let _ = writeln!(
            s,
            "  oldest waiting   {}",
            self.oldest_pending_age_secs
                .map_or_else(|| "-".to_owned(), |a| human(Duration::from_secs_f64(a)))
        );
        // One column of numbers under the states': label and count end where theirs do.
        let _ = writeln!(s, "  what the remote said (answers per attempt)");
        let _ = writeln!(s, "    {:<12} {:>7}", "attempts", self.attempts);
        let _ = writeln!(
            s,
            "    {:<12} {:>7}   {:.3} per item (429, 0x58, 0x14)",
            "throttled", self.throttle_answers, self.throttle_answers_per_item
        );
        if self.remote_counts.is_empty() {
            let _ = writeln!(s, "    (no attempts yet)");
        }
        for (code, n) in &self.remote_counts {
            let _ = writeln!(s, "    {code:<12} {n:>7}");
        }
        s.push_str(&render_receipts(&self.receipts));
        s
    }
}

/// The line under `IN_FLIGHT` when some of those items belong to a run that stopped (their
/// lease ran out); empty when none does.
fn expired_note(in_flight: u64, expired: u64) -> String {
    if expired == 0 {
        return String::new();
    }
    format!(
        "      {in_flight} in flight, {expired} of them with an expired lease (a run that \
         stopped; the next `abide send` on this database, or a running `serve`, reclaims them)\n"
    )
}

/// A remote answer that refused the request as a throttle: HTTP 429, SMPP 0x58 or 0x14.
fn is_throttle_answer(code: RemoteCode) -> bool {
    matches!(
        code,
        RemoteCode::Http(429) | RemoteCode::Smpp(0x58) | RemoteCode::Smpp(0x14)
    )
}

/// The receipts section of a table; empty when no receipt was stored.
pub(crate) fn render_receipts(r: &ReceiptCounts) -> String {
    let mut s = String::new();
    if r.total() == 0 {
        return s;
    }
    let _ = writeln!(
        s,
        "  delivery receipts (what became of accepted messages; {} stored)",
        r.total()
    );
    for st in ReceiptState::ALL {
        let _ = writeln!(s, "    {:<13} {:>7}", st.as_str(), r.get(st));
    }
    let _ = writeln!(
        s,
        "    {:<13} {:>7}  (naming no item)",
        "unmatched", r.unmatched
    );
    s
}

/// `a / b`, 0 when `b` is 0.
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// `1h02m`, `3m04s`, `12.3s`.
pub(crate) fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(human(Duration::from_secs(184)), "3m04s");
        assert_eq!(human(Duration::from_secs(3720)), "1h02m");
        assert_eq!(ratio(1, 0), 0.0);
    }

    /// Items a dead run left in flight are named as such; live ones get no note.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn expired_leases_are_named_under_in_flight() {
        assert_eq!(expired_note(4, 0), "");
        let note = expired_note(4, 3);
        assert!(
            note.contains("4 in flight, 3 of them with an expired lease"),
            "{note}"
        );
        assert!(note.contains("reclaims them"), "{note}");
        let snap = Snapshot {
            counts: Counts {
                in_flight: 4,
                ..Counts::default()
            },
            in_flight_expired: 3,
            items: 4,
            oldest_pending_age_secs: None,
            attempts: 0,
            http_429: 0,
            http_429_per_item: 0.0,
            throttle_answers: 0,
            throttle_answers_per_item: 0.0,
            remote_counts: BTreeMap::new(),
            receipts: ReceiptCounts::default(),
        };
        let table = snap.render_table("abide.db");
        let at = table.find("IN_FLIGHT").unwrap();
        assert!(
            table[at..].starts_with("IN_FLIGHT          4\n      4 in flight, 3"),
            "{table}"
        );
        let v = serde_json::to_value(&snap).unwrap();
        assert_eq!(v["in_flight_expired"], 3, "{v}");
    }

    /// What the remote said is a block of its own: a heading, then attempts, throttles and
    /// each status on a line, every count ending in the column the states' counts end in.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn what_the_remote_said_is_an_aligned_block() {
        let snap = Snapshot {
            counts: Counts {
                submitted: 1200,
                pending: 3,
                ..Counts::default()
            },
            in_flight_expired: 0,
            items: 1203,
            oldest_pending_age_secs: None,
            attempts: 1240,
            http_429: 34,
            http_429_per_item: ratio(34, 1203),
            throttle_answers: 34,
            throttle_answers_per_item: ratio(34, 1203),
            remote_counts: [
                ("http_202".to_owned(), 1200),
                ("http_429".to_owned(), 34),
                ("no_response".to_owned(), 6),
            ]
            .into_iter()
            .collect(),
            receipts: ReceiptCounts::default(),
        };
        let table = snap.render_table("abide.db");
        let block: Vec<&str> = table
            .lines()
            .skip_while(|l| !l.starts_with("  what the remote said"))
            .collect();
        assert_eq!(
            block[..6],
            [
                "  what the remote said (answers per attempt)",
                "    attempts        1240",
                "    throttled         34   0.028 per item (429, 0x58, 0x14)",
                "    http_202        1200",
                "    http_429          34",
                "    no_response        6",
            ],
            "{table}"
        );
        let submitted = table.lines().find(|l| l.contains("SUBMITTED")).unwrap();
        assert_eq!(submitted.len(), block[1].len(), "{table}");
    }

    /// "raise `concurrency`" only when the senders were outnumbered: one item, or a host
    /// that refused every connection, gave every slot at once and still printed it.
    #[test]
    fn concurrency_limits_only_a_run_with_more_requests_than_senders() {
        let all_at_once = |n| abide_core::SlotCounts {
            at_once: n,
            held_back: 0,
        };
        assert!(!concurrency_limited(all_at_once(1), 1, 2), "one item");
        assert!(!concurrency_limited(all_at_once(3), 0, 2), "host down");
        assert!(!concurrency_limited(all_at_once(8), 8, 8), "one round");
        assert!(concurrency_limited(all_at_once(500), 500, 8));
        let paced = abide_core::SlotCounts {
            at_once: 50,
            held_back: 450,
        };
        assert!(
            !concurrency_limited(paced, 500, 8),
            "the pacer set the pace"
        );
    }

    /// The per-message politeness figure counts an SMSC's throttles as it counts 429s.
    #[test]
    fn throttle_answers_are_429_and_the_smpp_throttle_codes() {
        for code in [
            RemoteCode::Http(429),
            RemoteCode::Smpp(0x58),
            RemoteCode::Smpp(0x14),
        ] {
            assert!(is_throttle_answer(code), "{code}");
        }
        for code in [
            RemoteCode::Http(503),
            RemoteCode::Http(202),
            RemoteCode::Smpp(0x00),
            RemoteCode::NoResponse,
        ] {
            assert!(!is_throttle_answer(code), "{code}");
        }
    }
}

/// What the input contributed.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct InputSummary {
    /// Items read (blank lines excluded).
    pub(crate) items: usize,
    /// Newly enqueued.
    pub(crate) enqueued: usize,
    /// Already in the database from an earlier run (same idempotency key): not re-sent.
    pub(crate) already_enqueued: usize,
}

impl InputSummary {
    /// Count one more enqueued chunk, as [`abide_outbox::Dispatcher::enqueue`] returned it.
    pub(crate) fn add(&mut self, done: &[abide_outbox::Enqueued]) {
        let enqueued = done.iter().filter(|e| e.created).count();
        self.items += done.len();
        self.enqueued += enqueued;
        self.already_enqueued += done.len() - enqueued;
    }

    /// From what [`abide_outbox::Dispatcher::enqueue`] returned for the input's items.
    pub(crate) fn from_enqueued(done: &[abide_outbox::Enqueued]) -> Self {
        let enqueued = done.iter().filter(|e| e.created).count();
        Self {
            items: done.len(),
            enqueued,
            already_enqueued: done.len() - enqueued,
        }
    }
}

/// What a dispatcher decided, in the order every display shows it; the names are the
/// [`abide_outbox::Totals`] JSON fields (`/metrics` labels; spaced out for a terminal).
pub(crate) fn decided(t: &abide_outbox::Totals) -> [(&'static str, u64); 7] {
    [
        ("delivered", t.delivered),
        ("attempts", t.attempts),
        ("throttled", t.throttled),
        ("retries_scheduled", t.retries_scheduled),
        ("budget_denied", t.budget_denied),
        ("terminal_failures", t.terminal_failures),
        ("deferred", t.deferred),
    ]
}

/// This run's numbers for one provider.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProviderLine {
    pub(crate) name: String,
    /// Pace at the end, requests per second.
    pub(crate) pace_per_sec: f64,
    /// Throttled fraction over the pacer's window at the end.
    pub(crate) throttle_rate: f64,
    /// Share of this run's send slots the pacer granted at once (the rest waited on the
    /// pace or a pause).
    pub(crate) slots_at_once: f64,
    /// At least [`CONCURRENCY_BOUND`] of the slots were free at once while a batch was
    /// waiting: the senders, not the pacer or the provider, set the pace.
    pub(crate) limited_by_concurrency: bool,
    /// The provider's limit on requests in flight (from its advertised concurrency quota)
    /// and how many sends waited for a place.
    pub(crate) in_flight: abide_core::session::InFlightSnapshot,
    /// That limit held back at least [`abide_core::session::HELD_BACK_SHARE`] of the sends.
    pub(crate) limited_by_in_flight_limit: bool,
    /// This node and how it shared the provider's limit (local, redis, fallback).
    pub(crate) coordination: abide_core::CoordinationStatus,
    pub(crate) totals: abide_outbox::Totals,
    /// What the provider's SMPP bind saw (binds, drops, timeouts); absent over HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) smpp: Option<abide_outbox::SmppStats>,
    /// Why the provider stopped sending this run (an SMPP bind refused for good).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) suspended: Option<String>,
}

/// Share of slots granted at once above which a run was limited by its senders.
pub(crate) const CONCURRENCY_BOUND: f64 = 0.9;

#[allow(clippy::cast_precision_loss)] // slot counts stay far below 2^53
fn at_once_share(s: abide_core::SlotCounts) -> f64 {
    if s.total() == 0 {
        0.0
    } else {
        s.at_once as f64 / s.total() as f64
    }
}

/// Whether the senders, not the pacer or the provider, set the pace: at least
/// [`CONCURRENCY_BOUND`] of the send slots were free at once, and there were more requests
/// than senders. With no more requests than senders (a handful of items, a host that never
/// answered) every one could go at once: more `concurrency` would not have sent faster.
fn concurrency_limited(slots: abide_core::SlotCounts, attempts: u64, concurrency: usize) -> bool {
    at_once_share(slots) >= CONCURRENCY_BOUND && attempts > concurrency as u64
}

/// The final report of `send` and `demo`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunReport {
    /// `drained`, `interrupted` or `provider_suspended`.
    pub(crate) outcome: &'static str,
    pub(crate) elapsed_secs: f64,
    pub(crate) input: Option<InputSummary>,
    /// What this run did (all providers).
    pub(crate) run: abide_outbox::Totals,
    /// Throttled attempts of this run per item it finished (target ≤ 0.05).
    pub(crate) throttles_per_request: f64,
    /// Deliveries per second over this run.
    pub(crate) achieved_rate_per_sec: f64,
    pub(crate) providers: Vec<ProviderLine>,
    /// The whole database afterwards, including what the remote side said.
    pub(crate) outbox: Snapshot,
}

impl RunReport {
    pub(crate) fn new(
        p: &abide_outbox::Progress,
        outcome: &'static str,
        input: Option<InputSummary>,
        outbox: Snapshot,
    ) -> Self {
        Self {
            outcome,
            elapsed_secs: p.elapsed.as_secs_f64(),
            input,
            run: p.totals,
            throttles_per_request: p.throttles_per_request(),
            achieved_rate_per_sec: p.achieved_rate(),
            providers: p
                .providers
                .iter()
                .map(|x| ProviderLine {
                    name: x.name.clone(),
                    pace_per_sec: x.rate,
                    throttle_rate: x.throttle_rate,
                    slots_at_once: at_once_share(x.slots),
                    limited_by_concurrency: concurrency_limited(
                        x.slots,
                        x.totals.attempts,
                        x.concurrency,
                    ),
                    in_flight: x.host_in_flight,
                    limited_by_in_flight_limit: x.host_in_flight.held_back(),
                    coordination: x.coordination.clone(),
                    totals: x.totals,
                    smpp: x
                        .transport
                        .as_ref()
                        .and_then(abide_outbox::TransportStats::smpp)
                        .copied(),
                    suspended: x.suspended.clone(),
                })
                .collect(),
            outbox,
        }
    }

    /// The report for a terminal.
    pub(crate) fn render_text(&self, db: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "abide: {} after {}",
            self.outcome,
            human(Duration::from_secs_f64(self.elapsed_secs))
        );
        if let Some(i) = &self.input {
            let _ = writeln!(
                s,
                "  input            {} items: {} enqueued, {} already in the outbox (not enqueued again)",
                i.items, i.enqueued, i.already_enqueued
            );
        }
        let t = &self.run;
        let _ = writeln!(s, "  this run (what abide decided)");
        for (name, n) in decided(t) {
            let _ = writeln!(s, "    {:<18} {n:>8}", name.replace('_', " "));
        }
        if t.transport_failures > 0 {
            // What we saw, not a remote answer: a refused connection is no attempt.
            let _ = writeln!(
                s,
                "    {:<18} {:>8}  (no answer: refused connections, which are not attempts, \
                 and timeouts)",
                "transport failures", t.transport_failures
            );
        }
        let _ = writeln!(
            s,
            "    {:<18} {:>8.3}",
            "throttled/finished", self.throttles_per_request
        );
        let _ = writeln!(
            s,
            "    {:<18} {:>8.1}/s",
            "achieved rate", self.achieved_rate_per_sec
        );
        for p in &self.providers {
            let _ = writeln!(
                s,
                "  provider {}: pace {:.1}/s, throttle rate {:.1}%, {} delivered, {} throttled",
                p.name,
                p.pace_per_sec,
                p.throttle_rate * 100.0,
                p.totals.delivered,
                p.totals.throttled
            );
            if let Some(why) = &p.suspended {
                let _ = writeln!(s, "    SUSPENDED for this run: {why}");
            }
            let c = &p.coordination;
            if c.mode != abide_core::CoordinationMode::Local {
                let _ = writeln!(s, "    coordination {}", crate::report::coord::live_line(c));
            }
            if let Some(b) = &p.smpp {
                let _ = writeln!(
                    s,
                    "    smpp: bound {} time(s), {} lost, {} bind failures, {} PDU timeouts, \
                     {} generic_nacks, {} receipts taken",
                    b.binds,
                    b.connections_lost,
                    b.bind_failures,
                    b.pdu_timeouts,
                    b.generic_nacks,
                    b.receipts
                );
            }
            if p.limited_by_concurrency {
                let _ = writeln!(
                    s,
                    "    limited by concurrency: {:.0}% of send slots were free at once, so \
                     the senders set the pace; raise `concurrency` to send faster",
                    p.slots_at_once * 100.0
                );
            }
            let f = &p.in_flight;
            if let Some(limit) = f.limit {
                let advertised = f
                    .advertised
                    .map_or_else(String::new, |a| format!(" of {a}"));
                let _ = writeln!(
                    s,
                    "    {} the provider's in-flight limit: {limit}{advertised} at once \
                     ({} decrease(s)), {:.0}% of sends waited for a place",
                    if p.limited_by_in_flight_limit {
                        "limited by"
                    } else {
                        "within"
                    },
                    f.decreases,
                    f.held_share() * 100.0
                );
            }
        }
        s.push_str(&self.outbox.render_table(db));
        s
    }
}
