//! The simulated provider: a GCRA rate limit whose rate can change over time, a grace period
//! before abuse protection is enforced, suspension after too many rejections, `Retry-After`
//! in every form real servers send (good and bad), and transient outages.
//!
//! It answers with a real [`http::HeaderMap`] so the abide policy reads it through the same
//! classifier as production code.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use abide_core::ratelimit::RateLimitFields;
use abide_core::retry_after::{delay_seconds, RetryAfter};
use http::{HeaderMap, HeaderValue, StatusCode};

/// How the provider writes `Retry-After` (RFC 9110 §10.2.3) on a rejection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfterForm {
    /// `delay-seconds`, rounded up to the moment the limiter will accept again.
    Seconds,
    /// An IMF-fixdate naming that moment (rounded up to the whole second).
    HttpDate,
    /// Always `0`.
    Zero,
    /// Always `86400` (one day).
    Day,
    /// No header at all.
    Absent,
    /// A value no parser accepts.
    Garbage,
}

/// Abuse protection: too many rejections in a window suspends the account.
#[derive(Debug, Clone, Copy)]
pub struct Abuse {
    /// Rejections are counted over this sliding window.
    pub window: Duration,
    /// More rejections than this within `window` suspends the account.
    pub max_rejections: usize,
    /// How long a suspension lasts; every request is answered 429 without `Retry-After`.
    pub suspend_for: Duration,
    /// Abuse protection only counts after this virtual time (the grace period before it).
    pub enforce_after: Duration,
}

/// A window of virtual time in which every request gets the same canned error.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    /// Start (virtual time since the run began).
    pub from: Duration,
    /// End, exclusive.
    pub until: Duration,
    /// Status answered, e.g. 503.
    pub status: u16,
    /// `Retry-After` form sent with it.
    pub retry_after: RetryAfterForm,
}

/// Everything that shapes the provider's answers.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Rate limit schedule: from each virtual time on, this many requests per second
    /// (`f64::INFINITY` = no limit). Must start at zero.
    pub limits: Vec<(Duration, f64)>,
    /// Requests the limiter accepts back to back (GCRA burst).
    pub burst: f64,
    /// When set, the limit is a quota of `rate × window` requests per fixed window instead
    /// of a GCRA, and `Retry-After` names the window's reset, in whole seconds until the
    /// window resets, as fixed-window limiters answer.
    pub window: Option<Duration>,
    /// `Retry-After` form on throttles, switching at each virtual time.
    pub retry_after: Vec<(Duration, RetryAfterForm)>,
    /// Status of a throttle (429, or 403 for misbehaving servers).
    pub throttle_status: u16,
    /// Abuse protection, if any.
    pub abuse: Option<Abuse>,
    /// Transient outages.
    pub outages: Vec<Outage>,
    /// Items whose id is a multiple of this are genuinely bad and always answered 400.
    pub bad_every: Option<usize>,
    /// Items whose id is a multiple of this are forbidden for this client: 403 with this form.
    pub forbidden_every: Option<(usize, RetryAfterForm)>,
    /// Send IETF `RateLimit-Policy` / `RateLimit` headers (draft-ietf-httpapi-ratelimit-headers).
    pub rate_limit_headers: bool,
    /// Answer throttles as a GraphQL API does: `200` with a `THROTTLED` error and the
    /// query cost whose (requested − available) ÷ restoreRate is the wait, no
    /// `Retry-After` (Shopify's shape,
    /// <https://shopify.dev/docs/api/usage/limits#graphql-admin-api-rate-limits>).
    pub graphql_throttle: bool,
    /// A delaying gateway (GCRA only): a request over the rate is held until its slot and
    /// then accepted, while the wait stays within this bound; beyond it, refused as usual.
    pub delay: Option<DelayBound>,
}

/// How far a delaying gateway holds requests over its rate (nginx `limit_req burst delay`):
/// the wait at most `burst` intervals and at most `max_delay`.
#[derive(Debug, Clone, Copy)]
pub struct DelayBound {
    /// Requests over the rate that may wait at once.
    pub burst: u32,
    /// The longest one request is held.
    pub max_delay: Duration,
}

/// Why the provider answered as it did; the sim counts these, the policies never see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted (200).
    Accepted,
    /// Rejected by the rate limit.
    Throttled,
    /// Rejected because the account is suspended.
    Suspended,
    /// A transient outage.
    Outage,
    /// A genuinely bad request (400).
    Bad,
    /// Forbidden for this client (403).
    Forbidden,
}

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: StatusCode,
    /// Headers as the provider wrote them.
    pub headers: HeaderMap,
    /// The start of the body (empty but for GraphQL-style throttles).
    pub body: Vec<u8>,
    /// Ground truth for the report.
    pub outcome: Outcome,
    /// No answer at all (a refused connection, a timeout): `status` is then what a naive
    /// client's library would report (504), abide sees the transport failure.
    pub transport: Option<abide_core::TransportFailure>,
    /// How long a delaying gateway held the request before answering (added to the round
    /// trip).
    pub held: Duration,
}

impl Response {
    /// A throttle, whatever its shape: a `429` (rate limit or suspension), or a rate-limit
    /// refusal with another status (a GraphQL `200`, a `403`).
    pub fn is_throttle(&self) -> bool {
        self.status == StatusCode::TOO_MANY_REQUESTS || self.outcome == Outcome::Throttled
    }
}

/// The provider's state during a run.
#[derive(Debug)]
pub struct Provider {
    cfg: ProviderConfig,
    epoch: SystemTime,
    /// GCRA theoretical arrival time, virtual.
    tat: Duration,
    /// Fixed window: index of the current window and requests accepted in it.
    window_used: (u64, u64),
    rejections: VecDeque<Duration>,
    suspended_until: Option<Duration>,
    suspensions: u32,
    suspended_total: Duration,
}

impl Provider {
    /// A fresh provider; `epoch` is the wall time at virtual time zero (for HTTP-dates).
    pub fn new(cfg: ProviderConfig, epoch: SystemTime) -> Self {
        Self {
            cfg,
            epoch,
            tat: Duration::ZERO,
            window_used: (0, 0),
            rejections: VecDeque::new(),
            suspended_until: None,
            suspensions: 0,
            suspended_total: Duration::ZERO,
        }
    }

    /// The rate limit in force at `now`, requests per second.
    pub fn limit_at(&self, now: Duration) -> f64 {
        schedule_at(&self.cfg.limits, now).unwrap_or(f64::INFINITY)
    }

    /// How many times the account was suspended.
    pub fn suspensions(&self) -> u32 {
        self.suspensions
    }

    /// Total suspended time (counted when each suspension starts).
    pub fn suspended_total(&self) -> Duration {
        self.suspended_total
    }

    /// Answer one request for item `item` arriving at virtual time `now`.
    pub fn handle(&mut self, now: Duration, item: usize) -> Response {
        if let Some(until) = self.suspended_until {
            if now < until {
                return respond(StatusCode::TOO_MANY_REQUESTS, Outcome::Suspended);
            }
            self.suspended_until = None;
        }
        if let Some(o) = self
            .cfg
            .outages
            .iter()
            .find(|o| now >= o.from && now < o.until)
        {
            let (status, form) = (o.status, o.retry_after);
            let mut r = respond(code(status), Outcome::Outage);
            self.retry_after(&mut r.headers, form, now, Duration::from_secs(5));
            self.reject(now);
            return r;
        }
        if self.cfg.bad_every.is_some_and(|n| item % n == n - 1) {
            self.reject(now);
            return respond(StatusCode::BAD_REQUEST, Outcome::Bad);
        }
        if let Some((n, form)) = self.cfg.forbidden_every {
            if item % n == n - 1 {
                let mut r = respond(StatusCode::FORBIDDEN, Outcome::Forbidden);
                self.retry_after(&mut r.headers, form, now, Duration::from_secs(1));
                self.reject(now);
                return r;
            }
        }
        let rate = self.limit_at(now);
        if !rate.is_finite() {
            return respond(StatusCode::OK, Outcome::Accepted);
        }
        if let Some(window) = self.cfg.window {
            return self.fixed_window(now, rate, window);
        }
        let interval = Duration::from_secs_f64(1.0 / rate);
        let tolerance = interval.mul_f64((self.cfg.burst - 1.0).max(0.0));
        let allowed_at = self.tat.saturating_sub(tolerance);
        if now >= allowed_at {
            self.tat = self.tat.max(now) + interval;
            let mut r = respond(StatusCode::OK, Outcome::Accepted);
            self.rate_limit_headers(&mut r.headers, rate, now);
            return r;
        }
        let wait = allowed_at - now;
        if let Some(d) = self.cfg.delay {
            if wait <= d.max_delay.min(interval * d.burst) {
                // Held until its slot, then accepted: the slot is charged now.
                self.tat += interval;
                let mut r = respond(StatusCode::OK, Outcome::Accepted);
                r.held = wait;
                self.rate_limit_headers(&mut r.headers, rate, now);
                return r;
            }
        }
        let mut r = respond(code(self.cfg.throttle_status), Outcome::Throttled);
        let form = schedule_at(&self.cfg.retry_after, now).unwrap_or(RetryAfterForm::Seconds);
        self.retry_after(&mut r.headers, form, now, wait);
        self.rate_limit_headers(&mut r.headers, rate, now);
        self.reject(now);
        self.graphql(&mut r, allowed_at - now);
        r
    }

    /// A throttle rewritten into GraphQL's shape when configured: `200`, no `Retry-After`,
    /// the wait as a query cost (nothing available, 50 points a second).
    fn graphql(&self, r: &mut Response, wait: Duration) {
        if !self.cfg.graphql_throttle {
            return;
        }
        const RESTORE: f64 = 50.0;
        let requested = (wait.as_secs_f64() * RESTORE).ceil().max(1.0);
        r.status = StatusCode::OK;
        r.headers.remove(http::header::RETRY_AFTER);
        r.body = format!(
            r#"{{"errors":[{{"message":"Throttled","extensions":{{"code":"THROTTLED"}}}}],"extensions":{{"cost":{{"requestedQueryCost":{requested},"throttleStatus":{{"maximumAvailable":1000.0,"currentlyAvailable":0,"restoreRate":{RESTORE:.1}}}}}}}}}"#
        )
        .into_bytes();
    }

    fn fixed_window(&mut self, now: Duration, rate: f64, window: Duration) -> Response {
        let index = (now.as_nanos() / window.as_nanos().max(1)) as u64;
        if self.window_used.0 != index {
            self.window_used = (index, 0);
        }
        let quota = (rate * window.as_secs_f64()).round().max(1.0) as u64;
        let reset = window * (index as u32 + 1) - now;
        let accepted = self.window_used.1 < quota;
        let mut r = if accepted {
            self.window_used.1 += 1;
            respond(StatusCode::OK, Outcome::Accepted)
        } else {
            let mut r = respond(code(self.cfg.throttle_status), Outcome::Throttled);
            let form = schedule_at(&self.cfg.retry_after, now).unwrap_or(RetryAfterForm::Seconds);
            self.retry_after(&mut r.headers, form, now, reset);
            self.reject(now);
            self.graphql(&mut r, reset);
            r
        };
        if self.cfg.rate_limit_headers {
            let left = quota - self.window_used.1;
            write_rate_limit(&mut r.headers, quota, window, left, reset);
        }
        r
    }

    fn reject(&mut self, now: Duration) {
        let Some(abuse) = self.cfg.abuse else { return };
        if now < abuse.enforce_after {
            return;
        }
        self.rejections.push_back(now);
        while self
            .rejections
            .front()
            .is_some_and(|&t| t + abuse.window <= now)
        {
            self.rejections.pop_front();
        }
        if self.rejections.len() > abuse.max_rejections {
            self.suspended_until = Some(now + abuse.suspend_for);
            self.suspensions += 1;
            self.suspended_total += abuse.suspend_for;
            self.rejections.clear();
        }
    }

    fn retry_after(&self, h: &mut HeaderMap, form: RetryAfterForm, now: Duration, wait: Duration) {
        // Rounded up, so a client that obeys is never a fraction early.
        let honest = RetryAfter::after(wait);
        let value = match form {
            RetryAfterForm::Seconds => honest.to_header_value(),
            RetryAfterForm::HttpDate => {
                // The second after the wait ends, past the current one.
                let secs = delay_seconds(wait);
                let at = self.epoch + Duration::from_secs(now.as_secs() + secs + 1);
                RetryAfter::at(at).to_header_value()
            }
            RetryAfterForm::Zero => HeaderValue::from_static("0"),
            RetryAfterForm::Day => HeaderValue::from_static("86400"),
            RetryAfterForm::Absent => return,
            RetryAfterForm::Garbage => HeaderValue::from_static("soon-ish"),
        };
        h.insert(http::header::RETRY_AFTER, value);
    }

    fn rate_limit_headers(&self, h: &mut HeaderMap, rate: f64, now: Duration) {
        if !self.cfg.rate_limit_headers {
            return;
        }
        // Advertise the quota over a 10 s window so fractional rates stay integral.
        let quota = (rate * 10.0).round() as u64;
        let backlog = self.tat.saturating_sub(now).as_secs_f64() * rate;
        let remaining = (self.cfg.burst - backlog).floor().max(0.0) as u64;
        let reset = self.tat.saturating_sub(now);
        write_rate_limit(h, quota, Duration::from_secs(10), remaining, reset);
    }
}

/// IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers),
/// the reset at least a second.
fn write_rate_limit(h: &mut HeaderMap, quota: u64, window: Duration, left: u64, reset: Duration) {
    let mut f = RateLimitFields::new();
    f.push(
        "default",
        quota,
        Some(window),
        left,
        reset.max(Duration::from_secs(1)),
    );
    f.insert_into(h);
}

fn respond(status: StatusCode, outcome: Outcome) -> Response {
    Response {
        status,
        headers: HeaderMap::new(),
        body: Vec::new(),
        outcome,
        transport: None,
        held: Duration::ZERO,
    }
}

fn code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::TOO_MANY_REQUESTS)
}

/// The value of a piecewise-constant schedule at `now` (last entry starting at or before it).
pub(crate) fn schedule_at<T: Copy>(schedule: &[(Duration, T)], now: Duration) -> Option<T> {
    schedule
        .iter()
        .take_while(|(from, _)| *from <= now)
        .last()
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rate: f64) -> ProviderConfig {
        ProviderConfig {
            limits: vec![(Duration::ZERO, rate)],
            burst: 1.0,
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
        }
    }

    #[test]
    fn a_delaying_gateway_holds_what_fits_at_its_slot_and_refuses_the_rest() {
        let mut c = cfg(10.0);
        c.delay = Some(DelayBound {
            burst: 3,
            max_delay: Duration::from_secs(1),
        });
        let mut p = Provider::new(c, SystemTime::UNIX_EPOCH);
        let held: Vec<_> = (0..5)
            .map(|_| {
                let r = p.handle(Duration::ZERO, 0);
                (r.outcome, r.held.as_millis())
            })
            .collect();
        let ok = Outcome::Accepted;
        assert_eq!(
            held,
            [
                (ok, 0),
                (ok, 100),
                (ok, 200),
                (ok, 300),
                (Outcome::Throttled, 0)
            ]
        );
    }

    #[test]
    fn gcra_accepts_the_limit_and_no_more() {
        let mut p = Provider::new(cfg(10.0), SystemTime::UNIX_EPOCH);
        let accepted = (0..1000)
            .filter(|i| {
                let now = Duration::from_millis(i * 10);
                p.handle(now, 0).outcome == Outcome::Accepted
            })
            .count();
        assert_eq!(accepted, 100, "10 s at 100 req/s against 10/s");
    }

    #[test]
    fn fixed_window_says_when_the_window_resets() {
        let mut c = cfg(1.0);
        c.window = Some(Duration::from_secs(60));
        let mut p = Provider::new(c, SystemTime::UNIX_EPOCH);
        for i in 0..60 {
            assert_eq!(
                p.handle(Duration::from_millis(i * 10), 0).outcome,
                Outcome::Accepted
            );
        }
        let r = p.handle(Duration::from_millis(17_500), 0);
        assert_eq!(r.outcome, Outcome::Throttled);
        assert_eq!(r.headers[http::header::RETRY_AFTER], "43");
        let next = p.handle(Duration::from_secs(60), 0);
        assert_eq!(next.outcome, Outcome::Accepted);
    }

    #[test]
    fn http_date_form_names_a_moment_after_the_wait() {
        let mut c = cfg(1.0);
        c.retry_after = vec![(Duration::ZERO, RetryAfterForm::HttpDate)];
        let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_781_510_400);
        let mut p = Provider::new(c, epoch);
        p.handle(Duration::ZERO, 0);
        let r = p.handle(Duration::from_millis(100), 0);
        let value = r.headers[http::header::RETRY_AFTER].as_bytes();
        // Read back by the reader the abide policy uses.
        let Ok(abide_core::retry_after::RetryAfter::Date(at)) =
            abide_core::retry_after::parse(value)
        else {
            panic!("{value:?} is not an HTTP-date");
        };
        assert!(at >= epoch + Duration::from_secs(1), "{value:?}");
    }

    #[test]
    fn the_rate_limit_fields_read_back_as_written() {
        let mut h = HeaderMap::new();
        write_rate_limit(
            &mut h,
            100,
            Duration::from_secs(10),
            3,
            Duration::from_millis(1500),
        );
        let info = abide_core::ratelimit::read(
            &h,
            SystemTime::UNIX_EPOCH,
            abide_core::ratelimit::Dialect::Auto,
        )
        .info
        .expect("the fields read back");
        assert_eq!(
            (info.limit, info.window, info.remaining, info.reset),
            (
                Some(100),
                Some(Duration::from_secs(10)),
                Some(3),
                Some(Duration::from_secs(2))
            )
        );
        // A reset already due is still said as a second.
        write_rate_limit(&mut h, 100, Duration::from_secs(10), 3, Duration::ZERO);
        assert_eq!(h["ratelimit"], "\"default\";r=3;t=1");
    }

    #[test]
    fn abuse_protection_suspends_after_the_grace_period() {
        let mut c = cfg(1.0);
        c.abuse = Some(Abuse {
            window: Duration::from_secs(10),
            max_rejections: 5,
            suspend_for: Duration::from_secs(100),
            enforce_after: Duration::from_secs(5),
        });
        let mut p = Provider::new(c, SystemTime::UNIX_EPOCH);
        for i in 0..50 {
            p.handle(Duration::from_millis(i * 100), 0);
        }
        assert_eq!(p.suspensions(), 0, "grace period");
        for i in 50..100 {
            p.handle(Duration::from_millis(i * 100), 0);
        }
        assert_eq!(p.suspensions(), 1);
        let r = p.handle(Duration::from_secs(50), 0);
        assert_eq!(r.outcome, Outcome::Suspended);
    }
}
