//! `abide serve`'s listener: its own accept loop, so that no client can hold the process's
//! connections (and file descriptors) for ever: a connection with no request in progress
//! (idle, or still sending its head) is closed after [`IDLE_TIMEOUT`]; a request (its body
//! included) must be answered within [`REQUEST_TIMEOUT`] (else `408`); at most
//! `max_connections` are open, and at the cap the one idle longest is closed for a new
//! one (a busy one never), with a log line. On a loopback listener the `Host` header must
//! name the listener or `localhost` (else `421`): a page on another origin that resolves
//! its name to 127.0.0.1 (DNS rebinding) cannot read the API or the dashboard.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Notify;
// The clock of the timers here (head read timeout, sweeps), paused with them in tests.
use tokio::time::Instant;
use tower::ServiceExt as _;

/// How long a connection may go with no request in progress: idle between requests, or
/// sending a request head that never ends.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, its body included: a `Content-Length: 10 GB` head whose
/// body never comes is answered `408` and closed.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default most open connections: well below the common 1,024 open-file limit, which the
/// database, the providers' connections and the logs share.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// How long shutting down waits for requests in progress.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// One open connection, as the accept loop sees it.
#[derive(Debug)]
struct Slot {
    /// Requests in progress.
    busy: AtomicUsize,
    /// Since when no request is in progress (its accept, or its last answer).
    idle_since: Mutex<Instant>,
    /// Asks the connection to close (after the request in progress, if any).
    close: Notify,
    /// Asked already: not a candidate again.
    closing: AtomicBool,
}

impl Slot {
    fn new() -> Self {
        Self {
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            close: Notify::new(),
            closing: AtomicBool::new(false),
        }
    }

    /// Ask the connection to close.
    fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.close.notify_one();
    }

    /// How long no request has been in progress; `None` while one is, or once asked to
    /// close.
    fn idle_for(&self, now: Instant) -> Option<Duration> {
        if self.busy.load(Ordering::SeqCst) > 0 || self.closing.load(Ordering::SeqCst) {
            return None;
        }
        let since = *self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(now.saturating_duration_since(since))
    }
}

#[derive(Debug, Default)]
struct Conns {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Slot>>>,
}

impl Conns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Room for one more under `max`: closes the connection idle longest when full.
    /// `false` when every open connection has a request in progress.
    fn make_room(&self, max: usize) -> bool {
        let open = self.lock();
        if open.len() < max {
            return true;
        }
        let now = Instant::now();
        let idlest = open
            .values()
            .filter_map(|s| s.idle_for(now).map(|d| (d, s)))
            .max_by_key(|(d, _)| *d);
        match idlest {
            Some((_, slot)) => {
                slot.close();
                true
            }
            None => false,
        }
    }

    /// Close every connection idle for `timeout` or more.
    fn close_idle(&self, timeout: Duration) {
        let now = Instant::now();
        for slot in self.lock().values() {
            if slot.idle_for(now).is_some_and(|d| d >= timeout) {
                slot.close();
            }
        }
    }
}

/// Logs the connection cap at most once per interval, with how many it affected.
#[derive(Debug, Default)]
struct CapLog {
    last: Mutex<Option<Instant>>,
    evicted: AtomicU64,
    refused: AtomicU64,
}

impl CapLog {
    fn note(&self, refused: bool, max: usize) {
        let counter = if refused {
            &self.refused
        } else {
            &self.evicted
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(10)) {
            return;
        }
        *last = Some(now);
        tracing::warn!(
            max_connections = max,
            closed_idle = self.evicted.swap(0, Ordering::Relaxed),
            refused_busy = self.refused.swap(0, Ordering::Relaxed),
            "connection cap reached: new connections close the one idle longest, or are \
             refused while every connection has a request in progress (--max-connections)"
        );
    }
}

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
    let cap_log = Arc::new(CapLog::default());
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
        if !conns.make_room(max_connections) {
            cap_log.note(true, max_connections);
            drop(stream);
            continue;
        }
        if conns.lock().len() >= max_connections {
            cap_log.note(false, max_connections);
        }
        while tasks.try_join_next().is_some() {}
        let id = conns.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot::new());
        conns.lock().insert(id, Arc::clone(&slot));
        let conns = Arc::clone(&conns);
        let app = app.clone();
        tasks.spawn(async move {
            connection(stream, app, &slot).await;
            conns.lock().remove(&id);
        });
    }
    sweeper.abort();
    drop(listener);
    for slot in conns.lock().values() {
        slot.close();
    }
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
            slot.busy.fetch_add(1, Ordering::SeqCst);
            async move {
                let answer = tokio::time::timeout(
                    REQUEST_TIMEOUT,
                    app.oneshot(req.map(axum::body::Body::new)),
                )
                .await;
                *slot
                    .idle_since
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Instant::now();
                slot.busy.fetch_sub(1, Ordering::SeqCst);
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
        () = slot.close.notified() => {}
    }
    if slot.busy.load(Ordering::SeqCst) == 0 {
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

/// Middleware: on a loopback listener, a `Host` other than the listener's own or
/// `localhost` is answered `421 Misdirected Request` (RFC 9110 §15.5.20).
pub(crate) async fn host_check(
    State(allowed): State<Option<Arc<Vec<String>>>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(allowed) = allowed else {
        return next.run(req).await;
    };
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
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
                "this loopback listener answers only Host {}",
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

    #[test]
    fn at_the_cap_the_idlest_connection_makes_room_never_a_busy_one() {
        let conns = Conns::default();
        let slot = |busy: usize, idle: Duration| {
            let s = Slot::new();
            s.busy.store(busy, Ordering::SeqCst);
            *s.idle_since.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now() - idle;
            Arc::new(s)
        };
        let old = slot(0, Duration::from_secs(5));
        let busy = slot(1, Duration::from_secs(50));
        let young = slot(0, Duration::from_secs(1));
        for (i, s) in [&old, &busy, &young].into_iter().enumerate() {
            conns.lock().insert(i as u64, Arc::clone(s));
        }
        assert!(conns.make_room(4));
        assert!(conns.make_room(3));
        // The idlest was asked to close; a permit is stored for its next wait.
        let asked = |s: &Slot| futures_poll(s.close.notified());
        assert!(asked(&old) && !asked(&busy) && !asked(&young));
        // The next one asks another: the one already closing is no candidate.
        assert!(conns.make_room(3));
        assert!(asked(&young) && !asked(&busy));
        assert!(!conns.make_room(3), "every other connection busy: refuse");
    }

    /// Whether `f` is ready at its first poll.
    fn futures_poll<F: Future>(f: F) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        f.as_mut().poll(&mut cx).is_ready()
    }
}
