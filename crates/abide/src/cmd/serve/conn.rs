//! `abide serve`'s listener: its own accept loop, so that no client can hold the process's
//! connections (and file descriptors) for ever: a connection with no request in progress
//! (idle, or still sending its head) is closed after [`IDLE_TIMEOUT`]; a request (its body
//! included) must be answered within [`REQUEST_TIMEOUT`] (else `408`); at most
//! `max_connections` are open, and at the cap the one idle longest is closed for a new
//! one (a busy one never), with a log line: the rule of [`abide_proxy::cap`], which the
//! proxy's listener follows too. On a loopback listener the `Host` header must
//! name the listener or `localhost` (else `421`): a page on another origin that resolves
//! its name to 127.0.0.1 (DNS rebinding) cannot read the API or the dashboard.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use abide_proxy::cap::{self, CapLog, Conns, Slot};

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tower::ServiceExt as _;

/// How long a connection may go with no request in progress: idle between requests, or
/// sending a request head that never ends.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, its body included: a `Content-Length: 10 GB` head whose
/// body never comes is answered `408` and closed.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default most open connections: well below the common 1,024 open-file limit, which the
/// database, the providers' connections and the logs share (the proxy's default too).
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = abide_proxy::cap::DEFAULT_MAX_CONNECTIONS;
/// How long shutting down waits for requests in progress.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serve `app` on `listener` until `shutdown` resolves, then let requests in progress
/// finish (up to a grace period).
///
/// # Errors
/// None today: accept errors (`EMFILE` included) are logged and retried after a pause.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let conns = Arc::new(Conns::default());
    let cap_log = CapLog::new("--max-connections");
    let mut tasks = tokio::task::JoinSet::new();
    let sweeper = {
        let conns = Arc::clone(&conns);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                conns.close_idle(IDLE_TIMEOUT);
            }
        })
    };
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept: wait a
                    // little rather than spin; idle connections are being closed.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while tasks.try_join_next().is_some() {}
        let Some((id, slot)) = cap::admit(&conns, &cap_log, max_connections) else {
            drop(stream);
            continue;
        };
        let conns = Arc::clone(&conns);
        let app = app.clone();
        tasks.spawn(async move {
            connection(stream, app, &slot).await;
            conns.remove(id);
        });
    }
    sweeper.abort();
    drop(listener);
    conns.close_all();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

/// One connection: HTTP/1.1 with a head read timeout, each request bounded by
/// [`REQUEST_TIMEOUT`], closed when its slot asks.
async fn connection(stream: tokio::net::TcpStream, app: Router, slot: &Arc<Slot>) {
    let service = {
        let slot = Arc::clone(slot);
        hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let app = app.clone();
            let slot = Arc::clone(&slot);
            slot.request_started();
            async move {
                let answer = tokio::time::timeout(
                    REQUEST_TIMEOUT,
                    app.oneshot(req.map(axum::body::Body::new)),
                )
                .await;
                slot.request_finished();
                Ok::<_, std::convert::Infallible>(match answer {
                    Ok(Ok(r)) => r,
                    Ok(Err(never)) => match never {},
                    Err(_) => timed_out(),
                })
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = slot.close_asked() => {}
    }
    if !slot.is_busy() {
        // Idle, or a head never finished: nothing to finish, close it now.
        return;
    }
    conn.as_mut().graceful_shutdown();
    // The request in progress may finish; a connection that does not is dropped (closed).
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, conn).await;
}

fn timed_out() -> Response {
    let mut r = (
        StatusCode::REQUEST_TIMEOUT,
        axum::Json(serde_json::json!({
            "error": "request_timeout",
            "message": format!(
                "the request (its body included) took longer than {} s",
                REQUEST_TIMEOUT.as_secs()
            ),
        })),
    )
        .into_response();
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

/// The `Host` values a loopback listener on `addr` answers: its address and `localhost`,
/// with its port or none; `None` (any) for a listener on another address. The same rule as
/// the proxy's listener ([`abide_proxy::loopback_hosts`]).
pub(crate) fn allowed_hosts(addr: SocketAddr) -> Option<Arc<Vec<String>>> {
    abide_proxy::loopback_hosts(addr).map(Arc::new)
}

/// Middleware: two `Host` lines, or an HTTP/1.1 request with none, is `400` on every
/// listener (RFC 9112 §3.2). On a loopback listener, a host other than the listener's own
/// or `localhost` is answered `421 Misdirected Request` (RFC 9110 §15.5.20); the host is
/// the request target's authority when it has one (absolute-form, RFC 9112 §3.2.2), else
/// `Host`.
pub(crate) async fn host_check(
    State(allowed): State<Option<Arc<Vec<String>>>>,
    req: Request,
    next: Next,
) -> Response {
    let scheme = req.uri().scheme_str();
    let problem =
        abide_proxy::host_field_problem(req.uri(), req.headers(), req.version()).or_else(|| {
            scheme
                .is_some_and(|s| {
                    !s.eq_ignore_ascii_case("http") && !s.eq_ignore_ascii_case("https")
                })
                .then_some("a request target whose scheme is not http or https")
        });
    if let Some(why) = problem {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({ "error": "bad_request", "message": why })),
        )
            .into_response();
    }
    let Some(allowed) = allowed else {
        return next.run(req).await;
    };
    let host = match req.uri().authority() {
        Some(a) => Some(a.as_str().to_ascii_lowercase()),
        None => req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase),
    };
    if host
        .as_deref()
        .is_some_and(|h| allowed.iter().any(|a| a == h))
    {
        return next.run(req).await;
    }
    (
        StatusCode::MISDIRECTED_REQUEST,
        axum::Json(serde_json::json!({
            "error": "misdirected_request",
            "message": format!(
                "this loopback listener answers only the hosts {} (in Host, or in an \
                 absolute-form request target, which wins)",
                allowed.join(", ")
            ),
        })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_listeners_name_their_hosts() {
        let a: SocketAddr = "127.0.0.1:8787".parse().expect("addr");
        let hosts = allowed_hosts(a).expect("loopback");
        for h in ["127.0.0.1:8787", "localhost:8787", "localhost", "127.0.0.1"] {
            assert!(hosts.iter().any(|x| x == h), "{h}: {hosts:?}");
        }
        assert!(!hosts.iter().any(|x| x == "evil.example:8787"));
        let v6: SocketAddr = "[::1]:9".parse().expect("addr");
        assert!(allowed_hosts(v6)
            .expect("loopback")
            .iter()
            .any(|x| x == "[::1]:9"));
        assert!(allowed_hosts("0.0.0.0:8787".parse().expect("addr")).is_none());
    }
}
