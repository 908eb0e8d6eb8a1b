//! A cut on probation (see [`Trial`] in `noise.rs`): the estimate from before the cut is
//! kept until the fresh answers after it say whether it found a limit, and restored when
//! they say the throttles are noise.

use std::time::{Duration, Instant};

use super::super::noise::{self, Noise, Outcome, Trial};
use super::super::pauses::Pauses;
use super::super::schedule::Schedule;
use super::super::PacerConfig;
use super::{Before, Estimate};

impl Estimate {
    /// What an undo of a cut about to be made at `now` would restore, and the rates answers
    /// came at and were accepted at (per second open) over the last `window`.
    pub(super) fn before_cut(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        pauses: &Pauses,
        schedule: &Schedule,
    ) -> Before {
        // Over the whole window: a shorter span right after a pause reads a limiter's
        // refilled burst as rate (at 5/s, a burst of 10 in 2 s doubles it), and a cut to
        // below that would stay above the limit and see its throttles go on.
        let (answers, throttles) = self.observed.sums(now);
        let span = schedule.offered(now).min(cfg.window);
        let open = span.saturating_sub(pauses.within(now - span, now));
        #[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
        let per_sec = |n: u64| n as f64 / open.as_secs_f64().max(0.1);
        Before {
            rate: self.rate,
            held: self.held,
            probe_cost: self.probe_cost,
            searching: self.first_search(),
            answered: per_sec(answers),
            // A whole window of traffic with fewer answers than a trial needs.
            slow: span >= cfg.window && answers < noise::EVIDENCE,
            accepted: per_sec(answers.saturating_sub(throttles)),
        }
    }

    /// A cut was just made from `before` at `now`, after `(answers, throttles)` fresh since
    /// the previous decrease: put it on trial, at least [`noise::LEAST_CUT`] below what the
    /// host accepted. Not when the host was refusing rather than metering, nor when it is
    /// too slow for a trial to gather its answers within a window (fewer came in the last
    /// one: a trial would only hold the rate low and end without a verdict), nor, once the
    /// first search is over, when the share could not be noise that matters (a probe's lone
    /// throttle after hundreds of answers is the limit's, and holding the rate lower while
    /// a trial runs would cost throughput for nothing). The first search's cut always is:
    /// noise shows first there, on a few answers.
    pub(super) fn begin_trial(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        counts: (u64, u64),
        before: Before,
        schedule: &mut Schedule,
    ) {
        let trial = Trial::new(now, counts, before.answered, self.noise.as_ref());
        if before.slow || trial.refusing_before() || !(before.searching || trial.could_be_noise()) {
            self.trial = None;
            return;
        }
        self.cut_below(cfg, now, before.accepted, noise::LEAST_CUT, schedule);
        self.trial = Some((trial, before));
    }

    /// A cut too small to lower what the host is sent cannot tell noise from a limit (a cut
    /// in slow start reads what was accepted, about the rate itself): at least
    /// `by` (a fraction) below `accepted`, the rate the host was accepting (under a limit,
    /// about the limit; a cut above it would see its throttles go on and read as noise).
    /// Answers to slots handed out before it were spaced at the rate before: as after any
    /// decrease, they are not the trial's.
    fn cut_below(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        accepted: f64,
        by: f64,
        schedule: &mut Schedule,
    ) {
        // Never more than `by` below the rate the decrease chose: a window's average after a
        // climb reads far below the rate the climb reached.
        let deep = ((1.0 - by) * accepted).max((1.0 - by) * self.rate);
        if deep < self.rate {
            // The queue already handed out keeps its spacing: a trial's cut tests a rate,
            // it does not answer an overshoot.
            let round_end = schedule.recost(now, self.rate, deep, 1.0);
            self.rate = deep;
            self.base = deep;
            self.decreased_at = Some(now);
            self.round_seen = Some(round_end + cfg.window / 10);
        }
    }

    /// The trial said [`Outcome::Again`]: cut below the rate its answers came at and judge
    /// the answers after that against them (the undo still restores the rate from before
    /// the first cut).
    fn try_again(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        trial: &Trial,
        before: Before,
        pauses: &Pauses,
        schedule: &mut Schedule,
    ) {
        let paused = paused_since(trial, now, pauses);
        let next = trial.again(now, paused);
        self.cut_below(
            cfg,
            now,
            trial.answer_rate(paused),
            2.0 * noise::LEAST_CUT,
            schedule,
        );
        self.trial = Some((next, before));
    }

    /// Would a fresh throttle at `now` be spared the pause of the host (its item alone goes
    /// back): is a cut on trial, and would the throttle leave the share where it was?
    pub(super) fn spared_by_trial(
        &self,
        cfg: &PacerConfig,
        now: Instant,
        fresh: bool,
        pauses: &Pauses,
    ) -> bool {
        self.trial.as_ref().is_some_and(|(t, _)| {
            let paused = paused_since(t, now, pauses);
            // An answer to a slot handed out before the cut: after the first cut, an echo of
            // what it answered, which pauses the host as any; after a trial's own deeper
            // cut, one more answer of that trial, spared as its were.
            (fresh || t.is_again())
                && matches!(
                    t.with_throttle(now, cfg.window, paused),
                    Outcome::Open | Outcome::Stayed | Outcome::Again
                )
        })
    }

    /// A fresh answer (`throttled` or not) while a cut is on trial: counted, and what the
    /// trial says then carried out (an undo, a deeper cut to try again); `None` without a
    /// trial. Until it is judged ([`Outcome::Open`], [`Outcome::Again`]) the rate is held
    /// where the cut put it, so that the answers after the cut come at one rate, and a
    /// throttle sends back only its item; after [`Outcome::Stayed`] the cut is undone.
    pub(super) fn answer_on_trial(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        throttled: bool,
        pauses: &Pauses,
        schedule: &mut Schedule,
    ) -> Option<Outcome> {
        let (mut trial, before) = self.trial.take()?;
        trial.count(now, throttled);
        let outcome = trial.outcome(now, cfg.window, paused_since(&trial, now, pauses));
        match outcome {
            Outcome::Open => self.trial = Some((trial, before)),
            Outcome::Stayed => self.undo(cfg, now, &trial, before, schedule),
            Outcome::Again => self.try_again(cfg, now, &trial, before, pauses, schedule),
            Outcome::Fell | Outcome::Rose => {}
        }
        Some(outcome)
    }

    /// The throttles went on after the cut at the share seen before it: they are noise.
    /// Back to the rate from before the cut, and search again from there as in slow start:
    /// every ceiling learned so far may have been read off noise, and with the noise known,
    /// a limit shows as a share clearly above it.
    fn undo(
        &mut self,
        cfg: &PacerConfig,
        now: Instant,
        trial: &Trial,
        before: Before,
        schedule: &mut Schedule,
    ) {
        let cap = self.target.unwrap_or(cfg.max_rate).min(cfg.max_rate);
        let rate = before.rate.clamp(cfg.min_rate, cap.max(cfg.min_rate));
        schedule.jump(now, self.rate, rate);
        self.rate = rate;
        self.ceiling = None;
        self.anchor = rate;
        self.base = rate;
        self.probe = Duration::ZERO;
        self.searched_at = None;
        self.held = before.held;
        self.probe_cost = before.probe_cost;
        self.noise = Some(Noise {
            fraction: trial.pooled(),
        });
    }
}

/// How long the host was paused since the first answer of `trial`, to `now`.
fn paused_since(trial: &Trial, now: Instant, pauses: &Pauses) -> Duration {
    trial
        .first_answer()
        .map_or(Duration::ZERO, |f| pauses.within(f, now))
}
