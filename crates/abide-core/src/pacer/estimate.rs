//! The rate: a ceiling estimate of the host's limit, learned from what it accepted, and the
//! cubic recovery and probing around it (or slow start while nothing is known), under an
//! advertised target. See "Why not plain AIMD" in the [module docs](super).

use std::time::{Duration, Instant};

use super::config::{PacerConfig, MAX_PAUSE};
use super::noise::{self, Noise, Outcome};
use super::pauses::Pauses;
use super::schedule::Schedule;
use crate::budget::Buckets;
use crate::classify::Verdict;

mod accepted;
mod known_noise;
mod trial;

/// Clean-time credit per success, at most.
const MAX_CREDIT: Duration = Duration::from_secs(1);
/// How far the rate may run ahead of the rate the host was recently seen to accept.
const LEAD: f64 = 0.25;
/// Requests near the ceiling between two probes (they stretch `K` at low rates).
const PROBE_REQUESTS: f64 = 100.0;
/// `K` is at least this many times the server's delay on the throttle that ended the last
/// probe: each probe costs that pause, so one per `K` loses about `1 / PROBE_PAUSES`.
const PROBE_PAUSES: f64 = 20.0;
/// Slow start (nothing known) doubles the rate per this much clean time, as TCP slow start
/// doubles its window per round trip; [`LEAD`] over what the host accepted in the last
/// [`ROUND_SPAN`] bounds it. It was `recovery / 10` (1.5 s), and against a 100/s limit a
/// cold start at 10/s took about 25 s to get there.
const SEARCH_ROUND: Duration = Duration::from_millis(250);
/// Slow start's doubling time once noise is known (see `curve`).
const NOISY_SEARCH_ROUND: Duration = Duration::from_secs(1);
/// The span over which slow start measures what the host accepted: short, so that the
/// bound follows the climb rather than the average of the last seconds.
const ROUND_SPAN: Duration = Duration::from_millis(500);
const ROUND_BUCKETS: u32 = 5;
/// A decrease that finds fewer than this fraction of the rate accepted is an outage, not a
/// limit: the rate halves (never less) and no ceiling is learned.
const OUTAGE: f64 = 0.5;
/// Through an outage the rate halves no lower than this fraction of the rate held from
/// before it: the pauses already hold the host back, and 40 workers reserving slots at a
/// 0.1/s floor queued them 400 s deep, which outlived the outage by far.
const OUTAGE_FLOOR: f64 = 0.125;
/// Buckets per window in the throttle counters.
const BUCKETS: u32 = 10;
/// The short counter covers `window / RECENT`, in `RECENT_BUCKETS` buckets.
const RECENT: u32 = 5;
const RECENT_BUCKETS: u32 = 4;
/// The probe clock stops here (in units of `recovery`): the curve is far above any rate by
/// then, and the cube stays finite.
const MAX_PROBE_K: f64 = 1000.0;

/// What the pacer believes about the host's limit, and the rate that follows from it.
#[derive(Debug)]
pub(super) struct Estimate {
    /// Current rate, requests per second.
    pub(super) rate: f64,
    /// Target from advertised rate-limit headers (already × headroom), if any.
    pub(super) target: Option<f64>,
    /// Counts that drive decreases: (responses, throttles); cleared on each decrease.
    decide: Buckets,
    /// Every response and throttle the remote sent; never cleared.
    pub(super) observed: Buckets,
    /// The same over the last `window / 5`: how fast the host is accepting right now.
    recent: Buckets,
    /// The same over the last [`ROUND_SPAN`]: what bounds slow start.
    round: Buckets,
    /// When the pacer was created (the counters cover less than a window before then + window).
    born: Instant,
    /// Estimated limit, from the last decrease; `None` before the first.
    pub(super) ceiling: Option<f64>,
    /// Centre of the cubic curve (the ceiling, or the initial rate before any decrease).
    anchor: f64,
    /// Rate right after the last decrease, base of the additive lower bound.
    base: f64,
    /// Clean time credited since the last decrease.
    probe: Duration,
    /// When the last decrease happened.
    decreased_at: Option<Instant>,
    /// When the first search ended (the first decrease); `None` before it, and again once
    /// the throttles are known to be noise (the search starts over).
    searched_at: Option<Instant>,
    /// Answers arriving before this may be for slots reserved before the last decrease
    /// (the end of the queue then, plus a latency allowance; for
    /// [`Pacer::on_verdict`](super::Pacer::on_verdict)).
    round_seen: Option<Instant>,
    last_success: Option<Instant>,
    pub(super) decreases: u64,
    /// The server's delay on the throttle behind the last decrease (what a probe costs).
    probe_cost: Duration,
    /// What worked before the host went dark (see [`Held`]); restored at its first success.
    held: Option<Held>,
    /// Throttles found not to follow the rate (see `noise.rs`).
    pub(super) noise: Option<Noise>,
    /// The last cut, on probation (see `estimate/trial.rs`), and what undoing it restores.
    trial: Option<(noise::Trial, Before)>,
    /// This node's fraction of the traffic to the host (1 alone; set by a coordination
    /// layer when several nodes share one limit): what this node sees accepted, divided by
    /// it, is what the host accepted.
    pub(super) share: f64,
}

/// The pacer's knowledge from before an outage: an outage says nothing about capacity, so
/// the host's first success after it resumes here rather than from the outage's floor.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The rate in use when the first outage cut came (requests per second).
    rate: f64,
    /// The ceiling estimate then, if any.
    ceiling: Option<f64>,
    /// A later cut found nothing at all accepted lately: the host went dark. Until then
    /// the snapshot is only kept in case (a fallen limit also starts with a deep cut).
    dark: bool,
}

/// What a cut changed that an undo restores, and what the trial compares with.
#[derive(Debug, Clone, Copy)]
struct Before {
    /// The rate before the cut (requests per second).
    rate: f64,
    held: Option<Held>,
    probe_cost: Duration,
    /// The cut ends the first search (nothing learned before it).
    searching: bool,
    /// The rate answers came at over the last `window` (per second open).
    answered: f64,
    /// The rate the host accepted them at, over the same span.
    accepted: f64,
    /// Fewer answers than a trial needs came in the last whole `window`.
    slow: bool,
}

/// Which accepted-rate counter [`Estimate::measured`] reads.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Window,
    Recent,
    Round,
}

impl Estimate {
    /// Nothing known yet: `cfg.initial_rate`, slow start from there.
    pub(super) fn new(cfg: &PacerConfig, now: Instant) -> Self {
        Self {
            rate: cfg.initial_rate,
            target: None,
            decide: Buckets::new(cfg.window, BUCKETS, now),
            observed: Buckets::new(cfg.window, BUCKETS, now),
            recent: Buckets::new(cfg.window / RECENT, RECENT_BUCKETS, now),
            round: Buckets::new(ROUND_SPAN, ROUND_BUCKETS, now),
            born: now,
            ceiling: None,
            anchor: cfg.initial_rate,
            base: cfg.initial_rate,
            probe: Duration::ZERO,
            decreased_at: None,
            searched_at: None,
            round_seen: None,
            last_success: None,
            decreases: 0,
            probe_cost: Duration::ZERO,
            held: None,
            noise: None,
            trial: None,
            share: 1.0,
        }
    }

    /// Another node sharing this host's limit decreased the rate to `rate` (ceiling
    /// `ceiling`), or a node joining starts from the shared estimate: take it as if this
    /// pacer had decreased itself, without counting a decrease of its own. Requests reserved
    /// before now were spaced at the old rate, so their throttles decide nothing.
    pub(super) fn adopt_shared(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        rate: f64,
        ceiling: Option<f64>,
        schedule: &mut Schedule,
    ) {
        let cap = self.target.unwrap_or(cfg.max_rate).min(cfg.max_rate);
        let old = self.rate;
        let rate = rate.clamp(cfg.min_rate, cap.max(cfg.min_rate));
        self.ceiling = ceiling.map(|c| c.clamp(cfg.min_rate, cfg.max_rate));
        self.anchor = self.ceiling.unwrap_or(rate);
        self.held = None;
        let round_end = schedule.recost(now, old, rate, 1.0 / OUTAGE);
        self.rate = rate;
        self.base = rate;
        self.probe = Duration::ZERO;
        self.decreased_at = Some(now);
        self.round_seen = Some(round_end + cfg.window / 10);
        self.decide.clear();
    }

    /// The server advertised `adv` requests per second: aim at `headroom ×` that, and never
    /// above it. The first target is adopted at once, upward too: the server has said what
    /// it accepts, so there is nothing to search for. Later ones only cap the rate (the
    /// climb to a raised one is the curve's): a server with several policies (per key, per
    /// account) may name a different one on each answer, and following each at once
    /// swung the rate between them.
    pub(super) fn adopt_advertised(
        &mut self,
        cfg: &PacerConfig,
        adv: f64,
        schedule: &mut Schedule,
        now: Instant,
    ) {
        let target = (cfg.headroom * adv).clamp(cfg.min_rate, cfg.max_rate);
        let first = self.target.is_none();
        self.target = Some(target);
        if first && self.held.is_none() {
            schedule.jump(now, self.rate, target);
            if target < self.rate {
                // A start above the advertised limit (a rate hint too high): the slots
                // already handed out were spaced at a rate the server has just said is too
                // fast, so their throttles are echoes of it, not evidence against the
                // target; as after a decrease, they decide nothing, and the queue is
                // re-costed to average the target. (`abide demo` starts at twice its
                // limit: its first throttles, from the unadvertised concurrency cap, read
                // a 75/s limit as a 61/s ceiling that held for the whole run.)
                let round_end = schedule.recost(now, self.rate, target, 1.0 / OUTAGE);
                self.decreased_at = Some(now);
                self.round_seen = Some(round_end + cfg.window / 10);
            }
            self.rate = target;
            self.ceiling = None;
            self.anchor = target;
            self.base = target;
            self.probe = Duration::ZERO;
        } else {
            self.rate = self.rate.min(target);
        }
    }

    /// Nothing learned yet: the first search for the limit (slow start), no decrease so far.
    pub(super) fn first_search(&self) -> bool {
        self.ceiling.is_none() && self.searched_at.is_none()
    }

    /// Was an answer arriving at `now`, reservation time unknown, spaced at the current rate?
    pub(super) fn fresh_at(&self, now: Instant) -> bool {
        self.round_seen.is_none_or(|r| now >= r)
    }

    /// Was a request reserved at `reserved_at` spaced at the current rate?
    pub(super) fn fresh_reserved(&self, reserved_at: Instant) -> bool {
        self.decreased_at.is_none_or(|d| reserved_at >= d)
    }

    /// Would a throttle at `now` (`fresh`: to a slot handed out since the last cut) be
    /// spared the pause of the host, a cut being on trial (see `estimate/trial.rs`)?
    pub(super) fn trial_spares(
        &self,
        cfg: &PacerConfig,
        now: Instant,
        fresh: bool,
        pauses: &Pauses,
    ) -> bool {
        self.spared_by_trial(cfg, now, fresh, pauses)
    }

    /// Count every answer the remote sent.
    pub(super) fn observe(&mut self, now: Instant, throttled: bool) {
        self.observed.add(now, 1, u64::from(throttled));
        self.recent.add(now, 1, u64::from(throttled));
        self.round.add(now, 1, u64::from(throttled));
    }

    /// A success, fresh or not: the host answers again, so back to what worked before it
    /// went dark, even for a request reserved during the outage (its success is news all
    /// the same).
    pub(super) fn restore_after_outage(&mut self, cfg: &PacerConfig) {
        if let Some(held) = self.held.take().filter(|h| h.dark) {
            self.ceiling = held.ceiling;
            self.anchor = held.ceiling.unwrap_or(held.rate);
            self.base = self.anchor * cfg.decrease_factor;
            self.probe = Duration::ZERO;
            let cap = self.target.unwrap_or(cfg.max_rate).min(cfg.max_rate);
            self.rate = self.curve(cfg).clamp(cfg.min_rate, cap);
        }
    }

    /// A throttle for a request spaced at the current rate: decrease when it is the probe's
    /// answer, or when throttles (and the time they paused the host) are no longer rare.
    pub(super) fn on_fresh_throttle(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        verdict: &Verdict,
        pauses: &mut Pauses,
        schedule: &mut Schedule,
    ) {
        self.decide.add(now, 1, 1);
        let (total, throttles) = self.decide.sums(now);
        // A throttle that keeps to the share seen before a cut on trial was decided there.
        let on_trial = self.answer_on_trial(cfg, now, true, pauses, schedule);
        if matches!(
            on_trial,
            Some(Outcome::Open | Outcome::Stayed | Outcome::Again)
        ) {
            return;
        }
        if self.throttle_in_known_noise(cfg, now, (total, throttles), pauses, schedule) {
            return;
        }
        let probing = self.ceiling.is_none_or(|c| self.rate > c);
        // A throttle that pauses the host costs the whole pause, not one request: time
        // already paused in the window (before this throttle's own pause) counts as
        // throttled, so one stray throttle is noise but one a second is not.
        let paused = pauses.within(now.checked_sub(cfg.window).unwrap_or(now), now);
        let lost = fraction(throttles, total) + paused.as_secs_f64() / cfg.window.as_secs_f64();
        if probing || lost > cfg.throttle_threshold {
            self.probe_cost = verdict
                .retry_after
                .as_ref()
                .map_or(Duration::ZERO, |ra| ra.delay.min(MAX_PAUSE));
            let before = self.before_cut(cfg, now, pauses, schedule);
            self.decrease(cfg, now, pauses, schedule);
            self.begin_trial(cfg, now, (total, throttles), before, schedule);
        }
    }

    /// A success for a request spaced at the current rate: credit clean time and follow the
    /// curve.
    pub(super) fn on_fresh_success(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        pauses: &mut Pauses,
        schedule: &mut Schedule,
    ) {
        self.decide.add(now, 1, 0);
        let on_trial = matches!(
            self.answer_on_trial(cfg, now, false, pauses, schedule),
            Some(Outcome::Open | Outcome::Again)
        );
        let credit = self
            .last_success
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let max_probe = Duration::from_secs_f64(self.k_secs(cfg) * MAX_PROBE_K);
        // Grow only while the host has been seen to accept nearly this rate: a long queue
        // of reserved slots delays the evidence, and a curve running on ahead of it
        // would overshoot by the whole delay (RFC 7661's rule for an unused window).
        // In slow start the rate doubles per round, so the evidence is read over the last
        // round rather than the last seconds, and it is a hard bound: never above
        // `1 + LEAD` times what the host accepted.
        let searching = self.first_search();
        let counter = if searching {
            Counter::Round
        } else {
            Counter::Recent
        };
        let accepted = self.measured(cfg, now, counter, pauses, schedule);
        let validated = accepted.is_none_or(|a| self.rate <= a * (1.0 + LEAD));
        // On trial, the recovery toward a known ceiling goes on (the rate catches up with it
        // once the trial is judged); a search does not double on while the rate is held.
        if validated && !(on_trial && self.ceiling.is_none()) {
            self.probe = (self.probe + credit.min(MAX_CREDIT)).min(max_probe);
        }
        if self.ceiling.is_some() && self.probe.as_secs_f64() >= 2.0 * self.k_secs(cfg) {
            // Probed well above the ceiling without a throttle: the limit was raised.
            // Forget the estimate and search from here.
            self.ceiling = None;
            self.anchor = self.rate;
            self.probe = Duration::ZERO;
        }
        self.last_success = Some(now);
        let mut cap = self.target.unwrap_or(cfg.max_rate).min(cfg.max_rate);
        if let Some(a) = accepted.filter(|_| searching && self.ceiling.is_none()) {
            // (Only in the first search; see `curve`.)
            // The bound never lowers the rate: that is for throttles to do.
            cap = cap.min((a * (1.0 + LEAD)).max(self.rate));
        }
        let rate = self.curve(cfg).clamp(cfg.min_rate, cap.max(cfg.min_rate));
        // A cut on trial holds the rate where it put it (the curve goes on, and the rate
        // catches up with it once the trial is judged).
        self.rate = if on_trial { rate.min(self.rate) } else { rate };
    }

    /// Any other answer spaced at the current rate: counted, decides nothing.
    pub(super) fn on_fresh_other(&mut self, now: Instant) {
        self.decide.add(now, 1, 0);
    }

    /// The rate the recovery/probe curve gives for the clean time credited so far.
    fn curve(&self, cfg: &PacerConfig) -> f64 {
        let t = self.probe.as_secs_f64();
        let k = self.k_secs(cfg);
        if self.ceiling.is_none() {
            // Nothing known yet: double every round, as far as the lead allows. Known once and
            // decayed: every `K / 10` (a raised limit near the old one; the fast search
            // cost queue-throttling 3 points of goodput in probes).
            // Searching with noise known: a share clearly above the noise takes dozens of
            // answers to show, so each doubling takes longer, not to run far past the limit
            // before it does.
            let round = match (self.searched_at, self.noise) {
                (None, None) => SEARCH_ROUND.as_secs_f64(),
                (None, Some(_)) => NOISY_SEARCH_ROUND.as_secs_f64(),
                (Some(_), _) => k / 10.0,
            };
            return self.anchor * (t / round).exp2();
        }
        let x = (t - k) / k;
        let cubic = self.anchor * (1.0 + (1.0 - cfg.decrease_factor) * x * x * x);
        let additive = self.base + cfg.increase_per_sec * t;
        if additive > cubic {
            additive
        } else {
            cubic
        }
    }

    /// `K` in seconds: `recovery`, stretched at low rates (up to 4×) so that about
    /// [`PROBE_REQUESTS`] go out near the ceiling between two probes, keeping one throttle
    /// per probe near 1 % of attempts.
    fn k_secs(&self, cfg: &PacerConfig) -> f64 {
        let k = cfg.recovery.as_secs_f64();
        let paid = PROBE_PAUSES * self.probe_cost.as_secs_f64();
        self.ceiling
            .map_or(k, |c| (PROBE_REQUESTS / c).max(paid).clamp(k, 4.0 * k))
    }

    fn decrease(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        pauses: &mut Pauses,
        schedule: &mut Schedule,
    ) {
        let old = self.rate;
        let cap = self.target.unwrap_or(cfg.max_rate);
        let (answers, refused) = self.observed.sums(now);
        let window = self.measured(cfg, now, Counter::Window, pauses, schedule);
        let recent = self.measured(cfg, now, Counter::Recent, pauses, schedule);
        // In slow start the rate climbed fast: `window / 5` averages the climb and reads low
        // (82/s off a 100/s fixed window), the last round reads the limiter's burst or a
        // window's quota spent early and reads high (109-115/s). The limit lies between:
        // their geometric mean (94-102/s in search_tests).
        let round = self.measured(cfg, now, Counter::Round, pauses, schedule);
        // The first search offered less than the limit while it climbed: a window reaching
        // back into it reads the climb, not the limit (a 100/s fixed window read 94/s five
        // seconds after the first cut). Until it has passed, `window / 5` is what was
        // accepted near the limit.
        let after_search = self
            .searched_at
            .is_some_and(|t| now.saturating_duration_since(t) >= cfg.window);
        let window = if after_search {
            window
        } else {
            recent.or(window)
        };
        // Which span says most about the limit: in slow start the rate climbed fast and the
        // window lags it, so the last `window / 5`; a throttle at or below a known ceiling
        // says the limit fell, so whichever is lower; a probe above it, the whole window
        // (least disturbed by a burst).
        let accepted = match (self.ceiling, recent) {
            (None, Some(r)) if self.searched_at.is_none() => {
                Some(round.map_or(r, |x| (x * r).sqrt().max(r)))
            }
            (None, Some(r)) => Some(r),
            (Some(c), Some(r)) if old <= c => window.map(|w| w.min(r)),
            _ => window,
        };
        // A second throttle at or below the estimate within half a window of the last cut:
        // the estimate is stale (the limit fell). What was accepted cannot show by how much,
        // because each `Retry-After` pause refills the provider's burst and the short open
        // stretches between pauses measure our own rate; cutting 5 % per round, one pause
        // each, took 15 s to follow 200/s down to 100/s.
        let below = self.ceiling.is_some_and(|c| old <= c);
        // Unless the host was sent this rate for a whole `window / 5` without a pause and
        // accepted nearly all of it (at least `decrease_factor` of the rate): a limit that
        // fell refuses a share of what it is sent, and this one refused next to nothing,
        // so the estimate reads only a little high, which fast convergence (below) fixes
        // without halving. Seen on loopback against a 100/s fixed window: the first search
        // read 103/s, the curve was back above 100/s 4 s later and was throttled there
        // (100.3/s accepted at 101.3/s); halving then searched again from 50/s and cost
        // two more throttles. (The span must be open: right after a pause the host accepts
        // a refilled burst or a fresh window's quota, and reads high.)
        let settled = pauses
            .within(now.checked_sub(cfg.window / RECENT).unwrap_or(now), now)
            .is_zero();
        let metering = settled && recent.is_some_and(|r| r >= cfg.decrease_factor * old);
        // With noise known, a share clearly above it is the limit near, not a fallen one (a
        // fallen limit refuses a large share, which forgets the noise, and still halves).
        let stale = below
            && !metering
            && self.noise.is_none()
            && self
                .decreased_at
                .is_some_and(|d| now.saturating_duration_since(d) < cfg.window / 2);
        let refusing = fraction(answers.saturating_sub(refused), answers) < OUTAGE;
        // Nothing at all accepted over the last `window / 5`: the host is down, not
        // metering (any limit above 0.5/s accepts something in 2 s). Read as a rate, that
        // silence set a 0.1/s ceiling that took half an hour to climb out of.
        let (recent_answers, recent_refused) = self.recent.sums(now);
        let dark = recent_answers > 0 && recent_refused == recent_answers;
        // Nothing accepted since a cut that held a snapshot: what the window still shows
        // predates the trouble (a 2 s span half before an outage read 4.75/s off a 10/s
        // host that was refusing everything).
        let silent = self.held.is_some()
            && self
                .last_success
                .is_none_or(|t| self.decreased_at.is_some_and(|d| t < d));
        let learns = accepted.is_some() && !stale && !refusing && !dark && !silent;
        // A later throttle at or below the estimate says the estimate reads high, by an
        // amount what was accepted cannot show either (a fixed window read as 100.5/s for
        // 100/s sat at its quota and was throttled again and again). As CUBIC's fast
        // convergence (RFC 9438 §4.7) lowers `W_max` on a loss below the last one, the
        // ceiling is then at most `(1 + β) / 2` of the rate throttled. Such a cut may also be
        // the first of an outage: it learns, but keeps what worked before it, as a cut that
        // does not learn does.
        let converges = learns && below;
        if learns && !converges {
            self.held = None;
        } else {
            // Keep what worked before the trouble: the first cuts of an outage look like a
            // fallen limit (the window still holds the successes from before it).
            let held = self.held.get_or_insert(Held {
                rate: old,
                ceiling: self.ceiling,
                dark: false,
            });
            held.dark |= dark;
        }
        let floor = self
            .held
            .filter(|h| h.dark)
            .map_or(cfg.min_rate, |h| h.ceiling.unwrap_or(h.rate) * OUTAGE_FLOOR)
            .max(cfg.min_rate);
        let accepted = accepted.filter(|_| learns);
        let rate = match accepted {
            Some(a) => {
                let fast = if converges {
                    old * (1.0 + cfg.decrease_factor) / 2.0
                } else {
                    old
                };
                let ceiling = a.min(fast).clamp(cfg.min_rate, cfg.max_rate);
                self.ceiling = Some(ceiling);
                self.anchor = ceiling;
                (ceiling * cfg.decrease_factor).clamp(cfg.min_rate, cap)
            }
            None => {
                // Most requests were refused (the host is refusing, not metering), or the
                // estimate is stale: what it accepted says nothing about a rate. Halve, forget
                // the ceiling, and let slow start find the rate again once it answers.
                let rate = (old * OUTAGE).max(floor).min(old).clamp(cfg.min_rate, cap);
                self.ceiling = None;
                self.anchor = rate;
                rate
            }
        };
        let round_end = schedule.recost(now, old, rate, 1.0 / OUTAGE);
        self.rate = rate;
        self.base = rate;
        self.probe = Duration::ZERO;
        self.decreased_at = Some(now);
        self.round_seen = Some(round_end + cfg.window / 10);
        self.decide.clear();
        self.searched_at.get_or_insert(now);
        self.decreases += 1;
    }
}

/// `part` of `total` (0 when nothing was counted).
#[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
pub(super) fn fraction(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}
