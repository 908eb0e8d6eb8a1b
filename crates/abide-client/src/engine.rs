//! The in-process driver: one logical request through its host's
//! [`Session`](abide_core::Session).
//!
//! Every decision (classification, `Retry-After` clamp, retry budget, pacer, retry or
//! stop) is the session's; this loop only waits where the session says, sends, reports
//! the answer, and turns the session's "hand back" into a wait (an in-process caller has no
//! queue to hand an item back to) or, past `max_wait` or `max_age`, into a [`Stopped`].
//! abide-tower's service and abide-reqwest's middleware both drive it; implement
//! [`Attempts`] to drive it from another client (see the [crate docs](crate)).

use std::future::Future;
use std::time::{Duration, Instant};

use abide_core::session::is_past_max_age;
use abide_core::{
    parse_warnings, BudgetRole, Decision, DeferReason, HandBackReason, ItemContext, Observation,
    Step, TransportFailure, VerdictClass,
};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use rand::RngCore;

use crate::error::{BoxError, LastAnswer, StopReason, Stopped, WaitCause};
use crate::policy::{Policy, RequestInfo};

/// Longest body start kept in a [`LastAnswer`].
const BODY_IN_ERROR: usize = 512;

/// One logical request's copies, as a client sends them.
pub trait Attempts: Send {
    /// The client's response.
    type Response: Send;

    /// Status and headers of a response.
    fn head(response: &Self::Response) -> (StatusCode, &HeaderMap);

    /// Whether another copy of the request can be sent (`false` once a request with a
    /// streaming body has been sent).
    fn can_resend(&self) -> bool;

    /// Send one copy with the `extra` headers set (replacing any of the same name).
    /// Return the start of the body in [`Reply::body`] if it was read (it is given to the
    /// classifier, and quoted in errors); empty otherwise.
    ///
    /// # Errors
    /// [`SendFailure`] when no answer arrived.
    fn send(
        &mut self,
        extra: &HeaderMap,
    ) -> impl Future<Output = Result<Reply<Self::Response>, SendFailure>> + Send;
}

/// An answer from [`Attempts::send`].
#[derive(Debug)]
pub struct Reply<R> {
    /// The response, returned to the caller if abide stops here.
    pub response: R,
    /// The start of the body, if read.
    pub body: Bytes,
}

/// No answer: the transport failed.
#[derive(Debug)]
pub struct SendFailure {
    /// The connection could not be established, so nothing was sent.
    pub connect: bool,
    /// The client's error.
    pub error: BoxError,
}

/// What the driver needs to know about a request before it is handed to [`Attempts`].
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The host key (see [`Policy::key_for`]).
    pub key: String,
    /// The method.
    pub method: Method,
    /// The path, for `Deprecation`/`Sunset` warnings.
    pub path: String,
    /// The idempotency key the caller set, if any (it is sent on every attempt as is).
    pub has_idempotency_key: bool,
    /// This request's longest single wait, instead of the policy's `max_wait` (e.g. a
    /// proxy's caller naming its own budget); `None`: the policy's.
    pub max_wait: Option<Duration>,
}

impl Outgoing {
    /// Describe a request for `policy`.
    pub fn new(policy: &Policy, info: &RequestInfo<'_>, path: &str) -> Self {
        let has_idempotency_key = policy
            .inner
            .idempotency
            .as_ref()
            .is_some_and(|h| info.headers.contains_key(h));
        Self {
            key: policy.key_for(info),
            method: info.method.clone(),
            path: path.to_owned(),
            has_idempotency_key,
            max_wait: None,
        }
    }

    /// The same request, waiting at most `max_wait` at once (a zero wait is raised to 1 ms:
    /// a budget of nothing still lets a free send slot through).
    #[must_use]
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait.max(Duration::from_millis(1)));
        self
    }
}

/// Safe to repeat by definition (RFC 9110 §9.2.2).
fn idempotent(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// A random UUID (v4 layout) from the policy's seeded RNG.
fn new_idempotency_key(rng: &mut dyn RngCore) -> HeaderValue {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
    HeaderValue::from_str(&id.hyphenated().to_string())
        .unwrap_or_else(|_| HeaderValue::from_static("abide-key"))
}

/// What happened so far, for the final error.
struct Trace {
    key: String,
    start: Instant,
    sent: u32,
    last: Option<LastAnswer>,
    source: Option<BoxError>,
}

impl Trace {
    fn stop(&mut self, reason: StopReason, now: Instant) -> Stopped {
        tracing::debug!(host = %self.key, reason = reason.code(), attempts = self.sent, "abide stopped");
        Stopped {
            reason,
            last: self.last.take(),
            attempts: self.sent,
            elapsed: now.saturating_duration_since(self.start),
            host: self.key.clone(),
            source: self.source.take(),
        }
    }
}

/// Deliver one logical request: wait for the host's pace, send, classify, and retry or
/// stop as the host's session decides.
///
/// # Errors
/// [`Stopped`] when abide gave up: why, and what the server said last.
///
/// # Cancel safety
/// Dropping the future abandons the request; a copy on the wire may still arrive. The
/// host's state stays consistent (a reserved slot is simply unused).
pub async fn drive<A: Attempts>(
    policy: &Policy,
    out: Outgoing,
    mut attempts: A,
) -> Result<A::Response, Stopped> {
    let p = &policy.inner;
    let host = policy.host(&out.key);
    let s = &host.session;
    let mut rng = policy.rng();
    let start = p.clock.monotonic();
    let window_start = p.clock.now();
    let max_age = s.config().retry.max_age;
    let mut trace = Trace {
        key: out.key.clone(),
        start,
        sent: 0,
        last: None,
        source: None,
    };
    let mut extra = HeaderMap::new();
    let mut replay_safe = idempotent(&out.method) || out.has_idempotency_key;
    if !replay_safe {
        if let Some(name) = &p.idempotency {
            extra.insert(name.clone(), new_idempotency_key(&mut rng));
            replay_safe = true;
        }
    }
    // A wait the caller accepts, or the reason it does not: longer than `max_wait`, or
    // ending past the maximum age (the session's own rule, on its wall clock).
    let max_wait = out.max_wait.unwrap_or(p.max_wait);
    let check = |wait: Duration, cause: WaitCause| -> Option<StopReason> {
        if wait > max_wait {
            return Some(StopReason::WaitTooLong {
                wait,
                max_wait,
                cause,
            });
        }
        let past = p
            .clock
            .now()
            .checked_add(wait)
            .is_none_or(|end| is_past_max_age(window_start, end, max_age));
        past.then_some(StopReason::MaxAge { max_age })
    };
    let mut role = BudgetRole::First;
    'logical: loop {
        let mut delivery = s.delivery(ItemContext {
            window_attempts: trace.sent,
            window_start,
            role,
            send_by: None,
        });
        loop {
            let now = p.clock.monotonic();
            match delivery.poll(s, now, p.clock.now(), &mut rng) {
                Step::Send => {}
                Step::WaitUntil(at) => {
                    let wait = at.saturating_duration_since(now);
                    if let Some(r) = check(wait, WaitCause::Pacing) {
                        return Err(trace.stop(r, now));
                    }
                    p.sleeper.sleep_until(at).await;
                    continue;
                }
                Step::HandBack { after, reason } => {
                    let cause = match reason {
                        HandBackReason::RetryBudgetExhausted => WaitCause::RetryBudget,
                        _ => WaitCause::HostPaused,
                    };
                    if let Some(r) = check(after, cause) {
                        return Err(trace.stop(r, now));
                    }
                    p.sleeper.sleep_until(now + after).await;
                    continue 'logical;
                }
            }
            trace.sent += 1;
            let result = attempts.send(&extra).await;
            let (now, wall) = (p.clock.monotonic(), p.clock.now());
            let (answer, response) = match result {
                Ok(reply) => {
                    let (status, headers) = A::head(&reply.response);
                    host.warn(&out.path, parse_warnings(headers));
                    let obs = Observation::Http {
                        status,
                        headers,
                        body: &reply.body,
                    };
                    let answer = delivery.on_answer(s, now, wall, &obs, &mut rng);
                    let body = &reply.body[..reply.body.len().min(BODY_IN_ERROR)];
                    trace.last = Some(LastAnswer {
                        status: Some(status),
                        reason: answer.verdict.reason.clone(),
                        retry_after: headers
                            .get(http::header::RETRY_AFTER)
                            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
                        body: String::from_utf8_lossy(body).into_owned(),
                    });
                    trace.source = None;
                    (answer, Some(reply.response))
                }
                Err(failure) => {
                    let f = if failure.connect {
                        TransportFailure::Connect
                    } else {
                        TransportFailure::AfterSend { replay_safe }
                    };
                    let answer =
                        delivery.on_answer(s, now, wall, &Observation::Transport(f), &mut rng);
                    if answer.outage_began {
                        tracing::warn!(host = %out.key, error = %failure.error, "host unreachable; pausing it");
                    }
                    if !answer.sent {
                        // The connection was never made: no request, no attempt.
                        trace.sent = trace.sent.saturating_sub(1);
                    }
                    trace.last = Some(LastAnswer {
                        status: None,
                        reason: answer.verdict.reason.clone(),
                        retry_after: None,
                        body: String::new(),
                    });
                    trace.source = Some(failure.error);
                    (answer, None)
                }
            };
            match answer.decision {
                Decision::Delivered => match response {
                    Some(r) => return Ok(r),
                    None => return Err(trace.stop(StopReason::Terminal, now)),
                },
                Decision::Failed => match response {
                    Some(r) if !p.terminal_as_error => return Ok(r),
                    _ => return Err(trace.stop(StopReason::Terminal, now)),
                },
                // The host's credential is refused (a run of 403s across requests): the host
                // is paused for the requests after it; this one's answer is the refusal.
                Decision::Deferred(DeferReason::CredentialRefused { .. }) => match response {
                    Some(r) if !p.terminal_as_error => return Ok(r),
                    _ => return Err(trace.stop(StopReason::Terminal, now)),
                },
                Decision::Deferred(why) => {
                    let reason = match why {
                        DeferReason::AttemptCap { cap, .. } => StopReason::AttemptCap { cap },
                        DeferReason::MaxAge { max_age, .. } => StopReason::MaxAge { max_age },
                        DeferReason::CredentialsRejected { .. } => StopReason::CredentialsRejected,
                        DeferReason::CredentialRefused { .. } => StopReason::Terminal,
                        DeferReason::OutOfQuota { .. } => StopReason::OutOfQuota,
                    };
                    return Err(trace.stop(reason, now));
                }
                Decision::Resend => {
                    let Some(hook) = &p.refresh else {
                        // No way to refresh: resending the same credentials is pointless.
                        return match response {
                            Some(r) => Ok(r),
                            None => Err(trace.stop(StopReason::Terminal, now)),
                        };
                    };
                    if !attempts.can_resend() {
                        return Err(trace.stop(StopReason::BodyNotReplayable, now));
                    }
                    match hook().await {
                        Ok(headers) => {
                            for (name, value) in &headers {
                                extra.insert(name.clone(), value.clone());
                            }
                        }
                        Err(e) => {
                            trace.source = Some(e);
                            let now = p.clock.monotonic();
                            return Err(trace.stop(StopReason::RefreshFailed, now));
                        }
                    }
                    // Same delivery: paced again, no retry budget drawn.
                }
                Decision::Retry { after } => {
                    if !attempts.can_resend() {
                        return Err(trace.stop(StopReason::BodyNotReplayable, now));
                    }
                    // A throttle or a refused connection says the request was not acted on;
                    // any other failure might have been.
                    let not_acted_on =
                        answer.verdict.class == VerdictClass::Throttle || response.is_none();
                    if !replay_safe && !not_acted_on {
                        return Err(trace.stop(StopReason::NotReplaySafe, now));
                    }
                    if let Some(r) = check(after, WaitCause::Retry) {
                        return Err(trace.stop(r, now));
                    }
                    tracing::debug!(
                        host = %out.key,
                        attempt = trace.sent,
                        verdict = %answer.verdict.reason,
                        delay_ms = after.as_millis() as u64,
                        delay_reason = ?answer.delay.as_ref().map(|d| d.reason),
                        "abide retries"
                    );
                    drop(response);
                    p.sleeper.sleep_until(now + after).await;
                    role = BudgetRole::Retry;
                    continue 'logical;
                }
            }
        }
    }
}
