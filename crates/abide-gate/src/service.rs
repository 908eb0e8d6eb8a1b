//! [`GateService`]: the service produced by [`crate::GateLayer`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Frame, SizeHint};

use abide_core::sleep::Sleeper;
use abide_core::Clock;

use crate::identity::{Identify, Identity};
use crate::metrics::GateMetrics;
use crate::trace::{request_trace, safe_trace};
use crate::{GateSet, LeaseGuard, Rejection};

#[derive(Clone)]
/// What every clone of a layer and its services shares.
pub(crate) struct Shared {
    pub(crate) gates: Arc<GateSet>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) sleeper: Arc<dyn Sleeper>,
    pub(crate) identify: Arc<dyn Identify>,
    pub(crate) quota_path: Option<String>,
    pub(crate) exempt: Vec<String>,
    pub(crate) metrics: Arc<GateMetrics>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("gates", &self.gates)
            .field("quota_path", &self.quota_path)
            .field("exempt", &self.exempt)
            .finish_non_exhaustive()
    }
}

/// A boxed, sendable response future.
pub type ResponseFuture<E> = Pin<Box<dyn Future<Output = Result<Response<Body>, E>> + Send>>;

/// Gates every request before the inner service sees it. See [`crate::GateLayer`].
///
/// # Clone
/// Clones share gate state, clock and counters; only the inner service is cloned.
#[derive(Debug, Clone)]
pub struct GateService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> GateService<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

impl<S, ReqB, ResB> tower::Service<Request<ReqB>> for GateService<S>
where
    S: tower::Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqB: Send + 'static,
    ResB: http_body::Body<Data = Bytes> + Send + 'static,
    ResB::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is the inner service's business; the gate decides in `call`.
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let sh = Arc::clone(&self.shared);
        // The ready clone is the one we were polled for; leave a fresh clone behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (parts, body) = req.into_parts();
        let path = parts.uri.path();
        if sh.exempt.iter().any(|p| p == path) {
            return passthrough(inner.call(Request::from_parts(parts, body)));
        }
        let identity = sh.identify.identify(&parts);
        if sh.quota_path.as_deref() == Some(path) && parts.method == Method::GET {
            let now = sh.clock.monotonic();
            return Box::pin(std::future::ready(Ok(quota_response(
                &sh.gates,
                identity.as_ref(),
                now,
            ))));
        }
        let Some(id) = identity else {
            return passthrough(inner.call(Request::from_parts(parts, body)));
        };
        let trace = request_trace(&parts.headers);
        let now = sh.clock.monotonic();
        match sh
            .gates
            .check_delayed(&id.key, id.account.as_deref(), trace.as_deref(), now)
        {
            Err(rejection) => {
                sh.metrics.rejected(rejection.category());
                tracing::info!(
                    gate = rejection.category(),
                    caller = %safe_trace(&id.key),
                    trace = %trace.as_deref().map(safe_trace).unwrap_or_default(),
                    retry_after_secs = rejection.retry_after_secs(),
                    "request refused by gate"
                );
                Box::pin(std::future::ready(Ok(rejection_response(&rejection))))
            }
            Ok(admission) => {
                sh.metrics.admitted();
                let extra = admission.headers();
                let delay = admission.delay();
                // Held by the future until the response exists, then by the body until it
                // ends or is dropped: a client that disconnects drops the future, and with
                // it the guard, so no slot (held, or reserved ahead while waiting) can leak.
                let guard = admission.into_guard(Arc::clone(&sh.gates));
                Box::pin(async move {
                    let mut guard = guard;
                    if !delay.is_zero() {
                        let waiting = Abandoned(Some(Arc::clone(&sh.metrics)));
                        sh.sleeper.sleep_until(now + delay).await;
                        waiting.arrived();
                        guard.arrived();
                        sh.metrics.delayed(delay);
                    }
                    let fut = inner.call(Request::from_parts(parts, body));
                    let res = fut.await?;
                    sh.metrics.response(res.status());
                    let (mut parts, body) = res.into_parts();
                    for (k, v) in &extra {
                        parts.headers.entry(k).or_insert_with(|| v.clone());
                    }
                    let body = GuardedBody {
                        inner: Body::new(body),
                        guard: Some(guard),
                    };
                    Ok(Response::from_parts(parts, Body::new(body)))
                })
            }
        }
    }
}

/// Counts a held request as abandoned if it is dropped before its slot.
struct Abandoned(Option<Arc<GateMetrics>>);

impl Abandoned {
    fn arrived(mut self) {
        self.0 = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            m.abandoned();
        }
    }
}

fn passthrough<F, B, E>(fut: F) -> ResponseFuture<E>
where
    F: Future<Output = Result<Response<B>, E>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    Box::pin(async move { Ok(fut.await?.map(Body::new)) })
}

/// The 429 a gate sends: `Retry-After`, `RateLimit-Policy`, `RateLimit` and a JSON body
/// naming only the reason category.
pub fn rejection_response(rejection: &Rejection) -> Response<Body> {
    let mut res = Response::new(Body::from(rejection.body()));
    *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    res.headers_mut().extend(rejection.headers());
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// The quota endpoint's answer for `identity` at `now` (monotonic): `200 {"gates": [...]}`
/// with `RateLimit-Policy` and `RateLimit`, charging nothing ([`GateSet::quota`]); `401`
/// without an identity. For servers that gate by hand instead of through [`crate::GateLayer`].
pub fn quota_response(
    gates: &GateSet,
    identity: Option<&Identity>,
    now: std::time::Instant,
) -> Response<Body> {
    let json = HeaderValue::from_static("application/json");
    let Some(id) = identity else {
        let mut res = Response::new(Body::from(r#"{"error":"unauthenticated"}"#));
        *res.status_mut() = StatusCode::UNAUTHORIZED;
        res.headers_mut().insert(http::header::CONTENT_TYPE, json);
        return res;
    };
    let statuses = gates.quota(&id.key, id.account.as_deref(), now);
    let body = serde_json::json!({ "gates": statuses }).to_string();
    let mut res = Response::new(Body::from(body));
    if let Some((policy, limit)) = crate::headers::rate_limit_values(&statuses) {
        res.headers_mut()
            .insert(crate::headers::RATELIMIT_POLICY, policy);
        res.headers_mut().insert(crate::headers::RATELIMIT, limit);
    }
    res.headers_mut().insert(http::header::CONTENT_TYPE, json);
    res
}

/// A response body that releases the request's concurrency leases when it ends, fails or is
/// dropped.
#[derive(Debug)]
struct GuardedBody {
    inner: Body,
    guard: Option<LeaseGuard>,
}

impl http_body::Body for GuardedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.guard.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
