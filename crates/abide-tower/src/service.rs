//! [`AbideService`]: a client `Service<http::Request<B>>` driven through the host's session.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderMap, Request, Response, StatusCode};
use tower::{Service, ServiceExt};

use abide_client::{
    drive, Attempts, BoxError, Outgoing, Policy, Reply, RequestInfo, SendFailure, Stopped,
};

use crate::body::TryCloneBody;

/// A client service whose requests are classified, paced and retried per host.
///
/// Readiness is awaited per attempt on a clone of the inner service, so `poll_ready` is
/// always ready. Response bodies are not read (the classifier sees status and headers).
///
/// # Clone
/// Clones share the policy's per-host state (pacer, retry budget, pauses).
#[derive(Debug, Clone)]
pub struct AbideService<S> {
    inner: S,
    policy: Policy,
}

impl<S> AbideService<S> {
    /// Wrap `inner`.
    pub fn new(inner: S, policy: Policy) -> Self {
        Self { inner, policy }
    }

    /// The policy (for its snapshots).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

/// The response future of [`AbideService`].
pub type ResponseFuture<RB> =
    Pin<Box<dyn Future<Output = Result<Response<RB>, Stopped>> + Send + 'static>>;

impl<S, B, RB> Service<Request<B>> for AbideService<S>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
    B: TryCloneBody + Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = Stopped;
    type Future = ResponseFuture<RB>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Stopped>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let policy = self.policy.clone();
        let uri = req.uri();
        let host = uri
            .host()
            .or_else(|| {
                req.headers()
                    .get(http::header::HOST)
                    .and_then(|h| h.to_str().ok())
            })
            .unwrap_or("unknown");
        let info = RequestInfo {
            method: req.method(),
            scheme: uri.scheme_str().unwrap_or("http"),
            host,
            port: uri.port_u16(),
            headers: req.headers(),
        };
        let out = Outgoing::new(&policy, &info, uri.path());
        let attempts = TowerAttempts {
            svc: self.inner.clone(),
            template: Some(req),
        };
        Box::pin(async move { drive(&policy, out, attempts).await })
    }
}

struct TowerAttempts<S, B> {
    svc: S,
    /// The request as the caller made it; taken when its body cannot be copied.
    template: Option<Request<B>>,
}

fn copy<B: TryCloneBody>(req: &Request<B>) -> Option<Request<B>> {
    let body = req.body().try_clone_body()?;
    let mut r = Request::new(body);
    *r.method_mut() = req.method().clone();
    *r.uri_mut() = req.uri().clone();
    *r.version_mut() = req.version();
    *r.headers_mut() = req.headers().clone();
    *r.extensions_mut() = req.extensions().clone();
    Some(r)
}

/// A refused connection anywhere in the chain means nothing was sent.
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        cur = e.source();
    }
    false
}

impl<S, B, RB> Attempts for TowerAttempts<S, B>
where
    S: Service<Request<B>, Response = Response<RB>> + Send,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
    B: TryCloneBody + Send,
    RB: Send,
{
    type Response = Response<RB>;

    fn head(r: &Response<RB>) -> (StatusCode, &HeaderMap) {
        (r.status(), r.headers())
    }

    fn can_resend(&self) -> bool {
        self.template.is_some()
    }

    fn send(
        &mut self,
        extra: &HeaderMap,
    ) -> impl Future<Output = Result<Reply<Response<RB>>, SendFailure>> + Send {
        let req = match self.template.as_ref().and_then(copy) {
            Some(r) => Some(r),
            None => self.template.take(),
        };
        let extra = extra.clone();
        let svc = &mut self.svc;
        async move {
            let Some(mut req) = req else {
                return Err(SendFailure {
                    connect: true,
                    error: "abide: the request was already sent and cannot be copied".into(),
                });
            };
            for (name, value) in &extra {
                req.headers_mut().insert(name.clone(), value.clone());
            }
            let result: Result<Response<RB>, BoxError> = match svc.ready().await {
                Ok(svc) => svc.call(req).await.map_err(Into::into),
                Err(e) => Err(e.into()),
            };
            match result {
                Ok(response) => Ok(Reply {
                    response,
                    body: bytes::Bytes::new(),
                }),
                Err(error) => Err(SendFailure {
                    connect: refused(error.as_ref()),
                    error,
                }),
            }
        }
    }
}
