//! The server's side of one incident: the same client population against three gateways
//! (`gateway-bare`, `gateway-reset`, `gateway-delay`), side by side.
//!
//! What the seed's operators counted was application 429s per five minutes at the peak;
//! beside it, goodput (delivered ÷ what the quota allowed until completion) and the 99th
//! percentile round trip of accepted requests (what holding requests costs the callers).

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::policy::PolicyKind;
use crate::report::ScenarioReport;
use crate::Scenario;

/// The gateways compared, in table order.
pub const GATEWAYS: [Scenario; 3] = [
    Scenario::GatewayBare,
    Scenario::GatewayReset,
    Scenario::GatewayDelay,
];

/// The window 429s are counted over (the seed's five minutes).
pub const PEAK_WINDOW: Duration = Duration::from_secs(300);

/// One policy against one gateway.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cell {
    /// 429 answers in the worst five minutes.
    pub peak_429s: u64,
    /// Delivered ÷ what the quota allowed until completion.
    pub goodput: f64,
    /// 99th percentile round trip of accepted requests, seconds.
    pub p99_accepted_secs: Option<f64>,
}

/// Every policy against every gateway.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The seed used.
    pub seed: u64,
    /// Scenario names, in column order.
    pub gateways: Vec<&'static str>,
    /// One row per policy: its cell against each gateway, in column order.
    pub rows: Vec<(PolicyKind, Vec<Cell>)>,
}

impl Comparison {
    /// Build from the three gateway reports (in [`GATEWAYS`] order, the same policies).
    pub fn of(reports: &[ScenarioReport]) -> Self {
        let policies: Vec<PolicyKind> = reports
            .first()
            .map(|r| r.results.iter().map(|x| x.policy).collect())
            .unwrap_or_default();
        let rows = policies
            .into_iter()
            .map(|p| {
                let cells = reports
                    .iter()
                    .filter_map(|r| {
                        let x = r.result(p)?;
                        let bucket = Duration::from_secs_f64(r.bucket_secs);
                        Some(Cell {
                            peak_429s: x.peak_throttles(bucket, PEAK_WINDOW),
                            goodput: x.goodput,
                            p99_accepted_secs: x.p99_accepted.map(|d| d.as_secs_f64()),
                        })
                    })
                    .collect();
                (p, cells)
            })
            .collect();
        Self {
            seed: reports.first().map_or(0, |r| r.seed),
            gateways: reports.iter().map(|r| r.scenario).collect(),
            rows,
        }
    }

    /// Run the three gateways with `policies` and `seed`.
    pub fn run(policies: &[PolicyKind], seed: u64) -> Self {
        let reports: Vec<_> = GATEWAYS
            .iter()
            .map(|s| s.run_policies(policies, seed))
            .collect();
        Self::of(&reports)
    }

    /// 429s in the worst five minutes summed over the population, per gateway.
    pub fn population_peak_429s(&self) -> Vec<u64> {
        (0..self.gateways.len())
            .map(|g| self.rows.iter().map(|(_, c)| c[g].peak_429s).sum())
            .collect()
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "== gateways side by side (seed {}): 429s in the peak 5 min / goodput / p99 of \
             accepted requests ==",
            self.seed
        )?;
        let mut rows = vec![std::iter::once("policy".to_owned())
            .chain(self.gateways.iter().map(|g| (*g).to_owned()))
            .collect::<Vec<_>>()];
        for (p, cells) in &self.rows {
            let mut row = vec![p.as_str().to_owned()];
            row.extend(cells.iter().map(|c| {
                let p99 = c
                    .p99_accepted_secs
                    .map_or_else(|| "-".to_owned(), |s| format!("{:.0} ms", s * 1e3));
                format!("{} / {:.0}% / {p99}", c.peak_429s, c.goodput * 100.0)
            }));
            rows.push(row);
        }
        let mut total = vec!["all".to_owned()];
        total.extend(
            self.population_peak_429s()
                .iter()
                .map(|n| format!("{n} 429s")),
        );
        rows.push(total);
        crate::report::write_table(f, &rows)
    }
}
