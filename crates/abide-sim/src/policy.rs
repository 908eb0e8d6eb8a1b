//! The client policies compared by every scenario.
//!
//! The four naive ones are faithful copies of the clients in the incident reports, bugs
//! included. `abide` is not a copy: it drives the real [`abide_core::Session`], the one
//! decision logic the outbox runs (see `abide_policy`).

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use rand::RngCore;

use crate::provider::Response;

abide_core::named_enum! {
    /// A client policy to compare; `as_str` is the name used on the command line and in
    /// reports. `ALL` is the table order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
    #[serde(rename_all = "kebab-case")]
    pub enum PolicyKind("policy") {
        /// One attempt; anything but success is written off (the "two-bucket" client).
        NoRetry = "no-retry",
        /// Five retries of every non-2xx on its own 1, 2, 4, 8, 16 s schedule, ignoring
        /// `Retry-After`, holding the worker while it sleeps.
        FixedRetries = "fixed-retries",
        /// Honours `Retry-After` as seconds or an HTTP-date, unclamped; no pacer, no budget.
        HonourRetryAfter = "honour-retry-after",
        /// Parses `Retry-After` only as an integer and falls back to zero otherwise.
        IntegerOnly = "integer-only",
        /// Ignores `Retry-After`; retries 403, 429 and 5xx up to five times after a full
        /// jitter backoff (uniform in `[0, min(32 s, 1 s × 2^retries)]`, as AWS's
        /// "Exponential Backoff And Jitter" recommends), holding the worker while it sleeps.
        FullJitter = "full-jitter",
        /// The real abide-core policy: classify, clamp, share a budget and a pacer.
        Abide = "abide",
    }
}

/// What the client does after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The item is done.
    Delivered,
    /// The item is written off (terminal, or out of retries).
    Lost,
    /// The item is parked for a person (abide's attempt cap); not lost.
    Deferred,
    /// Try again after this long.
    Retry(Duration),
    /// Try again after this long; the request never reached the provider (a refused
    /// connection), so it is no retry: not counted toward the item's attempts.
    Unsent(Duration),
}

/// What a policy knows about the item it is deciding on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    /// Index of the item (its logical request).
    pub(crate) item: usize,
    /// Retries already made for this item (0 after the first attempt).
    pub(crate) retries: u32,
    /// When the item arrived (the start of its attempt window), wall time.
    pub(crate) arrived: SystemTime,
}

/// What a worker holding an item does next, from [`ClientPolicy::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Send now.
    Send,
    /// Wait until then and poll again.
    At(Instant),
    /// Put the item back in the queue unsent, due after this long; the worker is free.
    Back(Duration),
}

/// A client policy as the engine drives it.
pub(crate) trait ClientPolicy: fmt::Debug {
    /// True when the worker sleeps with the item (the naive `time.sleep` loop); false when the
    /// item goes back to the queue and the worker takes the next one (an outbox).
    fn holds_worker(&self) -> bool;
    /// A worker holds `attempt.item` at `now`: may it send? Called when the worker takes
    /// the item and again at every `At` it asked for.
    fn poll(
        &mut self,
        _now: Instant,
        _wall: SystemTime,
        _attempt: Attempt,
        _rng: &mut dyn RngCore,
    ) -> Next {
        Next::Send
    }
    /// Decide what to do with `resp` at monotonic `now` / wall `wall`.
    fn decide(
        &mut self,
        now: Instant,
        wall: SystemTime,
        resp: &Response,
        attempt: Attempt,
        rng: &mut dyn RngCore,
    ) -> Decision;
}

/// The four incident clients.
#[derive(Debug)]
pub(crate) struct Naive(pub(crate) NaiveKind);

#[derive(Debug, Clone, Copy)]
pub(crate) enum NaiveKind {
    NoRetry,
    Fixed,
    Honour,
    IntegerOnly,
    FullJitter,
}

const NAIVE_MAX_RETRIES: u32 = 5;

impl ClientPolicy for Naive {
    fn holds_worker(&self) -> bool {
        true
    }

    fn decide(
        &mut self,
        _now: Instant,
        wall: SystemTime,
        resp: &Response,
        attempt: Attempt,
        rng: &mut dyn RngCore,
    ) -> Decision {
        if resp.status.is_success() {
            return Decision::Delivered;
        }
        let own = Duration::from_secs(1 << attempt.retries.min(10));
        if attempt.retries >= NAIVE_MAX_RETRIES {
            return Decision::Lost;
        }
        // The incident client's loop: only these statuses are "retryable"; the rest raise.
        let retryable = matches!(resp.status.as_u16(), 403 | 429) || resp.status.is_server_error();
        let header = resp
            .headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok());
        match self.0 {
            NaiveKind::NoRetry => Decision::Lost,
            // The client that retried every non-200 on its own schedule, ignoring the server.
            NaiveKind::Fixed => Decision::Retry(own),
            _ if !retryable => Decision::Lost,
            NaiveKind::FullJitter => {
                let cap = own.min(Duration::from_secs(32));
                // A uniform fraction of the cap from 53 random bits.
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                Decision::Retry(cap.mul_f64(u))
            }
            NaiveKind::Honour => Decision::Retry(match header {
                None => own,
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .map(Duration::from_secs)
                    .or_else(|_| {
                        httpdate::parse_http_date(v)
                            .map(|at| at.duration_since(wall).unwrap_or(Duration::ZERO))
                    })
                    .unwrap_or(own),
            }),
            // The client of the HTTP-date switch: `int(header)` in a try whose handler, "to be
            // safe", waits zero.
            NaiveKind::IntegerOnly => Decision::Retry(match header {
                None => own,
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .map(Duration::from_secs)
                    .unwrap_or(Duration::ZERO),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::provider::Outcome;
    use http::{HeaderMap, HeaderValue, StatusCode};
    use rand::SeedableRng;

    fn throttle(retry_after: &str) -> Response {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::RETRY_AFTER,
            HeaderValue::from_str(retry_after).unwrap(),
        );
        Response {
            status: StatusCode::TOO_MANY_REQUESTS,
            headers,
            body: Vec::new(),
            outcome: Outcome::Throttled,
            transport: None,
            held: Duration::ZERO,
        }
    }

    fn decide(kind: PolicyKind, resp: &Response, retries: u32) -> Decision {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_781_510_400);
        let now = abide_core::Clock::monotonic(&abide_core::ManualClock::new(wall));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let attempt = Attempt {
            item: 0,
            retries,
            arrived: wall,
        };
        let mut policy = crate::engine::build(kind, now, abide_core::PacerConfig::default());
        if policy.poll(now, wall, attempt, &mut rng) != Next::Send {
            return Decision::Deferred;
        }
        policy.decide(now, wall, resp, attempt, &mut rng)
    }

    #[test]
    fn integer_only_turns_an_http_date_into_zero_and_honour_does_not() {
        // 08:00:31 against a wall clock of 08:00:00.
        let date = throttle("Mon, 15 Jun 2026 08:00:31 GMT");
        assert_eq!(
            decide(PolicyKind::IntegerOnly, &date, 0),
            Decision::Retry(Duration::ZERO)
        );
        assert_eq!(
            decide(PolicyKind::HonourRetryAfter, &date, 0),
            Decision::Retry(Duration::from_secs(31))
        );
    }

    #[test]
    fn fixed_retries_ignore_retry_after_and_give_up_after_five() {
        let r = throttle("42");
        assert_eq!(
            decide(PolicyKind::FixedRetries, &r, 2),
            Decision::Retry(Duration::from_secs(4))
        );
        assert_eq!(decide(PolicyKind::FixedRetries, &r, 5), Decision::Lost);
        assert_eq!(decide(PolicyKind::NoRetry, &r, 0), Decision::Lost);
    }

    #[test]
    fn abide_clamps_retry_after_zero_and_a_day() {
        for (value, at_least, at_most) in [("0", 1, 1), ("86400", 540, 600)] {
            match decide(PolicyKind::Abide, &throttle(value), 0) {
                Decision::Retry(d) => assert!(
                    d >= Duration::from_secs(at_least) && d <= Duration::from_secs(at_most),
                    "{value}: {d:?}"
                ),
                other => panic!("{value}: {other:?}"),
            }
        }
    }
}
