//! `abide demo`'s phases: the provider switches its quirks on by request number; this
//! records when the run crossed each switch (sampling the provider's own counters) and
//! what share of the run each phase cost against the advertised limit.
//!
//! A phase's cost is the time it took beyond what the limit needed for what it accepted:
//! `duration − accepted ÷ rate`. The costs (plus start-up and the drain after the last
//! request) add up to the whole run's shortfall, so a report can say "the 403 storm cost
//! 9 % of the run" instead of leaving a user to wonder why 75/s gave 55/s.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use abide_core::Clock;
use abide_fake::RunningProvider;
use serde::Serialize;

/// One quirk switch: at `pct` % of the messages (by the provider's request count) the
/// provider applies `spec` (an `abide provider --schedule` entry without its `@#n`); the
/// phase it begins is called `name`. `costly`: the provider refuses on its own there (a
/// 503 burst, a 403 storm), whatever the sender's pace.
pub(crate) struct Switch {
    pub(crate) pct: u64,
    pub(crate) spec: &'static str,
    pub(crate) name: &'static str,
    pub(crate) costly: bool,
}

/// The demo's quirks, in order.
pub(crate) const SWITCHES: [Switch; 5] = [
    Switch {
        pct: 25,
        spec: "retry-after=imf-fixdate",
        name: "Retry-After as an HTTP-date",
        costly: false,
    },
    Switch {
        pct: 45,
        spec: "fail-503=0.5",
        name: "503 to every second request",
        costly: true,
    },
    Switch {
        pct: 50,
        spec: "fail-503=0",
        name: "HTTP-date, 503s over",
        costly: false,
    },
    Switch {
        pct: 65,
        spec: "throttle=403",
        name: "403 with Retry-After: 0",
        costly: true,
    },
    Switch {
        pct: 75,
        spec: "throttle=429",
        name: "429 again",
        costly: false,
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

/// When each switch was crossed: (time since the start, accepted by then).
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    first_request: Option<(Duration, u64)>,
    crossed: Vec<(Duration, u64)>,
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
            let at = clock.monotonic().saturating_duration_since(start);
            if s.requests > 0 && self.first_request.is_none() {
                self.first_request = Some((at, s.accepted));
            }
            while let Some(sw) = SWITCHES.get(self.crossed.len()) {
                if s.requests < request_at(items, sw.pct) {
                    break;
                }
                self.crossed.push((at, s.accepted));
            }
        }
    }

    /// The phases of a run that took `total` and ended with `accepted` accepted, against a
    /// limit of `rate` per second.
    #[allow(clippy::cast_precision_loss)] // message counts stay far below 2^53
    pub(crate) fn phases(&self, total: Duration, accepted: u64, rate: f64) -> Phases {
        let mut phases = Vec::new();
        let (begin, begin_acc) = self.first_request.unwrap_or((Duration::ZERO, 0));
        let mut push = |name: &str, costly: bool, from: (Duration, u64), to: (Duration, u64)| {
            let secs = to.0.saturating_sub(from.0).as_secs_f64();
            let acc = to.1.saturating_sub(from.1);
            phases.push(Phase {
                name: name.to_owned(),
                costly,
                secs,
                accepted: acc,
                rate_per_sec: if secs > 0.0 { acc as f64 / secs } else { 0.0 },
                cost_secs: (secs - acc as f64 / rate).max(0.0),
                share_of_run: 0.0,
            });
        };
        push(
            "start-up (to the first request)",
            false,
            (Duration::ZERO, 0),
            (begin, begin_acc),
        );
        let mut from = (begin, begin_acc);
        let mut name = FIRST;
        let mut costly = false;
        for (sw, &mark) in SWITCHES.iter().zip(&self.crossed) {
            push(name, costly, from, mark);
            (from, name, costly) = (mark, sw.name, sw.costly);
        }
        push(name, costly, from, (total, accepted));
        let total_secs = total.as_secs_f64().max(f64::EPSILON);
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
            "\n  {:<40} {:>7} {:>8} {:>8} {:>11}",
            "phase (by the provider's request count)", "time", "accepted", "rate", "cost"
        );
        for p in &self.phases {
            let _ = writeln!(
                s,
                "  {:<40} {:>6.1}s {:>8} {:>6.1}/s {:>5.1}s {:>3.0}%",
                p.name,
                p.secs,
                p.accepted,
                p.rate_per_sec,
                p.cost_secs,
                p.share_of_run * 100.0
            );
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
