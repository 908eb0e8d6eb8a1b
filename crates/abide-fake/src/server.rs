//! The HTTP side: routes, the message handler and the throttle styles.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use abide_core::retry_after::RetryAfter;
use abide_core::Clock;
use abide_gate::{safe_trace, Rejection};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::app::{App, Inner, GRACE_MEMORY, IDEMPOTENCY_MEMORY};
use crate::config::{Behaviour, HeaderStyle, RetryAfterStyle, SuspensionStyle, ThrottleStyle};
use crate::dates;
use crate::idempotency::idempotency_key;
use crate::shared::{self, Guard, Shared};
use crate::styles::restyle;

/// Largest accepted message body, in bytes; larger ones get 413.
pub(crate) const MAX_BODY_BYTES: usize = 2 << 20;

pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/v1/messages",
            post(messages).layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES)),
        )
        .route("/v1/quota", get(quota))
        .route("/v1/export", get(crate::export::export))
        .route("/_stats", get(stats))
        .route("/_stats/keys", get(key_stats))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(app)
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    (status, axum::Json(body)).into_response()
}

async fn stats(State(app): State<Arc<App>>) -> Response {
    json(
        StatusCode::OK,
        serde_json::to_value(app.stats()).unwrap_or_default(),
    )
}

async fn key_stats(State(app): State<Arc<App>>) -> Response {
    json(
        StatusCode::OK,
        serde_json::to_value(app.key_counts()).unwrap_or_default(),
    )
}

async fn quota(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    // Inspection only: charges nothing and answers while the caller is exhausted.
    let id = app.keys.lookup(&headers);
    abide_gate::quota_response(&app.gates, id.as_ref(), app.clock.monotonic()).into_response()
}

/// Decrements `in_flight` when the request ends, however it ends.
struct InFlight(Arc<App>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().stats.snap.in_flight -= 1;
    }
}

/// Counts a held request as abandoned if its future is dropped before its slot.
struct Held(Option<Arc<App>>);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(app) = self.0.take() {
            app.lock().stats.snap.abandoned += 1;
        }
    }
}

async fn messages(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let shared = shared::ask(&app, &headers).await;
    let (msg_id, mut guard, extra, delay) = match decide(&app, &headers, &body, shared) {
        Ok(accepted) => accepted,
        Err(refused) => return refused,
    };
    let in_flight = InFlight(Arc::clone(&app));
    if !delay.is_zero() {
        // A delaying gate reserved a slot ahead: serve the request then, not before. A
        // client that disconnects drops this future, and the guard gives the slot back.
        let mut held = Held(Some(Arc::clone(&app)));
        tokio::time::sleep(delay).await;
        held.0 = None;
        if let Some(g) = guard.as_mut() {
            g.arrived();
        }
        let mut st = app.lock();
        st.stats.snap.delayed += 1;
        st.stats.snap.delay_ms += u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    }
    if app.cfg.latency_ms > 0 {
        // Processing time is real time even under a manual clock: it models work, and
        // keeps the slot (and `in_flight`) held while the client waits.
        tokio::time::sleep(Duration::from_millis(app.cfg.latency_ms)).await;
    }
    if let Some(g) = guard {
        g.release().await;
    }
    drop(in_flight);
    let mut res = json(StatusCode::ACCEPTED, serde_json::json!({ "id": msg_id }));
    res.headers_mut().extend(extra);
    res
}

/// Message id, leases, headers, and how long a delaying gate holds the request.
type Accepted = (String, Option<Guard>, HeaderMap, Duration);

/// Everything decided under the lock: `Ok` to accept (after the configured latency), `Err`
/// with the final answer otherwise.
// A response is big, but this is called once per request and returns at once.
#[allow(clippy::result_large_err)]
fn decide(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: &[u8],
    shared: Option<Shared>,
) -> Result<Accepted, Response> {
    // Parsed before taking the lock that every request shares.
    let body_ok = serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| v.is_object());
    let now = app.clock.monotonic();
    let wall = app.clock.now();
    let elapsed = now.saturating_duration_since(app.start);
    let sec = elapsed.as_secs();
    let mut st = app.lock();
    st.stats.request(sec);
    let n = st.stats.snap.requests;

    let Some(id) = app.keys.lookup(headers) else {
        st.stats.reject(sec, "unauthenticated", 401, false);
        return Err(json(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"error": "unauthenticated"}),
        ));
    };
    let caller = safe_trace(&id.key);
    if !body_ok {
        st.stats.reject(sec, "bad_request", 400, false);
        return Err(json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": "invalid_json"}),
        ));
    }
    // A key we cannot store verbatim must not be ignored: the retry would be accepted twice.
    let idem = match idempotency_key(headers) {
        Ok(k) => {
            if let Some(k) = &k {
                st.stats.request_for_key(k);
            }
            k.map(|k| (id.key.clone(), k))
        }
        Err(()) => {
            st.stats.reject(sec, "bad_request", 400, false);
            return Err(json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": "invalid_idempotency_key"}),
            ));
        }
    };
    if let Some(until) = st.suspended.get(&id.key).copied() {
        if until > now {
            st.stats.reject(sec, "suspended", 403, false);
            tracing::info!(%caller, "request from suspended key refused");
            let mut res = json(
                StatusCode::FORBIDDEN,
                serde_json::json!({"error": "suspended"}),
            );
            if app.cfg.abuse.suspension == SuspensionStyle::RetryAfter {
                res.headers_mut().insert(
                    header::RETRY_AFTER,
                    RetryAfter::after(until - now).to_header_value(),
                );
            }
            return Err(res);
        }
        st.suspended.remove(&id.key);
    }
    if let Some(msg_id) = idem.as_ref().and_then(|k| st.answers.get(k)).cloned() {
        st.stats.snap.duplicates += 1;
        return Err(json(
            StatusCode::ACCEPTED,
            serde_json::json!({ "id": msg_id }),
        ));
    }

    let b = app.behaviour(elapsed, n);
    if b.fail_503 > 0.0 {
        st.acc_503 += b.fail_503;
        if st.acc_503 >= 1.0 - 1e-9 {
            st.acc_503 -= 1.0;
            st.stats.reject(sec, "unavailable", 503, false);
            return Err(json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": "unavailable"}),
            ));
        }
    }

    // Throttles that do not follow the pace: whatever the rate, this share is refused.
    if st.noise.picks(&b) {
        st.stats.reject(sec, "noise", 429, true);
        let mut res = json(
            StatusCode::TOO_MANY_REQUESTS,
            serde_json::json!({"error": "rate_limited", "reason": "noise"}),
        );
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return Err(res);
    }

    let grace_pass = b.grace && idem.as_ref().is_some_and(|k| st.grace_pending.remove(k));
    let mut extra = HeaderMap::new();
    let mut guard = None;
    let mut delay = Duration::ZERO;
    if grace_pass {
        st.stats.snap.grace_passes += 1;
        tracing::info!(%caller, "over-limit retry accepted during grace period");
    } else {
        let trace = idem.as_ref().map(|k| k.1.as_str());
        let verdict = match shared {
            None => app
                .gates
                .check_delayed(&id.key, id.account.as_deref(), trace, now)
                .map(|adm| {
                    let (h, d, st) = (adm.headers(), adm.delay(), adm.statuses());
                    (
                        h,
                        Guard::Local(adm.into_guard(Arc::clone(&app.gates))),
                        d,
                        st,
                    )
                }),
            Some(Shared::Admitted(a)) => {
                let (h, g, d) = *a;
                Ok((h, Guard::Shared(Box::new(g)), d, Vec::new()))
            }
            Some(Shared::Refused(rej)) => Err(rej),
            Some(Shared::Unavailable) => {
                st.stats.reject(sec, "unavailable", 503, false);
                let mut res = json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    serde_json::json!({"error": "unavailable"}),
                );
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                return Err(res);
            }
        };
        match verdict {
            Err(rej) => {
                if b.grace {
                    if let Some(k) = idem {
                        if st.grace_pending.len() >= GRACE_MEMORY {
                            st.grace_pending.clear();
                        }
                        st.grace_pending.insert(k);
                    }
                }
                note_abuse(app, &mut st, &id.key, &caller, now);
                let (status, res) = throttle(&b, &rej, wall, app.cfg.headers);
                st.stats.reject(sec, rej.category(), status.as_u16(), true);
                tracing::info!(gate = rej.category(), %caller, status = status.as_u16(), "request throttled");
                return Err(res);
            }
            Ok((h, g, d, statuses)) => {
                extra = h;
                delay = d;
                if let Some(style) = app.cfg.headers {
                    restyle(&mut extra, style, wall, &statuses);
                }
                guard = Some(g);
            }
        }
    }

    st.seq += 1;
    let msg_id = format!("msg_{:010}", st.seq);
    if let Some(k) = idem {
        st.answers.insert(k.clone(), msg_id.clone());
        st.answer_order.push_back(k);
        if st.answer_order.len() > IDEMPOTENCY_MEMORY {
            if let Some(old) = st.answer_order.pop_front() {
                st.answers.remove(&old);
            }
        }
    }
    st.stats.snap.accepted += 1;
    st.stats.snap.in_flight += 1;
    Ok((msg_id, guard, extra, delay))
}
fn note_abuse(app: &App, st: &mut Inner, key: &str, caller: &str, now: Instant) {
    let a = &app.cfg.abuse;
    if a.threshold == 0 {
        return;
    }
    let window = Duration::from_secs(a.window_secs);
    let q = st.abuse.entry(key.to_owned()).or_default();
    q.push_back(now);
    while q
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= window)
    {
        q.pop_front();
    }
    if q.len() >= a.threshold as usize {
        q.clear();
        st.suspended
            .insert(key.to_owned(), now + Duration::from_secs(a.suspend_secs));
        st.stats.snap.suspensions += 1;
        tracing::warn!(%caller, suspend_secs = a.suspend_secs, "key suspended by abuse protection");
    }
}

fn retry_after_value(style: RetryAfterStyle, rej: &Rejection, wall: SystemTime) -> Option<String> {
    let secs = rej.retry_after_secs();
    // The moment the wait ends, rounded up to the second: never earlier than meant.
    let honest = RetryAfter::at(wall + Duration::from_secs(secs));
    let RetryAfter::Date(at) = honest else {
        return None;
    };
    Some(match style {
        RetryAfterStyle::Seconds => RetryAfter::Delay(Duration::from_secs(secs)).to_string(),
        RetryAfterStyle::ImfFixdate => honest.to_string(),
        RetryAfterStyle::Rfc850 => dates::rfc850(at),
        RetryAfterStyle::Asctime => dates::asctime(at),
        RetryAfterStyle::Zero => "0".to_owned(),
        RetryAfterStyle::Huge => "86400".to_owned(),
        RetryAfterStyle::Garbage => "soon-ish".to_owned(),
        RetryAfterStyle::Absent => return None,
    })
}

fn throttle(
    b: &Behaviour,
    rej: &Rejection,
    wall: SystemTime,
    style: Option<HeaderStyle>,
) -> (StatusCode, Response) {
    if let Some(vendor) = crate::vendor_throttles::answer(b.throttle, rej.wait()) {
        return vendor;
    }
    let smpp = serde_json::json!({ "command_status": b.smpp_status });
    let (status, mut res) = match b.throttle {
        ThrottleStyle::Http403 => {
            let mut res = StatusCode::FORBIDDEN.into_response();
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("0"));
            return (StatusCode::FORBIDDEN, res);
        }
        ThrottleStyle::Smpp200 => return (StatusCode::OK, json(StatusCode::OK, smpp)),
        ThrottleStyle::Smpp429 => (
            StatusCode::TOO_MANY_REQUESTS,
            json(StatusCode::TOO_MANY_REQUESTS, smpp),
        ),
        _ => {
            let body = serde_json::json!({"error": "rate_limited", "reason": rej.category()});
            (
                StatusCode::TOO_MANY_REQUESTS,
                json(StatusCode::TOO_MANY_REQUESTS, body),
            )
        }
    };
    if let Some(style) = style {
        // A chosen header style: the limits in that style on every throttle; Retry-After
        // in whatever form the behaviour says (or none).
        let mut h = rej.headers();
        h.remove(header::RETRY_AFTER);
        restyle(&mut h, style, wall, rej.rejected());
        res.headers_mut().extend(h);
        if let Some(v) = retry_after_value(b.retry_after, rej, wall) {
            if let Ok(v) = HeaderValue::from_str(&v) {
                res.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
    } else if b.retry_after == RetryAfterStyle::Seconds {
        // The honest style also advertises the rejecting gates' RateLimit fields.
        res.headers_mut().extend(rej.headers());
    } else if let Some(v) = retry_after_value(b.retry_after, rej, wall) {
        if let Ok(v) = HeaderValue::from_str(&v) {
            res.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    (status, res)
}
