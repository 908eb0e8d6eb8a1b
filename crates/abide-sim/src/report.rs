//! What a run measured, and the aligned text table printed per scenario.
//!
//! What the remote said (`throttles`, `rejections`, `blocked_answers`) is counted apart from
//! what the client decided (`delivered`, `lost`, `bad`, `deferred`).

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::policy::PolicyKind;

/// Counts in one bucket of virtual time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Requests sent.
    pub attempts: u32,
    /// Of which answered 429.
    pub throttles: u32,
    /// Items delivered.
    pub delivered: u32,
}

/// One policy's outcome in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    /// The policy.
    pub policy: PolicyKind,
    /// Logical requests offered.
    pub logical: usize,
    /// Requests sent, retries included.
    pub attempts: u64,
    /// Throttles: answers with status 429 (rate limit and suspension), and rate-limit
    /// refusals in another shape (a GraphQL `200`).
    pub throttles: u64,
    /// Logical requests that met at least one 429.
    pub throttled_items: usize,
    /// Answers that were not 2xx, of any status.
    pub rejections: u64,
    /// Answers given because the account was suspended.
    pub blocked_answers: u64,
    /// Items accepted by the provider.
    pub delivered: usize,
    /// Good items written off by the client (throttle or transient error taken as final).
    pub lost: usize,
    /// Items the client took as delivered that the provider never accepted (a throttle
    /// answered `200`, read by its status): lost without anyone knowing.
    pub false_delivered: usize,
    /// Genuinely bad items that failed terminally (the correct outcome for them).
    pub terminal_bad: usize,
    /// Items parked for a person after the attempt cap (abide); not lost.
    pub deferred: usize,
    /// Items still unresolved at the horizon (e.g. a worker asleep for a day).
    pub unfinished: usize,
    /// Delivered as a fraction of what the limit allowed from the start to completion.
    pub goodput: f64,
    /// Virtual time the last item was resolved; `None` if some never were.
    #[serde(rename = "completion_secs", serialize_with = "opt_secs")]
    pub completion: Option<Duration>,
    /// How many times the provider suspended the account.
    pub suspensions: u32,
    /// Total suspended time.
    #[serde(rename = "suspended_secs", serialize_with = "secs")]
    pub suspended_for: Duration,
    /// Seconds from each limit change until the client converged (limit-changes only);
    /// `None` for a change it never converged after.
    pub converge_secs: Vec<Option<f64>>,
    /// Time series, one bucket per [`ScenarioReport::bucket_secs`].
    pub series: Vec<Bucket>,
    /// 99th percentile of the round trip of accepted requests (send to answer, the time a
    /// delaying gateway held them included); `None` if none was accepted.
    #[serde(rename = "p99_accepted_secs", serialize_with = "opt_secs")]
    pub p99_accepted: Option<Duration>,
    /// Round trips of accepted requests (for the percentile; not reported).
    #[serde(skip)]
    pub(crate) accepted_latencies: Vec<Duration>,
}

impl PolicyResult {
    pub(crate) fn new(policy: PolicyKind, logical: usize) -> Self {
        Self {
            policy,
            logical,
            attempts: 0,
            throttles: 0,
            throttled_items: 0,
            rejections: 0,
            blocked_answers: 0,
            delivered: 0,
            lost: 0,
            false_delivered: 0,
            terminal_bad: 0,
            deferred: 0,
            unfinished: 0,
            goodput: 0.0,
            completion: None,
            suspensions: 0,
            suspended_for: Duration::ZERO,
            converge_secs: Vec::new(),
            series: Vec::new(),
            p99_accepted: None,
            accepted_latencies: Vec::new(),
        }
    }

    /// Items delivered, lost, failed or deferred so far.
    pub fn resolved(&self) -> usize {
        self.delivered + self.lost + self.false_delivered + self.terminal_bad + self.deferred
    }

    /// 429 answers per logical request.
    pub fn throttles_per_request(&self) -> f64 {
        ratio(self.throttles as f64, self.logical as f64)
    }

    /// 429 answers per logical request that met at least one (what incident reports call
    /// "429s generated per logical request": 1 for no-retry by construction).
    pub fn throttles_per_throttled_request(&self) -> f64 {
        ratio(self.throttles as f64, self.throttled_items as f64)
    }

    /// Non-2xx answers per logical request.
    pub fn rejections_per_request(&self) -> f64 {
        ratio(self.rejections as f64, self.logical as f64)
    }

    /// 429 answers as a fraction of attempts.
    pub fn throttled_fraction(&self) -> f64 {
        ratio(self.throttles as f64, self.attempts as f64)
    }

    /// The most 429 answers within any `window` of consecutive buckets of `bucket` each
    /// (e.g. the peak five minutes).
    pub fn peak_throttles(&self, bucket: Duration, window: Duration) -> u64 {
        let span = (window.as_nanos() / bucket.as_nanos().max(1)).max(1) as usize;
        let t: Vec<u64> = self.series.iter().map(|b| u64::from(b.throttles)).collect();
        if t.len() <= span {
            return t.iter().sum();
        }
        t.windows(span).map(|w| w.iter().sum()).max().unwrap_or(0)
    }

    /// True when the provider's abuse protection suspended the account at least once.
    pub fn blocked(&self) -> bool {
        self.suspensions > 0
    }
}

/// `rows` as a plain-text table: the first column left-aligned, the others right-aligned,
/// two spaces between columns.
pub(crate) fn write_table(f: &mut fmt::Formatter<'_>, rows: &[Vec<String>]) -> fmt::Result {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let widths: Vec<usize> = (0..first.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        writeln!(f, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_secs<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Every policy's result in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioReport {
    /// Scenario name, as given to `--scenario`.
    pub scenario: &'static str,
    /// What it replays.
    pub summary: &'static str,
    /// The seed used.
    pub seed: u64,
    /// Width of one time-series bucket, seconds.
    pub bucket_secs: f64,
    /// Virtual times (seconds) at which the provider's limit changed, for the plot.
    pub limit_changes_secs: Vec<f64>,
    /// One entry per policy, in [`PolicyKind::ALL`] order.
    pub results: Vec<PolicyResult>,
}

impl ScenarioReport {
    /// The result of `policy`, if it ran.
    pub fn result(&self, policy: PolicyKind) -> Option<&PolicyResult> {
        self.results.iter().find(|r| r.policy == policy)
    }
}

impl fmt::Display for ScenarioReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "== {} (seed {}) ==", self.scenario, self.seed)?;
        writeln!(f, "{}", self.summary)?;
        let converge = self.results.iter().any(|r| !r.converge_secs.is_empty());
        let mut head = vec![
            "policy",
            "logical",
            "attempts",
            "429s",
            "429/req",
            "429/hit",
            "rej/req",
            "delivered",
            "lost",
            "bad",
            "deferred",
            "unfinished",
            "goodput",
            "done at",
            "blocked",
        ];
        let false_ok = self.results.iter().any(|r| r.false_delivered > 0);
        if false_ok {
            head.push("false ok");
        }
        if converge {
            head.extend(["throttled", "converge"]);
        }
        let mut rows = vec![head.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()];
        for r in &self.results {
            let mut row = vec![
                r.policy.as_str().to_owned(),
                r.logical.to_string(),
                r.attempts.to_string(),
                r.throttles.to_string(),
                format!("{:.2}", r.throttles_per_request()),
                format!("{:.2}", r.throttles_per_throttled_request()),
                format!("{:.2}", r.rejections_per_request()),
                r.delivered.to_string(),
                r.lost.to_string(),
                r.terminal_bad.to_string(),
                r.deferred.to_string(),
                r.unfinished.to_string(),
                format!("{:.0}%", r.goodput * 100.0),
                r.completion.map_or_else(
                    || "never".to_owned(),
                    |d| format!("{:.0}s", d.as_secs_f64()),
                ),
                if r.blocked() {
                    format!(
                        "yes {}x {:.0}s",
                        r.suspensions,
                        r.suspended_for.as_secs_f64()
                    )
                } else {
                    "no".to_owned()
                },
            ];
            if false_ok {
                row.push(r.false_delivered.to_string());
            }
            if converge {
                row.push(format!("{:.1}%", r.throttled_fraction() * 100.0));
                let c: Vec<String> = r
                    .converge_secs
                    .iter()
                    .map(|c| c.map_or_else(|| "never".to_owned(), |s| format!("{s:.0}s")))
                    .collect();
                row.push(c.join(" / "));
            }
            rows.push(row);
        }
        write_table(f, &rows)
    }
}
