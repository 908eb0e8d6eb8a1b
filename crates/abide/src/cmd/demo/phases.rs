//! `abide demo`'s phases: the provider switches its quirks on by request number; this
//! records when the run crossed each switch (sampling the provider's own counters) and
//! what share of the run each phase cost against the advertised limit.
//!
//! A phase's cost is the time it took beyond what the limit needed for what it accepted:
//! `duration − accepted ÷ rate`. The costs (plus start-up and the drain after the last
//! request) add up to the whole run's shortfall, so a report can say "the 403 storm cost
//! 9 % of the run" instead of leaving a user to wonder why 75/s gave 55/s.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use abide_core::Clock;
use abide_fake::RunningProvider;
use serde::Serialize;

/// One quirk switch: at `pct` % of the messages (by the provider's request count) the
/// provider applies `spec` (an `abide provider --schedule` entry without its `@#n`); the
/// phase it begins is called `name`. `costly`: the provider refuses on its own there (a
/// 503 burst, a 403 storm), whatever the sender's pace. `shows`: the status the phase is
/// there to show; a run that never got it in that phase says so.
pub(crate) struct Switch {
    pub(crate) pct: u64,
    pub(crate) spec: &'static str,
    pub(crate) name: &'static str,
    pub(crate) costly: bool,
    pub(crate) shows: Option<u16>,
}

/// The demo's quirks, in order.
pub(crate) const SWITCHES: [Switch; 5] = [
    Switch {
        pct: 25,
        spec: "retry-after=imf-fixdate",
        name: "Retry-After as an HTTP-date",
        costly: false,
        shows: None,
    },
    Switch {
        pct: 45,
        spec: "fail-503=0.5",
        name: "503 to every second request",
        costly: true,
        shows: Some(503),
    },
    Switch {
        pct: 50,
        spec: "fail-503=0",
        name: "HTTP-date, 503s over",
        costly: false,
        shows: None,
    },
    Switch {
        pct: 65,
        spec: "throttle=403",
        name: "403 with Retry-After: 0",
        costly: true,
        shows: Some(403),
    },
    Switch {
        pct: 75,
        spec: "throttle=429",
        name: "429 again",
        costly: false,
        shows: None,
    },
];

/// The name of the phase before the first switch.
const FIRST: &str = "429, Retry-After in seconds";

/// The request number at which a switch at `pct` % of `items` applies (at least 1).
pub(crate) fn request_at(items: u32, pct: u64) -> u64 {
    (u64::from(items) * pct / 100).max(1)
}

/// How often the provider's counters are read.
const SAMPLE: Duration = Duration::from_millis(20);

/// The provider's counters at one moment of the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mark {
    /// Time since the start.
    pub(crate) at: Duration,
    pub(crate) accepted: u64,
    /// Refusals so far, by HTTP status.
    pub(crate) refused: BTreeMap<u16, u64>,
}

/// When each switch was crossed, with the provider's counters then.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    first_request: Option<Mark>,
    crossed: Vec<Mark>,
}

impl Timeline {
    /// Read `provider`'s counters every 20 ms from `start` (on `clock`), recording each
    /// switch as its request number is reached. Never returns: race it against the delivery.
    pub(crate) async fn follow(
        &mut self,
        provider: &RunningProvider,
        items: u32,
        clock: &dyn Clock,
        start: Instant,
    ) {
        let mut tick = tokio::time::interval(SAMPLE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let s = provider.stats();
            let mark = Mark {
                at: clock.monotonic().saturating_duration_since(start),
                accepted: s.accepted,
                refused: s.rejected_by_status,
            };
            if s.requests > 0 && self.first_request.is_none() {
                self.first_request = Some(mark.clone());
            }
            while let Some(sw) = SWITCHES.get(self.crossed.len()) {
                if s.requests < request_at(items, sw.pct) {
                    break;
                }
                self.crossed.push(mark.clone());
            }
        }
    }

    /// The phases of a run that ended as `end` says (the whole run's time, accepted and
    /// refusals), against a limit of `rate` per second.
    #[allow(clippy::cast_precision_loss)] // message counts stay far below 2^53
    pub(crate) fn phases(&self, end: &Mark, rate: f64) -> Phases {
        let mut phases = Vec::new();
        let begin = self.first_request.clone().unwrap_or_default();
        let mut push = |name: &str, costly: bool, shows: Option<u16>, from: &Mark, to: &Mark| {
            let secs = to.at.saturating_sub(from.at).as_secs_f64();
            let acc = to.accepted.saturating_sub(from.accepted);
            let refused: BTreeMap<u16, u64> = to
                .refused
                .iter()
                .map(|(&status, &n)| {
                    let before = from.refused.get(&status).copied().unwrap_or(0);
                    (status, n.saturating_sub(before))
                })
                .filter(|&(_, n)| n > 0)
                .collect();
            phases.push(Phase {
                name: name.to_owned(),
                costly,
                secs,
                accepted: acc,
                rate_per_sec: if secs > 0.0 { acc as f64 / secs } else { 0.0 },
                cost_secs: (secs - acc as f64 / rate).max(0.0),
                share_of_run: 0.0,
                missing: shows.filter(|s| !refused.contains_key(s)),
                refused,
            });
        };
        push(
            "start-up (to the first request)",
            false,
            None,
            &Mark::default(),
            &begin,
        );
        let mut from = &begin;
        let (mut name, mut costly, mut shows) = (FIRST, false, None);
        for (sw, mark) in SWITCHES.iter().zip(&self.crossed) {
            push(name, costly, shows, from, mark);
            (from, name, costly, shows) = (mark, sw.name, sw.costly, sw.shows);
        }
        push(name, costly, shows, from, end);
        let total_secs = end.at.as_secs_f64().max(f64::EPSILON);
        for p in &mut phases {
            p.share_of_run = p.cost_secs / total_secs;
        }
        let calm: Vec<&Phase> = phases.iter().filter(|p| !p.costly).collect();
        let calm_secs: f64 = calm.iter().map(|p| p.secs).sum();
        let calm_acc: u64 = calm.iter().map(|p| p.accepted).sum();
        Phases {
            limit_per_sec: rate,
            of_limit_outside_costly: if calm_secs > 0.0 {
                calm_acc as f64 / calm_secs / rate
            } else {
                0.0
            },
            phases,
        }
    }
}

/// One phase of the run.
#[derive(Debug, Serialize)]
pub(crate) struct Phase {
    pub(crate) name: String,
    /// The provider refused on its own here (503s, 403s).
    pub(crate) costly: bool,
    pub(crate) secs: f64,
    pub(crate) accepted: u64,
    pub(crate) rate_per_sec: f64,
    /// Time beyond what the limit needed for what was accepted.
    pub(crate) cost_secs: f64,
    /// `cost_secs` over the whole run.
    pub(crate) share_of_run: f64,
    /// Refusals the provider answered in this phase, by HTTP status.
    pub(crate) refused: BTreeMap<u16, u64>,
    /// The status this phase is there to show when the provider never answered it here
    /// (the pace stayed under the limit, so the quirk had nothing to refuse).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) missing: Option<u16>,
}

/// Every phase, and the rate outside the costly ones.
#[derive(Debug, Serialize)]
pub(crate) struct Phases {
    pub(crate) limit_per_sec: f64,
    /// Accepted ÷ (time × limit) over the phases where the provider did not refuse on its
    /// own (start-up and drain included).
    pub(crate) of_limit_outside_costly: f64,
    pub(crate) phases: Vec<Phase>,
}

impl Phases {
    /// The table for the text report.
    pub(crate) fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n  {:<40} {:>7} {:>8} {:>8} {:>11}  refused",
            "phase (by the provider's request count)", "time", "accepted", "rate", "cost"
        );
        for p in &self.phases {
            let refused: Vec<String> = p
                .refused
                .iter()
                .map(|(st, n)| format!("{n}×{st}"))
                .collect();
            let _ = writeln!(
                s,
                "  {:<40} {:>6.1}s {:>8} {:>6.1}/s {:>5.1}s {:>3.0}%  {}",
                p.name,
                p.secs,
                p.accepted,
                p.rate_per_sec,
                p.cost_secs,
                p.share_of_run * 100.0,
                if refused.is_empty() {
                    "none".to_owned()
                } else {
                    refused.join(" ")
                }
            );
        }
        for p in &self.phases {
            if let Some(status) = p.missing {
                let _ = writeln!(
                    s,
                    "  note: \"{}\" got no {status}: the pace stayed under the limit there, so \
                     the quirk had nothing to refuse",
                    p.name
                );
            }
        }
        let _ = writeln!(
            s,
            "  cost = time beyond accepted / {:.0}/s; % = share of the whole run. Outside the 503 \
             and 403 phases: {:.2} of the limit",
            self.limit_per_sec, self.of_limit_outside_costly
        );
        s
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mark(secs: u64, accepted: u64, refused: &[(u16, u64)]) -> Mark {
        Mark {
            at: Duration::from_secs(secs),
            accepted,
            refused: refused.iter().copied().collect(),
        }
    }

    /// A run whose 503 phase got 503s and whose 403 phase got none: each phase counts its
    /// own refusals, and the report says the 403 quirk never showed.
    #[test]
    fn a_phase_that_never_got_its_status_says_so() {
        let timeline = Timeline {
            first_request: Some(mark(1, 0, &[])),
            crossed: vec![
                mark(3, 100, &[(429, 2)]),
                mark(6, 180, &[(429, 2)]),
                mark(7, 220, &[(429, 2), (503, 40)]),
                mark(9, 300, &[(429, 2), (503, 40)]),
                mark(10, 340, &[(429, 2), (503, 40)]),
            ],
        };
        let p = timeline.phases(&mark(12, 400, &[(429, 3), (503, 40)]), 40.0);
        let by_name = |n: &str| p.phases.iter().find(|p| p.name == n).unwrap();
        assert_eq!(by_name(FIRST).refused, [(429, 2)].into_iter().collect());
        let storm = by_name("503 to every second request");
        assert_eq!(storm.refused, [(503, 40)].into_iter().collect());
        assert_eq!(storm.missing, None);
        let gateway = by_name("403 with Retry-After: 0");
        assert!(gateway.refused.is_empty());
        assert_eq!(gateway.missing, Some(403));
        let text = p.render();
        assert!(
            text.contains("\"403 with Retry-After: 0\" got no 403"),
            "{text}"
        );
        assert!(!text.contains("got no 503"), "{text}");
        assert!(text.contains("40×503"), "{text}");
    }
}
