//! Per-host send pacing that learns the provider's limit and obeys its instructions.
//!
//! # Why
//! Retrying politely is not enough: a throttle says the *sender* is too fast, so every later
//! request to that host must slow down too, not just the one that was refused. One [`Pacer`]
//! per remote host, shared by all workers, turns verdicts into a send rate.
//!
//! # Spacing
//! GCRA, the "virtual scheduling" of ITU-T I.371: a theoretical arrival time (TAT) advances by
//! `1 / rate` per reservation; [`Pacer::reserve`] hands out `max(now, TAT − burst tolerance,
//! pause end)`.
//!
//! # Why not plain AIMD
//! The first version halved the rate on a throttle and climbed back 1/s per clean second.
//! Against a 10/s limit with no rate-limit headers that sawtooth averages about 60 % of the
//! limit: after each halving it spends seconds far below the limit, and the slow climb makes
//! the next overshoot the only way to learn anything. Every throttle also costs at least a
//! second of silence, because the host pauses for its `Retry-After`. To deliver ≥ 95 % of a
//! limit with ≤ 1 % of attempts throttled, the pacer must spend nearly all its time just
//! below the limit and overshoot rarely. So it remembers where the limit is, as TCP CUBIC
//! (RFC 9438) remembers `W_max`:
//!
//! - **Ceiling estimate.** On a decrease the pacer records the rate the provider actually
//!   *accepted* over the last `window` (answers that were not throttles, per second), capped
//!   by the current rate. A GCRA limit accepts at most `limit × window + burst` in a window,
//!   so this is within a few percent of the limit, whatever the overshoot that revealed it and
//!   even when the workers were sending far less than the pacer allowed (a pacer idling at
//!   1000/s that meets a 10/s limit at 12/s of traffic drops to about 10/s, not to 500/s).
//!   Time the host was *paused* is left out (accepted ÷ un-paused time): nothing can be
//!   accepted during a pause, and with `Retry-After: 1` per throttle a 10 s window that
//!   held three pauses read a 100/s limit as 60/s, ratcheting the estimate down on every
//!   throttle. In slow start the last `window / 5` is used (the rate climbed faster than a
//!   whole window shows); for a throttle at or below a known ceiling, the lower of the two
//!   (the limit fell, and the older part of the window predates that).
//! - **Gentle decrease.** The rate drops to `decrease_factor × ceiling` (default 0.95): the
//!   estimate is already near the limit, so a deep cut would only waste capacity. When fewer
//!   than half the *answers* in the window were accepted the host is refusing rather than
//!   metering (an outage, a `403` storm): the rate halves, no ceiling is learned, and no cut
//!   is deeper. (Comparing what was accepted with the rate instead fired after every pause.)
//! - **An outage is not a capacity signal.** A cut that finds *nothing* accepted over the
//!   last `window / 5` means the host went dark (any limit above 0.5/s accepts something in
//!   2 s). The rate and ceiling from before the trouble are held (snapshotted at its first
//!   cut, which looks like a fallen limit while the window still holds the earlier
//!   successes, and which learns nothing until a success arrives); the halving stops at 1/8
//!   of the held rate; the first success after the outage restores the held ceiling (or the
//!   held rate in slow start). Before, a 30 s `403` storm read "0 accepted" as a 0.1/s
//!   ceiling, and 40 workers then queued slots 10 s apart: `abide sim --scenario
//!   retry-after-zero` finished at 2,027 s instead of about 600 s. A limit that really fell
//!   still accepts some, so it never counts as dark: the snapshot is dropped at the next
//!   success.
//! - **Cubic recovery and probing.** With `t` the clean time since the decrease and `K` =
//!   `recovery` (15 s; longer at low rates, up to 4×, so that about 100 requests go out
//!   between probes and one throttle per probe stays under 1 % of attempts, and at least
//!   20 × the server's `Retry-After` on the throttle that ended the last probe, since every
//!   probe costs that pause of the whole host), the rate follows
//!   `ceiling × (1 + (1 − β) × ((t − K) / K)³)`: fast at first, flat around the ceiling near
//!   `t = K` (where it spends most of its time), then convex above it, so a stable limit is
//!   re-probed rarely and slowly. Clean time is credited per success, at most 1 s each, so an
//!   idle host does not jump to full speed on its first reply.
//! - **The ceiling decays.** After `2K` clean, the rate is `(2 − β) ×` the ceiling and the
//!   limit has evidently been raised: the estimate is dropped and the pacer searches upward
//!   by slow start (see "Cold start"), as it does before its first throttle.
//! - **Never ahead of the evidence.** The rate grows only while it is at most 25 % above the
//!   rate the host accepted over the last `window / 5`. With 40 workers holding reserved
//!   slots, what the host sees lags the rate by seconds; a curve running on regardless would
//!   overshoot by the whole lag (the rule is RFC 7661's for an unused congestion window).
//! - **Fast convergence.** A throttle at or below the ceiling that decreases says the
//!   estimate reads high, and what was accepted cannot say by how much (a fixed window read
//!   as 100.5/s for 100/s sat at its quota, and every stray throttle cost a 1 s pause): as
//!   CUBIC lowers `W_max` on a loss below the last one (RFC 9438 §4.7), the new ceiling is at
//!   most `(1 + β) / 2` (0.975) of the rate throttled. (A second throttle at or below it
//!   within half a window of the last cut still means the limit fell: the rate halves.
//!   Unless the host was sent the rate for `window / 5` without a pause and accepted at
//!   least `β` of it: a fallen limit refuses a share, so the estimate only reads a little
//!   high and converges as above. On loopback a 100/s fixed window read 103/s at the first
//!   search, the curve was back above 100/s 4 s later, and halving there cost two more
//!   throttles and a second search.)
//!   Until `window` after the first search a decrease reads what was
//!   accepted over `window / 5` only: a whole window would average the climb in (a 100/s
//!   fixed window read 94/s five seconds after the first cut).
//! - **A throttle above the ceiling is the probe's answer** and decreases at once; a throttle
//!   at or below it decreases only when the throttled fraction of the window plus the
//!   fraction of the window already spent paused exceeds `throttle_threshold`, so a rare
//!   stray throttle at a rate known to be fine is noise, but one a second (each costing a
//!   1 s pause, under 1 % of answers at 100/s) is not.
//! - **Noise is not a limit.** Throttles that come whatever the rate (5 % refused at random)
//!   would have each cut decay the rate without end. When the throttled share does not fall
//!   after the rate did, the pacer stops cutting and holds what the host accepted; such
//!   throttles send back only their own items (`noise.rs`).
//! - **`increase_per_sec`** is an additive lower bound on the climb (CUBIC's "TCP-friendly
//!   region"), off by default.
//!
//! In `abide sim --scenario queue-throttling` (a 10/s limit, no rate-limit headers, 12/s
//! offered by 40 workers) this delivers 95 % of the limit with 0.4 % of attempts throttled,
//! where halving delivered 59 %; what remains is mostly the 1 s `Retry-After` pause each probe
//! earns.
//!
//! # Cold start
//! A batch of 3,000 items against a 100/s limit takes 31 s at 97/s; starting at 10/s and
//! climbing 10 % a second takes 48 s. So:
//!
//! - **An advertised limit is adopted at once.** The first answer carrying a policy
//!   (`RateLimit-Policy` q/w, `RateLimit-Limit` with a window, `X-RateLimit-Limit` with a
//!   known window) sets the rate to the target, upward too: the server has said what it
//!   accepts. (Only the first: a server with per-key and per-account policies may name
//!   either on each answer, and following each at once swung the rate between them.) The slots already handed out at the old pace keep their times, and a fill
//!   lane hands out slots between them at the difference of the two rates until the old
//!   queue ends, so the new rate holds from that answer on rather than a queue later.
//!   `remaining` bounds it as before: `remaining = 0` pauses the host ("Pacing
//!   `remaining / reset`" below says how long).
//!   Downward (a start above the limit), the adoption counts as a decrease for the queue:
//!   answers to slots reserved before it are echoes that decide nothing, and the queue is
//!   re-costed to average the target.
//! - **Without headers, slow start doubles per round.** Nothing known: the rate doubles
//!   per 250 ms of clean time (TCP slow start doubles per round trip), never above 1.25 ×
//!   what the host accepted over the last 500 ms (so the climb follows the evidence, and
//!   40 senders' queue of reserved slots cannot carry it far past the limit). At the first
//!   throttle the ceiling is the geometric mean of what was accepted over the last 500 ms
//!   (reads high: a GCRA's burst or a window's quota spent early) and over `window / 5`
//!   (reads low: it averages the climb).
//! - **No arbitrary start.** Without a hint a caller starts at
//!   [`PacerConfig::cold_start_rate`] for its senders.
//!
//! # How far ahead
//! A sender that reserves a slot seconds away sleeps until it, holding the rate of the
//! moment it asked: 40 senders at 10/s hold 4 s of slots, so a doubling reaches the host
//! only 4 s later, and slow start (bounded by what the host accepted) climbs about 25 % per
//! queue length: from 10/s to a 100/s limit took 15 s. So while the first search lasts
//! (nothing learned, no decrease yet), [`Pacer::reserve_within`] hands out slots at most the
//! *slot horizon* ahead; a sender whose slot would lie further asks again when it is within
//! it, at the rate of then. Searching blind the horizon is 100 ms (or two send intervals at
//! rates under 20/s): under one search round (250 ms), so each doubling reaches the host
//! within the round that decides the next. It was 800 ms, and the climb from 40/s to a
//! 100/s limit took 3.8–5.2 s in `search_tests`; at 100 ms it takes 1.8–2.8 s. The faster
//! climb overshoots further and its first ceiling reads a fixed window's 100/s as 96–128/s
//! depending on where the windows fall, which fast convergence (above) then corrects at the
//! cost of one more throttle. Under an advertised target the horizon stays 800 ms: the rate
//! rises there only when the server raises its limit, and 40 senders at 97/s would
//! otherwise poll every 100 ms for nothing. After the first decrease the queue is left as it
//! was: there it damps the re-search after a stale estimate (with the horizon, `abide sim
//! --scenario limit-changes-blind` see-sawed at 5/s and converged after 125 s, not 19 s).
//!
//! # Once per round of reservations
//! Requests already reserved or in flight were spaced at the old rate and keep coming back
//! throttled; counting them would cut the rate again and again for one overshoot (with 40
//! workers the queue of reserved slots is seconds long). TCP decreases once per window of
//! data; the pacer decreases once per *round of reservations*: at a decrease it records the
//! end of the reservation queue (the TAT), and a throttle for a request whose slot lies
//! before it is counted but decides nothing. [`Pacer::on_verdict_for`] takes that slot and is
//! exact; [`Pacer::on_verdict`] only knows when the answer arrived and treats answers until
//! the queue's end plus `window / 10` (a latency allowance) as old. The decrease also
//! re-costs the queue: the slots already handed out keep their times, but the next free slot
//! moves out so that the whole queue averages the new rate.
//!
//! # Server instructions win
//! A `Retry-After` on a throttle pauses the whole host until `now + delay`. A throttle by a
//! concurrency quota (the IETF `RateLimit` names only a windowless or
//! `qu="concurrent-requests"` policy, with `r=0`:
//! [`crate::ratelimit::RateLimitInfo::concurrency_refused`]) does only that: it says nothing
//! about the rate, so it neither cuts the rate nor counts as a throttle for the estimate;
//! the session's limit on requests in flight shrinks instead (`session/in_flight.rs`). Cutting
//! the rate was the only thing keeping such refusals rare before that limit existed, and cost
//! `abide demo` 0.8 of its limit (BENCHMARKS.md). Rate-limit
//! headers set a target of `headroom × advertised rate` (the first is adopted at once, up
//! or down; later ones only cap the rate, and the curve climbs to a raised one);
//! `remaining = 0` with a reset pauses the host (how long: "Pacing `remaining / reset`").
//! Every remote number is floored and capped ([`MAX_PAUSE`], rate limits) before it reaches a
//! sleep or a rate. A slot reserved before a pause began is not moved by it: check
//! [`Pacer::admit`] when the slot arrives and reserve again if it says so.
//!
//! # How close to an advertised limit
//! The target is `headroom × limit / window`, with `headroom` 0.97 by default (settable per
//! provider). It was 0.9, which capped goodput at exactly 90 % of a limit the server had
//! told us, 5 points short of the 95 % abide aims for. The 3 % left absorbs what the
//! server sees and we do not: arrivals bunched by the network and the connection pool, a
//! server clock running slightly slow, a request on the wire when the rate changes. The
//! server's own burst tolerance absorbs most of that too, so against our gate 0.97
//! throttles nothing measurable (BENCHMARKS.md, politeness).
//!
//! # Quota-exact pacing
//! Where the server also says how many units are `remaining` until the quota resets (IETF
//! `r` and `t`, the earlier drafts' `RateLimit-Remaining` / `-Reset`, `X-RateLimit-*` and
//! the vendor dialects that read into [`RateLimitInfo`](crate::ratelimit::RateLimitInfo)),
//! the server's count, not `headroom`, bounds what is sent: `quota.rs` hands out a slot at
//! once for each unit left (every sender of the host shares the one count), never more,
//! counting against them every request not yet answered and every answer that came back
//! after the request was sent; with none left, slots wait for the reset (plus a clock
//! error bound) where the quota comes back whole, and follow the spacing where it trickles
//! back. So a fixed window is spent whole at each reset rather than at 97 % of it, and a
//! cold start spends the first window's quota at once. `headroom` keeps its meaning where
//! only a rate is known (a policy without a count) and for the spacing between bursts. While
//! a quota is spent, slots are handed out at most 100 ms ahead ([`Pacer::reserve_within`]):
//! a slot taken far ahead at the rate could not move up when units come back.
//!
//! Pacing `remaining / reset` ("spend what is left evenly until the reset") is exact only
//! for a fixed window, where the quota is refilled whole at the reset. The headers do not
//! say which algorithm stands behind them, and for the other common one, a token bucket
//! or GCRA (abide's own gate), `remaining` is the burst left and `reset` the time until the
//! bucket is full: a nearly full bucket says `r=9;t=1` (the reset is rounded up to whole
//! seconds) under a 10/s limit, a drained one `r=0`. Read as a rate, that swings between
//! the limit's burst and zero on every response. So `remaining` is never read as a rate:
//! it is spent as a count (above), where the algorithm matters only to what follows the
//! last unit, which the pacer learns; and `remaining = 0` pauses the host until the reset,
//! after a success only for what a rounded-up reset at least means, and at least one
//! interval at the advertised rate
//! ([`RateLimitInfo::exhausted_pause`](crate::ratelimit::RateLimitInfo::exhausted_pause)).
//!
//! # A throttle without a delay still pauses the host
//! A throttle changes the sender even when the server does not say for how long (a `429`
//! without `Retry-After`, a `403` configured as a throttle for a suspended key, an SMPP
//! `0x58`). Lowering the rate alone is not enough: against a host that refuses everything,
//! the rate halves once per round of reservations, and with 40 workers a round is dozens of
//! requests, so a suspended key saw well over a hundred attempts in its first seconds. So
//! such a throttle pauses the host for our own backoff: `throttle_pause` (1 s) doubled for
//! each *consecutive* one, up to `max_throttle_pause` (10 min, never above [`MAX_PAUSE`]),
//! back to the start after a success. "Consecutive" counts only answers arriving after the
//! last such pause ended: nothing is admitted during a pause, so an answer arriving within
//! it is for a request already on the wire when it began (with 40 workers, dozens come back
//! throttled) and must not double it again. A request whose slot was reserved before the
//! pause but that was admitted after it is news, which is why the reservation time is not
//! the test here. Plain exponential, without jitter: jitter de-correlates
//! independent clients, but every worker of a host shares this one pause and the GCRA
//! spaces them out when it ends. A throttle that carries the server's own delay
//! (`Retry-After`, an exhausted quota with a reset) pauses for that delay instead and
//! leaves the count alone.
//!
//! Time is the monotonic `now: Instant` passed in; the pacer never reads a clock.

//!
//! # Files
//! - `config.rs`: [`PacerConfig`], its defaults and clamps.
//! - `schedule.rs`: spacing (GCRA) and the queue of reserved slots.
//! - `pauses.rs`: pauses of the host, the pacer's own after a throttle without a delay.
//! - `estimate.rs`: the ceiling estimate, cubic recovery and slow start: the rate.
//! - `noise.rs`: throttles that do not follow the rate, told from a limit by what a cut does.
//! - `quota.rs`: an advertised count of units left, spent at once, and the wait for its reset.
//! - `tests.rs`, `search_tests.rs`: unit tests; the latter runs senders against model
//!   limiters in virtual time (GCRA with a burst of 10 or of a second's quota, fixed
//!   window, sliding window counter): cold start, the search.
//! - `quota_tests.rs`: quota-exact pacing, unit by unit and against the same model limiters.
//! - this file: [`Pacer`], which feeds each verdict to the four.

mod config;
mod estimate;
mod noise;
mod pauses;
mod quota;
mod schedule;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::classify::{Verdict, VerdictClass};

pub use config::PacerConfig;
use estimate::Estimate;
use pauses::Pauses;
use quota::Quota;
use schedule::Schedule;
pub use schedule::SlotCounts;

/// Lowest rate ever used: one request per hour (requests per second).
pub const MIN_RATE: f64 = 1.0 / 3600.0;
/// Highest rate ever used (requests per second).
pub const MAX_RATE: f64 = 1_000_000.0;
/// Longest pause a remote can impose through one `Retry-After` or rate-limit reset.
pub const MAX_PAUSE: Duration = Duration::from_secs(600);

/// A per-host pacer. Methods take `&self`; share one pacer per remote host between all
/// workers with `Arc`.
///
/// # Examples
/// ```
/// use abide_core::pacer::{Pacer, PacerConfig};
/// use abide_core::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let clock = ManualClock::new(UNIX_EPOCH);
/// let t0 = clock.monotonic();
/// let pacer = Pacer::new(PacerConfig { initial_rate: 4.0, ..PacerConfig::default() }, t0);
/// let slot = pacer.reserve(t0);
/// assert_eq!(slot, t0);
/// assert_eq!(pacer.reserve(t0), t0 + Duration::from_millis(250));
/// // When the slot arrives: still allowed to send? (A pause may have begun since.)
/// assert_eq!(pacer.admit(slot), Ok(()));
/// ```
#[derive(Debug)]
pub struct Pacer {
    cfg: PacerConfig,
    state: Mutex<State>,
}

/// Everything a pacer knows, in its three parts.
#[derive(Debug)]
struct State {
    schedule: Schedule,
    pauses: Pauses,
    estimate: Estimate,
    quota: Quota,
}

/// A point-in-time view of a [`Pacer`], for progress displays and logs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerSnapshot {
    /// Current rate, requests per second.
    pub rate: f64,
    /// Target set from advertised rate-limit headers (already × headroom), if any.
    pub target: Option<f64>,
    /// End of the current pause, if the host is paused at `now`.
    pub paused_until: Option<Instant>,
    /// Fraction of responses over the last window that were throttles.
    pub throttle_rate: f64,
    /// Decreases applied so far.
    pub decreases: u64,
    /// Estimated limit learned from throttles (requests per second), if any yet.
    pub ceiling: Option<f64>,
}

/// Why [`Pacer::reserve_within`] reserved nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotYet {
    /// The next slot is beyond the slot horizon: ask again at this instant.
    AskAgainAt(Instant),
    /// The next slot (this instant) lies after the caller's deadline.
    PastDeadline(Instant),
}

impl Pacer {
    /// A pacer at `cfg.initial_rate`, with its first slot free at `now`.
    pub fn new(cfg: PacerConfig, now: Instant) -> Self {
        let cfg = cfg.sanitized();
        Self {
            state: Mutex::new(State {
                schedule: Schedule::new(now),
                pauses: Pauses::default(),
                estimate: Estimate::new(&cfg, now),
                quota: Quota::default(),
            }),
            cfg,
        }
    }

    /// The configuration in use, after clamping.
    pub fn config(&self) -> &PacerConfig {
        &self.cfg
    }

    /// Reserve the next send slot and return the instant at which the caller may send:
    /// never earlier than `now` nor the end of a pause known at the time of the call.
    /// A pause that begins after a reservation does not move it: call [`Pacer::admit`] when
    /// the slot arrives.
    pub fn reserve(&self, now: Instant) -> Instant {
        self.lock().slot(&self.cfg, now, true)
    }

    /// Reserve the next slot only if the caller can use it now: `Ok(slot)` as
    /// [`Pacer::reserve`], or, with nothing reserved:
    /// - [`NotYet::AskAgainAt`]: during the first search, the next slot lies beyond the slot
    ///   horizon of `now` (see "How far ahead" in the module docs). A caller that sleeps
    ///   until a slot seconds away holds it at the rate of the moment it asked: when the
    ///   rate rises, slots already handed out keep their spacing, and what the host sees
    ///   lags the rate by the whole queue (40 senders at 10/s hold 4 s of slots).
    /// - [`NotYet::PastDeadline`]: the slot lies after `deadline` (a lease ending). A slot
    ///   the caller cannot use and gives up would still push every later slot back, and
    ///   callers giving up slot after slot would push the queue ahead of themselves for ever.
    ///
    /// # Errors
    /// [`NotYet`] when no slot was reserved.
    pub fn reserve_within(
        &self,
        now: Instant,
        deadline: Option<Instant>,
    ) -> Result<Instant, NotYet> {
        let s = &mut *self.lock();
        let rate = s.estimate.rate;
        let next = s.slot(&self.cfg, now, false);
        if deadline.is_some_and(|d| next > d) {
            return Err(NotYet::PastDeadline(next));
        }
        if s.quota.active() {
            // Spending an advertised quota: a slot taken far ahead at the rate could not be
            // moved up when units come back (at the reset, or as a sliding window slides).
            let horizon = slot_horizon(rate, false);
            if next > now + horizon {
                return Err(NotYet::AskAgainAt(next - horizon));
            }
        } else if s.estimate.first_search() {
            let horizon = slot_horizon(rate, s.estimate.target.is_some());
            if next > now + horizon {
                return Err(NotYet::AskAgainAt(next - horizon));
            }
        }
        Ok(s.slot(&self.cfg, now, true))
    }

    /// The slot [`Pacer::reserve`] would hand out at `now`, without taking it: `now` itself
    /// when neither the pace nor a pause holds a caller back.
    pub fn next_slot(&self, now: Instant) -> Instant {
        self.lock().slot(&self.cfg, now, false)
    }

    /// A slot handed out at `slot` that will not be used (its item goes back unsent): it
    /// no longer holds back a unit of an advertised quota.
    pub fn release(&self, slot: Instant) {
        self.lock().quota.release(slot);
    }

    /// How the slots handed out so far were granted (free at once or held back).
    pub fn slot_counts(&self) -> SlotCounts {
        self.lock().schedule.counts
    }

    /// May a caller whose reserved slot has arrived send at `now`? `Err(until)` when the host
    /// is paused until `until` (a pause that began after the slot was handed out): the slot is
    /// void; call [`Pacer::reserve`] again (it returns no earlier than `until`).
    ///
    /// # Errors
    /// The end of the pause in force at `now`.
    pub fn admit(&self, now: Instant) -> Result<(), Instant> {
        match self.paused_until(now) {
            Some(until) => Err(until),
            None => Ok(()),
        }
    }

    /// Feed the verdict of a response from this host, observed at `now`, when the caller does
    /// not know when the request was reserved. Answers arriving within `window / 10` after
    /// the end of the reservation queue at the last decrease are assumed to be for requests
    /// reserved before it (see the module docs); prefer [`Pacer::on_verdict_for`].
    pub fn on_verdict(&self, now: Instant, verdict: &Verdict) {
        let s = &mut *self.lock();
        let fresh = s.estimate.fresh_at(now);
        let after_pause = s.pauses.after_own(now);
        s.quota.on_answer(now, None, verdict.rate_limit.as_ref());
        self.apply(s, now, fresh, after_pause, verdict);
    }

    /// Feed the verdict of a response observed at `now` to a request whose slot was reserved
    /// at `reserved_at` (the `now` passed to the [`Pacer::reserve`] call that gave the slot
    /// it was sent in). A throttle for a request reserved before the last decrease was spaced
    /// at the old rate: it is counted (and its `Retry-After` obeyed) but cannot cause another
    /// decrease, so one overshoot costs one decrease however long the queue of slots was.
    pub fn on_verdict_for(&self, now: Instant, reserved_at: Instant, verdict: &Verdict) {
        let s = &mut *self.lock();
        let fresh = s.estimate.fresh_reserved(reserved_at);
        // Not `reserved_at`: a slot reserved before the pause but admitted after it is a
        // request sent after it, and its throttle is news.
        let after_pause = s.pauses.after_own(now);
        s.quota
            .on_answer(now, Some(reserved_at), verdict.rate_limit.as_ref());
        self.apply(s, now, fresh, after_pause, verdict);
    }

    /// `fresh`: the request was spaced at the current rate (may decrease it).
    /// `after_pause`: the answer arrived after the pacer's own last throttle pause ended
    /// (may grow or reset the consecutive-throttle count).
    fn apply(
        &self,
        s: &mut State,
        now: Instant,
        fresh: bool,
        after_pause: bool,
        verdict: &Verdict,
    ) {
        let cfg = &self.cfg;
        if let Some(rl) = &verdict.rate_limit {
            if let Some(adv) = rl.advertised_rate().filter(|r| r.is_finite() && *r > 0.0) {
                s.estimate.adopt_advertised(cfg, adv, &mut s.schedule, now);
            }
            let admitted = verdict.class == VerdictClass::Success;
            if let Some(pause) = rl.exhausted_pause(admitted) {
                s.pauses.extend(Some(now), now + pause.min(MAX_PAUSE));
            }
        }
        // A refusal by a concurrency quota says nothing about the rate (the session's limit
        // on requests in flight shrinks instead): its `Retry-After` is obeyed, nothing else.
        let concurrency_refusal = verdict.class == VerdictClass::Throttle
            && verdict
                .rate_limit
                .as_ref()
                .is_some_and(|rl| rl.concurrency_refused());
        if concurrency_refusal {
            s.schedule.note_traffic(now);
            if let Some(ra) = &verdict.retry_after {
                s.pauses.extend(Some(now), now + ra.delay.min(MAX_PAUSE));
            }
            return;
        }

        // A caller that never reserves: the traffic began at its first answer, at the latest.
        s.schedule.note_traffic(now);
        let throttled = verdict.class == VerdictClass::Throttle;
        s.estimate.observe(now, throttled);
        // A throttle within the noise (see `noise.rs`) sends back only its own item, which
        // waits its own `Retry-After`: pausing the host for each would cost the whole host
        // a pause per twenty requests at a 5 % share, whatever the rate.
        if throttled && !s.estimate.within_noise(cfg, now) {
            let server_reset = verdict
                .rate_limit
                .as_ref()
                .is_some_and(|rl| rl.exhausted() && rl.reset.is_some());
            if let Some(ra) = &verdict.retry_after {
                s.pauses.extend(Some(now), now + ra.delay.min(MAX_PAUSE));
            } else if !server_reset && after_pause {
                // No delay from the server: our own, growing while throttles keep coming.
                s.pauses.own_throttle(cfg, now);
            }
        } else if verdict.class == VerdictClass::Success && after_pause {
            s.pauses.reset_streak();
        }
        if verdict.class == VerdictClass::Success {
            s.estimate.restore_after_outage(cfg);
        }
        if !fresh {
            // An answer to a request spaced at the old rate: no evidence about the new one.
            return;
        }
        match verdict.class {
            VerdictClass::Throttle => {
                s.estimate
                    .on_fresh_throttle(cfg, now, verdict, &mut s.pauses, &mut s.schedule);
            }
            VerdictClass::Success => {
                s.estimate
                    .on_fresh_success(cfg, now, &mut s.pauses, &s.schedule);
            }
            _ => s.estimate.on_fresh_other(cfg, now),
        }
    }

    /// Several nodes share this host's limit and this one sends `share` of the traffic
    /// (clamped to [0.01, 1]; 1 alone, the default): what it sees accepted is divided by it
    /// when the pacer estimates the host's limit. Set by a coordination layer.
    pub fn set_share(&self, share: f64) {
        let share = if share.is_nan() {
            1.0
        } else {
            share.clamp(0.01, 1.0)
        };
        self.lock().estimate.share = share;
    }

    /// This node's fraction of the host's traffic (see [`Pacer::set_share`]).
    pub fn share(&self) -> f64 {
        self.lock().estimate.share
    }

    /// Take a rate decided elsewhere at `now`: another node sharing this host's limit
    /// decreased to `rate` (requests per second) with the ceiling estimate `ceiling`, or
    /// this node joins late and starts from the shared estimate. It acts as a decrease of
    /// this pacer (requests reserved before `now` were spaced at the old rate) but is not
    /// counted in [`PacerSnapshot::decreases`], which counts this pacer's own. Both numbers
    /// are clamped to the configured rates, and the rate to an advertised target.
    pub fn adopt_shared(&self, now: Instant, rate: f64, ceiling: Option<f64>) {
        if !rate.is_finite() || rate <= 0.0 {
            return;
        }
        let ceiling = ceiling.filter(|c| c.is_finite() && *c > 0.0);
        let s = &mut *self.lock();
        s.estimate
            .adopt_shared(&self.cfg, now, rate, ceiling, &mut s.schedule);
    }

    /// Pause the whole host from `now` until `until`, a pause heard by another node: like
    /// a pause of its own, the time is left out of what the host could accept.
    pub fn adopt_pause(&self, now: Instant, until: Instant) {
        self.lock()
            .pauses
            .extend(Some(now), until.min(now + MAX_PAUSE));
    }

    /// Pause the whole host until `until` (a pause only ever extends; a shorter one is
    /// ignored).
    pub fn pause_until(&self, until: Instant) {
        self.lock().pauses.extend(None, until);
    }

    /// The end of the current pause, if the host is paused at `now`.
    pub fn paused_until(&self, now: Instant) -> Option<Instant> {
        self.lock().pauses.until(now)
    }

    /// Current rate in requests per second.
    pub fn rate(&self) -> f64 {
        self.lock().estimate.rate
    }

    /// Target rate from advertised rate-limit headers (already × headroom), if any.
    pub fn target(&self) -> Option<f64> {
        self.lock().estimate.target
    }

    /// The limit estimated at the last decrease (requests per second), if any yet.
    pub fn ceiling(&self) -> Option<f64> {
        self.lock().estimate.ceiling
    }

    /// Fraction of responses over the last `window` before `now` that were throttles
    /// (0 when there were none), counting everything the remote sent.
    pub fn throttle_rate(&self, now: Instant) -> f64 {
        let (total, throttles) = self.lock().estimate.observed.sums(now);
        fraction(throttles, total)
    }

    /// Everything a progress display needs, at `now`.
    pub fn snapshot(&self, now: Instant) -> PacerSnapshot {
        let mut s = self.lock();
        let (total, throttles) = s.estimate.observed.sums(now);
        PacerSnapshot {
            rate: s.estimate.rate,
            target: s.estimate.target,
            paused_until: s.pauses.until(now),
            throttle_rate: fraction(throttles, total),
            decreases: s.estimate.decreases,
            ceiling: s.estimate.ceiling,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update leaves the state consistent, so a panicked holder is harmless.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Shortest slot horizon while searching blind: under one [`estimate`] search round
/// (250 ms), so each doubling reaches the host within the round that decides the next.
const SEARCH_HORIZON: Duration = Duration::from_millis(100);
/// Shortest slot horizon under an advertised target: the rate rises only when the server
/// raises its limit, and 800 ms bounds the lag then without 40 senders polling every 100 ms.
const TARGET_HORIZON: Duration = Duration::from_millis(800);
/// The slot horizon in send intervals, when that is longer (a caller at a low rate takes a
/// slot two intervals ahead, not a poll per 100 ms).
const HORIZON_INTERVALS: u32 = 2;

/// How far ahead of `now` slots are handed out at `rate` (requests per second), with or
/// without an advertised target.
fn slot_horizon(rate: f64, target: bool) -> Duration {
    schedule::interval(rate)
        .saturating_mul(HORIZON_INTERVALS)
        .max(if target {
            TARGET_HORIZON
        } else {
            SEARCH_HORIZON
        })
}

#[allow(clippy::cast_precision_loss)] // counts in one window stay far below 2^53
fn fraction(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod search_tests;

#[cfg(test)]
mod convergence_tests;

#[cfg(test)]
mod noise_tests;

#[cfg(test)]
mod header_tests;

#[cfg(test)]
mod quota_tests;
