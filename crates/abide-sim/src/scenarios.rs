//! The incident replays. Each scenario is one provider configuration and one offered load,
//! run once per policy with the same seed. Scaled so `--all` takes seconds: minutes of virtual
//! time stand for the incidents' hours, and thresholds are scaled with them.

use std::time::Duration;

use abide_core::PacerConfig;

use crate::engine::{self, RunConfig};
use crate::policy::PolicyKind;
use crate::provider::{schedule_at, Abuse, DelayBound, Outage, ProviderConfig, RetryAfterForm};
use crate::report::ScenarioReport;

abide_core::named_enum! {
    /// A named incident replay; `as_str` is the name used by `--scenario`, `ALL` the
    /// `--all` order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Scenario("scenario") {
        /// A 10/s limit appears under 14/s offered by 40 workers; grace period, then abuse blocking.
        LimitAppears = "limit-appears",
        /// `Retry-After` switches from seconds to an HTTP-date at the start of the daily peak.
        HttpDateSwitch = "http-date-switch",
        /// An edge answers `403` with `Retry-After: 0` for half a minute.
        RetryAfterZero = "retry-after-zero",
        /// A five-second blip of `503` with `Retry-After: 86400`.
        RetryAfterHuge = "retry-after-huge",
        /// A queue above the limit: throttle-as-terminal (two buckets) versus three buckets.
        QueueThrottling = "queue-throttling",
        /// The limit changes during the run: 10/s, then 5/s, then 20/s.
        LimitChanges = "limit-changes",
        /// The same limit changes without rate-limit headers: only throttles tell.
        LimitChangesBlind = "limit-changes-blind",
        /// The politeness bench's set-up in virtual time: a GCRA at 200/s, then 100/s, then
        /// 300/s, small burst, `Retry-After` in whole seconds, no rate-limit headers, a pacer
        /// starting at 1,000/s.
        GcraNoHeaders = "gcra-no-headers",
        /// A short batch from a cold start: 3,000 items at once, 40 workers, a fixed-window
        /// limit of 100 per second with RateLimit headers, and no rate hint.
        BurstJob = "burst-job",
        /// The same batch against the same limiter sending no RateLimit headers.
        BurstJobBlind = "burst-job-blind",
        /// A GraphQL API that throttles with `200` and the query cost in the body.
        Graphql200 = "graphql-200",
        /// A gateway's shared quota exhausted at peak; its 429s carry no `Retry-After`.
        GatewayBare = "gateway-bare",
        /// The same gateway, each 429 carrying the gate's own reset rounded up.
        GatewayReset = "gateway-reset",
        /// The same gateway holding requests over the rate until their slot (at most 50
        /// waiting, 5 s each), refusing beyond that as gateway-reset does.
        GatewayDelay = "gateway-delay",
    }
}

const SEC: Duration = Duration::from_secs(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

impl Scenario {
    /// One paragraph: what is replayed.
    pub fn summary(self) -> &'static str {
        match self {
            Scenario::LimitAppears => {
                "A 10/s limit (429, Retry-After in seconds) appears under 14/s offered by 40 \
                 workers; 2 min grace, then >300 rejections a minute suspends the account for \
                 30 min."
            }
            Scenario::HttpDateSwitch => {
                "10/s limit; at 2 min Retry-After switches from seconds to an HTTP-date just as \
                 load peaks at 14/s over 40 workers; >300 rejections a minute suspends for an \
                 hour."
            }
            Scenario::RetryAfterZero => {
                "An edge answers 403 with Retry-After: 0 to every request for 30 s; >200 \
                 rejections in 10 s suspends for 30 min."
            }
            Scenario::RetryAfterHuge => {
                "A 5 s blip of 503 with Retry-After: 86400 under a 10/s limit and 8/s offered."
            }
            Scenario::QueueThrottling => {
                "A queue offered 12/s against 10/s, 1 in 700 items genuinely bad: two buckets \
                 (no-retry: throttle = terminal) versus three."
            }
            Scenario::LimitChanges => {
                "12/s offered while the limit moves 10/s -> 5/s (at 200 s) -> 20/s (at 400 s), \
                 with RateLimit headers; converge = first 10 s window after a change with <= 1% \
                 throttled and >= 80% of min(limit, offered) delivered."
            }
            Scenario::LimitChangesBlind => {
                "As limit-changes, but the provider sends no RateLimit headers: the pacer learns \
                 each limit from throttles alone (429 with Retry-After in seconds)."
            }
            Scenario::GcraNoHeaders => {
                "The loopback politeness bench in virtual time: 32 workers, 2 ms round trips, \
                 600/s offered against a GCRA (burst 10) at 200/s, 100/s from 100 s, 300/s \
                 from 200 s; 429 with Retry-After rounded up to whole seconds (so 1 s), no \
                 RateLimit headers; abide's pacer starts at 1,000/s."
            }
            Scenario::BurstJob => {
                "A batch of 3,000 items queued at once, 40 workers, 2 ms round trips, against \
                 a fixed window of 100 requests per second (RateLimit-Policy q=100;w=1, 429 \
                 with Retry-After to the window's end, rounded up); abide starts cold, with \
                 no rate hint (issue 9)."
            }
            Scenario::BurstJobBlind => {
                "As burst-job, but the limiter sends no RateLimit headers: abide searches \
                 from a cold start."
            }
            Scenario::Graphql200 => {
                "A GraphQL API (Shopify's shape) limited to 10/s under 12/s offered answers \
                 every throttle 200 with a THROTTLED error and the query cost, no \
                 Retry-After: a client that trusts the status counts the throttled items \
                 as delivered (false ok); abide reads the body and waits out the cost."
            }
            Scenario::GatewayBare => {
                "A gateway's shared quota of 600 a minute (a fixed window) under 8/s, a \
                 10-minute peak of 14/s, then 8/s, over 40 workers; its 429s carry no \
                 Retry-After, so clients guess."
            }
            Scenario::GatewayReset => {
                "As gateway-bare, but each 429 carries the gate's own reset as Retry-After, \
                 rounded up."
            }
            Scenario::GatewayDelay => {
                "As gateway-reset, but the gateway holds a request over the rate until its \
                 slot while at most 50 wait and none longer than 5 s (nginx limit_req burst \
                 delay), refusing beyond that with the honest Retry-After; the quota is the \
                 same 600 a minute as a GCRA with all of it as the burst."
            }
        }
    }

    /// The set-up of this scenario.
    pub fn config(self) -> RunConfig {
        let provider = ProviderConfig {
            limits: vec![(Duration::ZERO, 10.0)],
            burst: 10.0,
            window: None,
            retry_after: vec![(Duration::ZERO, RetryAfterForm::Seconds)],
            throttle_status: 429,
            graphql_throttle: false,
            abuse: None,
            outages: vec![],
            bad_every: None,
            forbidden_every: None,
            rate_limit_headers: false,
            delay: None,
        };
        let base = RunConfig {
            provider,
            workers: 40,
            latency: Duration::from_millis(50),
            items: 0,
            arrivals: vec![],
            horizon: secs(3 * 3600),
            bucket: secs(10),
            pacer: PacerConfig::default(),
        };
        match self {
            Scenario::LimitAppears => {
                let mut c = base;
                c.items = 14 * 600;
                c.arrivals = vec![(Duration::ZERO, 14.0)];
                c.provider.window = Some(secs(60));
                c.provider.abuse = Some(Abuse {
                    window: secs(60),
                    max_rejections: 300,
                    suspend_for: secs(1800),
                    enforce_after: secs(120),
                });
                c
            }
            Scenario::HttpDateSwitch => {
                let mut c = base;
                c.arrivals = vec![(Duration::ZERO, 8.0), (secs(120), 14.0), (secs(420), 8.0)];
                c.items = 8 * 120 + 14 * 300 + 8 * 180;
                c.provider.window = Some(secs(60));
                c.provider.retry_after = vec![
                    (Duration::ZERO, RetryAfterForm::Seconds),
                    (secs(120), RetryAfterForm::HttpDate),
                ];
                c.provider.abuse = Some(Abuse {
                    window: secs(60),
                    max_rejections: 300,
                    suspend_for: secs(3600),
                    enforce_after: Duration::ZERO,
                });
                c
            }
            Scenario::RetryAfterZero => {
                let mut c = base;
                c.provider.limits = vec![(Duration::ZERO, 20.0)];
                c.items = 8 * 600;
                c.arrivals = vec![(Duration::ZERO, 8.0)];
                c.provider.outages = vec![Outage {
                    from: secs(60),
                    until: secs(90),
                    status: 403,
                    retry_after: RetryAfterForm::Zero,
                }];
                c.provider.abuse = Some(Abuse {
                    window: secs(10),
                    max_rejections: 200,
                    suspend_for: secs(1800),
                    enforce_after: Duration::ZERO,
                });
                c
            }
            Scenario::RetryAfterHuge => {
                let mut c = base;
                c.items = 8 * 600;
                c.arrivals = vec![(Duration::ZERO, 8.0)];
                c.provider.outages = vec![Outage {
                    from: secs(120),
                    until: secs(125),
                    status: 503,
                    retry_after: RetryAfterForm::Day,
                }];
                c
            }
            Scenario::QueueThrottling => {
                let mut c = base;
                c.items = 12 * 600;
                c.arrivals = vec![(Duration::ZERO, 12.0)];
                c.provider.burst = 5.0;
                c.provider.bad_every = Some(700);
                c
            }
            Scenario::LimitChanges => {
                let mut c = base;
                c.items = 12 * 600;
                c.arrivals = vec![(Duration::ZERO, 12.0)];
                c.provider.limits =
                    vec![(Duration::ZERO, 10.0), (secs(200), 5.0), (secs(400), 20.0)];
                c.provider.burst = 5.0;
                c.provider.rate_limit_headers = true;
                c.bucket = SEC;
                c
            }
            Scenario::LimitChangesBlind => {
                let mut c = Scenario::LimitChanges.config();
                c.provider.rate_limit_headers = false;
                c
            }
            Scenario::GcraNoHeaders => {
                let mut c = base;
                c.workers = 32;
                c.latency = Duration::from_millis(2);
                c.provider.limits = vec![
                    (Duration::ZERO, 200.0),
                    (secs(100), 100.0),
                    (secs(200), 300.0),
                ];
                c.provider.burst = 10.0;
                c.arrivals = vec![(Duration::ZERO, 600.0)];
                c.horizon = secs(300);
                c.items = 600 * 300;
                c.bucket = SEC;
                c.pacer.initial_rate = 1000.0;
                c
            }
            Scenario::BurstJob => {
                let mut c = base;
                c.latency = Duration::from_millis(2);
                c.provider.limits = vec![(Duration::ZERO, 100.0)];
                c.provider.window = Some(SEC);
                c.provider.rate_limit_headers = true;
                c.arrivals = vec![(Duration::ZERO, 1_000_000.0)];
                c.items = 3000;
                c.horizon = secs(600);
                c.bucket = SEC;
                // No rate hint: what an outbox with 40 senders starts at.
                c.pacer.initial_rate = PacerConfig::cold_start_rate(c.workers);
                c
            }
            Scenario::BurstJobBlind => {
                let mut c = Scenario::BurstJob.config();
                c.provider.rate_limit_headers = false;
                c
            }
            Scenario::Graphql200 => {
                let mut c = base;
                c.items = 12 * 600;
                c.arrivals = vec![(Duration::ZERO, 12.0)];
                c.provider.burst = 5.0;
                c.provider.graphql_throttle = true;
                c
            }
            Scenario::GatewayBare => {
                let mut c = base;
                c.arrivals = vec![(Duration::ZERO, 8.0), (secs(120), 14.0), (secs(720), 8.0)];
                c.items = 8 * 120 + 14 * 600 + 8 * 300;
                c.horizon = secs(3600);
                // The quota of a minute (600), exhausted at the peak.
                c.provider.window = Some(secs(60));
                c.provider.retry_after = vec![(Duration::ZERO, RetryAfterForm::Absent)];
                c
            }
            Scenario::GatewayReset => {
                let mut c = Scenario::GatewayBare.config();
                c.provider.retry_after = vec![(Duration::ZERO, RetryAfterForm::Seconds)];
                c
            }
            Scenario::GatewayDelay => {
                let mut c = Scenario::GatewayReset.config();
                // The same minute's quota as a GCRA (600 per 60 s, all of it as the burst),
                // the algorithm a request's slot can be computed in.
                c.provider.window = None;
                c.provider.burst = 600.0;
                c.provider.delay = Some(DelayBound {
                    burst: 50,
                    max_delay: secs(5),
                });
                c
            }
        }
    }

    /// Run every policy with `seed`.
    pub fn run(self, seed: u64) -> ScenarioReport {
        self.run_policies(&PolicyKind::ALL, seed)
    }

    /// Run the given policies with `seed`.
    pub fn run_policies(self, policies: &[PolicyKind], seed: u64) -> ScenarioReport {
        let cfg = self.config();
        let mut results: Vec<_> = policies
            .iter()
            .map(|&p| engine::run(&cfg, p, seed))
            .collect();
        if matches!(
            self,
            Scenario::LimitChanges | Scenario::LimitChangesBlind | Scenario::GcraNoHeaders
        ) {
            for r in &mut results {
                r.converge_secs = converge(&cfg, &r.series);
            }
        }
        ScenarioReport {
            scenario: self.as_str(),
            summary: self.summary(),
            seed,
            bucket_secs: cfg.bucket.as_secs_f64(),
            limit_changes_secs: cfg
                .provider
                .limits
                .iter()
                .map(|(t, _)| t.as_secs_f64())
                .collect(),
            results,
        }
    }
}

/// Seconds from each limit change to the first 10 s window with at most 1 % of attempts
/// throttled and at least 80 % of min(limit, offered) delivered; `None` if none before the
/// next change (or the end of the series).
fn converge(cfg: &RunConfig, series: &[crate::report::Bucket]) -> Vec<Option<f64>> {
    let width = cfg.bucket.as_secs_f64();
    let span = (10.0 / width).ceil() as usize;
    let limits = &cfg.provider.limits;
    limits
        .iter()
        .enumerate()
        .map(|(k, (from, rate))| {
            let start = engine::bucket_of(*from, cfg.bucket);
            let end = limits
                .get(k + 1)
                .map_or(series.len(), |(t, _)| engine::bucket_of(*t, cfg.bucket));
            let offered = schedule_at(&cfg.arrivals, *from).unwrap_or(0.0);
            let want = 0.8 * rate.min(offered) * span as f64 * width;
            (start..end.saturating_sub(span).max(start))
                .find(|&b| {
                    let w = &series[b.min(series.len())..(b + span).min(series.len())];
                    let attempts: u32 = w.iter().map(|x| x.attempts).sum();
                    let throttles: u32 = w.iter().map(|x| x.throttles).sum();
                    let delivered: u32 = w.iter().map(|x| x.delivered).sum();
                    attempts > 0
                        && f64::from(throttles) <= 0.01 * f64::from(attempts)
                        && f64::from(delivered) >= want
                })
                .map(|b| (b - start) as f64 * width)
        })
        .collect()
}
