//! One client request to a provider: admitted or refused at once, held while the provider
//! is paced or paused, sent and retried by abide-client's engine, and answered with the
//! upstream's answer (streaming) or the proxy's own.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use abide_client::{drive, Outgoing, RequestInfo, StopReason};
use abide_core::Clock;
use axum::body::Body;
use http::{HeaderMap, Request, Response, StatusCode};

use crate::answer;
use crate::body::{read_start, Start};
use crate::provider::{Inside, Provider};
use crate::rate::{is_too_slow, MinRate};
use crate::upstream::{strip_hop_by_hop, NoAnswer, Outcome, RequestBody, Upstream};
use crate::Proxy;

/// The header in which a client names its longest wait, in seconds.
pub const MAX_WAIT_HEADER: &str = "abide-max-wait";

/// Longest wait a client may ask for in [`MAX_WAIT_HEADER`]: one hour.
pub const MAX_WAIT_CAP: Duration = Duration::from_secs(3600);

/// The client's budget from `Abide-Max-Wait` (seconds, fractions allowed, capped at
/// [`MAX_WAIT_CAP`]); `Ok(None)` without the header.
fn client_max_wait(h: &HeaderMap) -> Result<Option<Duration>, String> {
    let Some(v) = h.get(MAX_WAIT_HEADER) else {
        return Ok(None);
    };
    let text = v.to_str().map_err(|_| "not ASCII".to_owned())?.trim();
    let secs: f64 = text.parse().map_err(|_| {
        format!(
            "{} is not a number of seconds",
            abide_core::echo::clip(text)
        )
    })?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("{secs} is not a non-negative number of seconds"));
    }
    Ok(Some(Duration::from_secs_f64(
        secs.min(MAX_WAIT_CAP.as_secs_f64()),
    )))
}

/// Forward `req` to provider `p` at `url`.
pub(crate) async fn forward(
    proxy: &Proxy,
    p: &Arc<Provider>,
    url: reqwest::Url,
    path: String,
    req: Request<Body>,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let max_wait = match client_max_wait(&parts.headers) {
        Ok(w) => w.unwrap_or(proxy.opts.max_wait),
        Err(e) => return answer::bad_header("Abide-Max-Wait", &e),
    };
    let Some(inside) = Inside::enter(p, proxy.opts.max_waiting) else {
        return answer::too_many(
            &p.name,
            p.known_wait(),
            p.pace(),
            "queue_full",
            &format!(
                "{} requests are already waiting for this provider (max_waiting)",
                proxy.opts.max_waiting
            ),
        );
    };
    // What the body may take while held: its length when declared and small, else the
    // buffering bound (a longer body streams, and holds at most that much).
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let may_hold = declared.map_or(proxy.opts.max_buffered_body, |n| {
        n.min(proxy.opts.max_buffered_body)
    });
    let Some(_held) = proxy.bodies.reserve(may_hold) else {
        return answer::too_many(
            &p.name,
            Duration::from_secs(1),
            p.pace(),
            "queue_full",
            &format!(
                "the proxy holds {} bytes of request bodies already (max_buffered_total)",
                proxy.bodies.used()
            ),
        );
    };
    let began = p.clock.monotonic();
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers);
    headers.remove(http::header::HOST);
    headers.remove(MAX_WAIT_HEADER);
    if let Some((name, value)) = &p.credential {
        headers.insert(name.clone(), value.clone());
    }
    let body = MinRate::new(body, proxy.opts.min_body_rate);
    let body = match read_start(body, proxy.opts.max_buffered_body).await {
        Ok(Start::Whole(b)) => {
            headers.remove(http::header::CONTENT_LENGTH);
            RequestBody::Buffered(b)
        }
        Ok(Start::Longer(s)) => RequestBody::Stream(Some(s)),
        Err(e) if is_too_slow(&*e) => {
            return answer::slow_body(&p.name, &e.to_string());
        }
        Err(_) => {
            return answer::gateway(
                StatusCode::BAD_REQUEST,
                &p.name,
                "the request body ended early (the client went away); nothing was sent",
            )
        }
    };
    let has_key = headers.contains_key(&p.idempotency_header);
    let info = RequestInfo {
        method: &parts.method,
        scheme: url.scheme(),
        host: url.host_str().unwrap_or(""),
        port: url.port(),
        headers: &headers,
    };
    let mut out = Outgoing::new(&p.policy, &info, &path).with_max_wait(max_wait);
    out.has_idempotency_key = has_key;
    let slot = Arc::new(std::sync::Mutex::new(Outcome::default()));
    let attempts = Upstream {
        client: proxy.client.clone(),
        method: parts.method.clone(),
        url,
        headers,
        body,
        timeout: p.timeout,
        slot: Arc::clone(&slot),
        provider: Arc::clone(p),
    };
    let result = drive(&p.policy, out, attempts).await;
    let outcome = std::mem::take(&mut *slot.lock().unwrap_or_else(PoisonError::into_inner));
    p.metrics.waited(
        p.clock
            .monotonic()
            .saturating_duration_since(began)
            .saturating_sub(outcome.upstream),
    );
    drop(inside);
    let stopped = match result {
        Ok(_) => {
            return match outcome.response {
                Some(r) => r,
                None => answer::gateway(StatusCode::BAD_GATEWAY, &p.name, "no answer"),
            }
        }
        Err(s) => s,
    };
    tracing::debug!(provider = %p.name, reason = stopped.reason.code(), attempts = stopped.attempts, "proxy stopped");
    let may_have_acted = "the request may have been acted on, so it was not replayed \
                          (a non-idempotent method without an Idempotency-Key)";
    match stopped.reason {
        StopReason::WaitTooLong { wait, cause, .. } => answer::too_many(
            &p.name,
            wait,
            p.pace(),
            "wait_too_long",
            &format!(
                "{cause} of {:.1} s exceeds this request's wait budget of {:.1} s (Abide-Max-Wait)",
                wait.as_secs_f64(),
                max_wait.as_secs_f64()
            ),
        ),
        StopReason::NotReplaySafe => {
            let status = match (&outcome.response, outcome.failure) {
                (Some(r), _) if r.status() == StatusCode::GATEWAY_TIMEOUT => r.status(),
                (None, Some(NoAnswer::Timeout)) => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::BAD_GATEWAY,
            };
            answer::gateway(status, &p.name, may_have_acted)
        }
        StopReason::MaxAge { .. } if outcome.response.is_none() && outcome.failure.is_none() => {
            answer::too_many(
                &p.name,
                p.known_wait(),
                p.pace(),
                "max_age",
                "the wait would take the request past the provider's max_age",
            )
        }
        reason => match outcome.response {
            // The upstream's own answer, as it came: attempts or age ran out, the answer
            // is final, or a streamed body cannot be resent.
            Some(r) => r,
            None => {
                let (status, what) = match outcome.failure {
                    Some(NoAnswer::Refused) => (
                        StatusCode::BAD_GATEWAY,
                        "refused the connection (nothing was sent)",
                    ),
                    Some(NoAnswer::Timeout) => (
                        StatusCode::GATEWAY_TIMEOUT,
                        "did not answer in time after the request went out",
                    ),
                    _ => (StatusCode::BAD_GATEWAY, "failed after the request went out"),
                };
                let why = match reason {
                    StopReason::Terminal if outcome.failure != Some(NoAnswer::Refused) => {
                        may_have_acted.to_owned()
                    }
                    r => format!("abide stopped: {r}"),
                };
                answer::gateway(status, &p.name, &format!("the provider {what}; {why}"))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_s_budget_is_read_in_seconds_and_capped() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(MAX_WAIT_HEADER, v.parse().unwrap());
            client_max_wait(&m)
        };
        assert_eq!(client_max_wait(&HeaderMap::new()), Ok(None));
        assert_eq!(h("2.5"), Ok(Some(Duration::from_millis(2500))));
        assert_eq!(h("0"), Ok(Some(Duration::ZERO)));
        assert_eq!(h("1e9"), Ok(Some(MAX_WAIT_CAP)));
        assert!(h("-1").is_err());
        assert!(h("soon").unwrap_err().contains("soon"));
    }
}
