//! The listener: every request goes to one handler that routes it (see [`crate::route`]).

use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use http::{header, HeaderValue, Request, Response, StatusCode};
use sha2::{Digest, Sha256};

use crate::route::{route, Target};
use crate::{answer, forward, Proxy, ProxyError};

/// Serve `proxy` on `listener` until `shutdown` completes, then drain: no new connections,
/// and every request already inside (held or on the wire) is answered before this returns.
///
/// # Errors
/// [`ProxyError::Io`] when the listener fails.
pub async fn serve(
    proxy: Proxy,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ProxyError> {
    let watcher = tokio::spawn(crate::watch::pauses(proxy.providers.clone()));
    let hosts = listener
        .local_addr()
        .ok()
        .and_then(crate::origin::loopback_hosts);
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(Arc::new(Listening { proxy, hosts }));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    watcher.abort();
    served?;
    Ok(())
}

/// Constant-time equality of two digests (comparing digests also hides the length).
fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `req` carries the proxy's token (or none is required).
fn authorized(proxy: &Proxy, req: &Request<Body>) -> bool {
    let Some(want) = &proxy.opts.token_digest else {
        return true;
    };
    req.headers()
        .get(header::PROXY_AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| ct_eq(&Sha256::digest(t.trim().as_bytes()).into(), want))
}

/// The proxy and what its listener answers.
struct Listening {
    proxy: Proxy,
    /// [`crate::origin::loopback_hosts`] of the listener's address.
    hosts: Option<Vec<String>>,
}

async fn handle(State(l): State<Arc<Listening>>, req: Request<Body>) -> Response<Body> {
    if let Some(refused) = crate::origin::refuse(&req, l.hosts.as_deref()) {
        return refused;
    }
    let proxy = &l.proxy;
    match route(req.method(), req.uri(), proxy) {
        Target::Own(name) => own(proxy, &name),
        Target::Connect => answer::connect(proxy.providers.first().map(|p| p.name.as_str())),
        Target::Unknown(asked) => answer::unknown(&asked, &proxy.provider_names()),
        Target::Refused(e) => answer::refused(&e.to_string()),
        Target::Provider { index, url, path } => {
            if !authorized(proxy, &req) {
                return answer::unauthorized();
            }
            let p = Arc::clone(&proxy.providers[index]);
            let r = forward::forward(proxy, &p, url, path, req).await;
            p.metrics.answered(r.status().as_u16());
            r
        }
    }
}

fn own(proxy: &Proxy, name: &str) -> Response<Body> {
    let (status, body, kind) = match name {
        "healthz" => (
            StatusCode::OK,
            "ok\n".to_owned(),
            "text/plain; charset=utf-8",
        ),
        "metrics" => (
            StatusCode::OK,
            proxy.metrics_text(),
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        "stats" => (
            StatusCode::OK,
            crate::metrics::stats(&proxy.providers).to_string(),
            "application/json",
        ),
        _ => (
            StatusCode::NOT_FOUND,
            format!(
                "abide proxy: no route {}; there are /_abide/healthz, /_abide/metrics and /_abide/stats\n",
                abide_core::echo::clip(&format!("{}{name}", crate::route::OWN_PREFIX))
            ),
            "text/plain; charset=utf-8",
        ),
    };
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_compare_in_constant_time_and_correctly() {
        let d = |s: &str| -> [u8; 32] { Sha256::digest(s.as_bytes()).into() };
        assert!(ct_eq(&d("s3cret"), &d("s3cret")));
        assert!(!ct_eq(&d("s3cret"), &d("s3creT")));
    }
}
