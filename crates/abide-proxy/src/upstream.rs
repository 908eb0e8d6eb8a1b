//! One client request's copies to its provider: abide-client's [`Attempts`], sent with
//! reqwest.
//!
//! The engine sees only the status, the headers and the start of the body (for the
//! classifier); the response itself, its body still streaming, waits in a slot the proxy
//! reads when the engine is done: the last answer, whether the engine delivered it or
//! stopped on it (so an upstream `429` reaches the client with its real `Retry-After` once
//! attempts or age ran out).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use abide_client::{Attempts, BoxError, Reply, SendFailure};
use abide_core::Clock;
use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, Method, StatusCode};

use crate::body::{Prefixed, SyncBody};
use crate::rate::MinRate;

/// Bytes of a response read for the classifier: every non-2xx body start, and whole 2xx
/// bodies no longer than this (a throttle hidden in a `200`), 64 KiB.
pub(crate) const CLASSIFIED_BODY: usize = 64 * 1024;

/// A request body as the proxy holds it.
pub(crate) enum RequestBody {
    /// Read whole (at most the buffering bound): sent again on every attempt.
    Buffered(Bytes),
    /// Longer than the bound: sent once as it arrives; `None` once sent.
    Stream(Option<Prefixed<MinRate<Body>>>),
}

/// How the last attempt ended without an answer, for the proxy's own 502/504.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// No connection was made.
    Refused,
    /// The attempt timed out after the request went out.
    Timeout,
    /// The connection failed after the request went out.
    Reset,
}

/// What the proxy reads after the engine is done.
#[derive(Default)]
pub(crate) struct Outcome {
    /// The last answer, body still streaming; `None` when the last attempt got none.
    pub(crate) response: Option<http::Response<Body>>,
    /// How the last attempt failed, when it got no answer.
    pub(crate) failure: Option<NoAnswer>,
    /// Time spent on the wire, all attempts together.
    pub(crate) upstream: Duration,
}

/// The slot an [`Upstream`] leaves its outcome in.
pub(crate) type Slot = Arc<Mutex<Outcome>>;

/// One client request, as sent to its provider.
pub(crate) struct Upstream {
    pub(crate) client: reqwest::Client,
    pub(crate) method: Method,
    pub(crate) url: reqwest::Url,
    pub(crate) headers: HeaderMap,
    pub(crate) body: RequestBody,
    pub(crate) timeout: Duration,
    pub(crate) slot: Slot,
    /// Where the upstream's statuses are counted.
    pub(crate) provider: Arc<crate::provider::Provider>,
}

/// Hop-by-hop fields (RFC 9110 §7.6.1) and the proxy's own: never forwarded either way.
/// Names, not strings: removing by `&str` parses the name again on every request.
static HOP_BY_HOP: [HeaderName; 9] = [
    http::header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    http::header::PROXY_AUTHENTICATE,
    http::header::PROXY_AUTHORIZATION,
    http::header::TE,
    http::header::TRAILER,
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
];

/// Remove the hop-by-hop fields of `h`: those of [`HOP_BY_HOP`] and those its
/// `Connection` names.
pub(crate) fn strip_hop_by_hop(h: &mut HeaderMap) {
    if h.contains_key(http::header::CONNECTION) {
        let named: Vec<String> = h
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
            .collect();
        for n in named {
            h.remove(n.as_str());
        }
    }
    for n in &HOP_BY_HOP {
        h.remove(n);
    }
}

fn put(slot: &Slot, f: impl FnOnce(&mut Outcome)) {
    f(&mut slot.lock().unwrap_or_else(PoisonError::into_inner));
}

/// Read what the classifier needs of `resp` and leave the response in `slot`.
async fn answer(
    mut resp: reqwest::Response,
    slot: &Slot,
    provider: &crate::provider::Provider,
) -> Result<Reply<(StatusCode, HeaderMap)>, BoxError> {
    let status = resp.status();
    provider.metrics.upstream(status.as_u16());
    let mut headers = std::mem::take(resp.headers_mut());
    strip_hop_by_hop(&mut headers);
    let small = resp
        .content_length()
        .is_some_and(|n| n <= CLASSIFIED_BODY as u64);
    let mut start = BytesMut::new();
    let mut whole = true;
    if !status.is_success() || small {
        whole = false;
        while start.len() < CLASSIFIED_BODY {
            match resp.chunk().await? {
                Some(c) => start.extend_from_slice(&c),
                None => {
                    whole = true;
                    break;
                }
            }
        }
    }
    let start = start.freeze();
    let body = if whole && !start.is_empty() {
        Body::from(start.clone())
    } else if start.is_empty() {
        Body::new(reqwest::Body::from(resp))
    } else {
        Body::new(Prefixed::new(start.clone(), reqwest::Body::from(resp)))
    };
    let mut out = http::Response::new(body);
    *out.status_mut() = status;
    *out.headers_mut() = headers.clone();
    put(slot, |o| {
        o.response = Some(out);
        o.failure = None;
    });
    Ok(Reply {
        response: (status, headers),
        body: start,
    })
}

impl Attempts for Upstream {
    type Response = (StatusCode, HeaderMap);

    fn head(r: &Self::Response) -> (StatusCode, &HeaderMap) {
        (r.0, &r.1)
    }

    fn can_resend(&self) -> bool {
        match &self.body {
            RequestBody::Buffered(_) => true,
            RequestBody::Stream(s) => s.is_some(),
        }
    }

    async fn send(&mut self, extra: &HeaderMap) -> Result<Reply<Self::Response>, SendFailure> {
        let body = match &mut self.body {
            RequestBody::Buffered(b) => reqwest::Body::from(b.clone()),
            RequestBody::Stream(s) => match s.take() {
                Some(s) => reqwest::Body::wrap(SyncBody::new(s)),
                None => {
                    return Err(SendFailure {
                        connect: true,
                        error: "abide proxy: the streamed body was already sent".into(),
                    })
                }
            },
        };
        let mut headers = self.headers.clone();
        for (k, v) in extra {
            headers.insert(k.clone(), v.clone());
        }
        let req = self
            .client
            .request(self.method.clone(), self.url.clone())
            .headers(headers)
            .timeout(self.timeout)
            .body(body);
        let began = self.provider.clock.monotonic();
        let (slot, provider) = (Arc::clone(&self.slot), Arc::clone(&self.provider));
        let result = match req.send().await {
            Ok(resp) => answer(resp, &slot, &provider).await.map_err(|e| (false, e)),
            Err(e) => Err((e.is_connect(), Box::new(e) as BoxError)),
        };
        let spent = provider.clock.monotonic().saturating_duration_since(began);
        put(&slot, |o| o.upstream += spent);
        result.map_err(|(connect, error)| {
            let timeout = error
                .downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout);
            let kind = if connect {
                NoAnswer::Refused
            } else if timeout {
                NoAnswer::Timeout
            } else {
                NoAnswer::Reset
            };
            provider.metrics.no_response();
            put(&slot, |o| {
                o.response = None;
                o.failure = Some(kind);
            });
            SendFailure { connect, error }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_removed() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "close, X-Trace"),
            ("x-trace", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Bearer t"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("content-type", "application/json"),
        ] {
            h.insert(HeaderName::from_static(k), v.parse().unwrap());
        }
        strip_hop_by_hop(&mut h);
        let left: Vec<_> = h.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["content-type"]);
    }
}
