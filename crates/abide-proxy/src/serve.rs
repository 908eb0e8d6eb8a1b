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
/// HTTP/1.1, each connection with a head read timeout
/// ([`ProxyOptions::header_read_timeout`](crate::ProxyOptions)): a head that never ends
/// is closed. At most [`ProxyOptions::max_connections`](crate::ProxyOptions) are open, by
/// the rule of [`crate::cap`] (the one idle longest makes room; logged).
///
/// # Errors
/// None today: accept errors (out of file descriptors included) are logged and retried
/// after a pause.
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
    let header_timeout = proxy.opts.header_read_timeout;
    let max_connections = proxy.opts.max_connections.max(1);
    let open = Arc::new(crate::cap::Conns::default());
    let cap_log = crate::cap::CapLog::new("--max-connections");
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(Arc::new(Listening { proxy, hosts }));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut conns = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, a reset before accept: wait rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while conns.try_join_next().is_some() {}
        let Some((id, slot)) = crate::cap::admit(&open, &cap_log, max_connections) else {
            drop(stream);
            continue;
        };
        let open = Arc::clone(&open);
        let (app, stop) = (app.clone(), stop_rx.clone());
        conns.spawn(async move {
            connection(stream, app, header_timeout, stop, &slot).await;
            open.remove(id);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    watcher.abort();
    Ok(())
}

/// One connection until it ends, or until `stop` or its slot asks: then the request in
/// progress (if any) is answered and the connection closed.
async fn connection(
    stream: tokio::net::TcpStream,
    app: axum::Router,
    header_timeout: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    slot: &Arc<crate::cap::Slot>,
) {
    use tower::ServiceExt as _;
    let service = {
        let slot = Arc::clone(slot);
        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let (app, slot) = (app.clone(), Arc::clone(&slot));
            slot.request_started();
            async move {
                let r = app.oneshot(req.map(Body::new)).await;
                slot.request_finished();
                r
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.wait_for(|s| *s) => {}
        () = slot.close_asked() => {
            if !slot.is_busy() {
                // Idle, or a head never finished: nothing to answer, close it now.
                return;
            }
        }
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// Constant-time equality of two digests (comparing digests also hides the length).
fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `req` carries the proxy's token in `field` (or none is required).
fn authorized(proxy: &Proxy, req: &Request<Body>, field: header::HeaderName) -> bool {
    let Some(want) = &proxy.opts.token_digest else {
        return true;
    };
    req.headers()
        .get(field)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .is_some_and(|t| ct_eq(&Sha256::digest(t.trim().as_bytes()).into(), want))
}

/// The token of a `Bearer` credential; the scheme is case-insensitive (RFC 9110 §11.1).
fn bearer_token(v: &str) -> Option<&str> {
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// Whether `req` may read the proxy's own `name` route: `healthz` always (load balancers);
/// `metrics` and `stats`, which name providers, paces and pauses, only with the token when
/// one is set, in `Proxy-Authorization` or in `Authorization` (what a Prometheus scrape
/// config's `authorization` sends; no provider request is made, so nothing is passed on).
fn may_read_own(proxy: &Proxy, req: &Request<Body>, name: &str) -> bool {
    name == "healthz"
        || authorized(proxy, req, header::PROXY_AUTHORIZATION)
        || authorized(proxy, req, header::AUTHORIZATION)
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
        Target::Own(name) if !may_read_own(proxy, &req, &name) => answer::unauthorized(),
        Target::Own(name) => own(proxy, &name),
        Target::Connect => answer::connect(proxy.providers.first().map(|p| p.name.as_str())),
        Target::Method(m) => answer::method(&m),
        Target::Unknown(asked) => answer::unknown(&asked, &proxy.provider_names()),
        Target::Refused(e) => answer::refused(&e.to_string()),
        Target::Provider { index, url, path } => {
            if !authorized(proxy, &req, header::PROXY_AUTHORIZATION) {
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
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A head that never ends is closed at the head read timeout (slowloris), while a
    /// whole request on another connection is answered. Waits on the close itself (EOF);
    /// the outer 30 s bound only keeps a broken build from hanging the suite.
    #[tokio::test]
    async fn a_head_that_never_ends_is_closed_and_a_whole_one_answered() {
        let cfg = abide_outbox::Config::from_toml_str(
            "[[provider]]\nname = \"sms\"\nbase_url = \"http://127.0.0.1:9\"\n",
        )
        .unwrap();
        let opts = crate::ProxyOptions {
            header_read_timeout: std::time::Duration::from_millis(200),
            ..crate::ProxyOptions::default()
        };
        let proxy = Proxy::new(&cfg, &abide_outbox::StaticCredentials::new(), opts).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(proxy, listener, async {
            let _ = stopped.await;
        }));

        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /_abide/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let mut whole = tokio::net::TcpStream::connect(addr).await.unwrap();
        whole
            .write_all(
                b"GET /_abide/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let mut answer = String::new();
        whole.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

        let mut rest = Vec::new();
        let closed = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            slow.read_to_end(&mut rest),
        )
        .await;
        assert!(
            closed.is_ok(),
            "the half-sent head was still open after 30 s"
        );
        let text = String::from_utf8_lossy(&rest);
        assert!(!text.contains("200 OK"), "{text}");

        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }

    /// At `max_connections` a new connection closes the one idle longest (here: two that
    /// never sent a byte, with a head timeout of an hour so only the cap can close them)
    /// and is answered. Waits on the close itself; the 30 s bound only keeps a broken
    /// build from hanging the suite.
    #[tokio::test]
    async fn at_the_connection_cap_an_idle_connection_makes_room_for_a_new_one() {
        let cfg = abide_outbox::Config::from_toml_str(
            "[[provider]]\nname = \"sms\"\nbase_url = \"http://127.0.0.1:9\"\n",
        )
        .unwrap();
        let opts = crate::ProxyOptions {
            header_read_timeout: std::time::Duration::from_secs(3600),
            max_connections: 2,
            ..crate::ProxyOptions::default()
        };
        let proxy = Proxy::new(&cfg, &abide_outbox::StaticCredentials::new(), opts).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(proxy, listener, async {
            let _ = stopped.await;
        }));
        let mut idle_a = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut idle_b = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut whole = tokio::net::TcpStream::connect(addr).await.unwrap();
        whole
            .write_all(
                b"GET /_abide/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let mut answer = String::new();
        whole.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let closed = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            tokio::select! {
                r = idle_a.read_to_end(&mut a) => r.is_ok(),
                r = idle_b.read_to_end(&mut b) => r.is_ok(),
            }
        })
        .await;
        assert_eq!(
            closed.ok(),
            Some(true),
            "no idle connection was closed at the cap"
        );
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }

    #[test]
    fn digests_compare_in_constant_time_and_correctly() {
        let d = |s: &str| -> [u8; 32] { Sha256::digest(s.as_bytes()).into() };
        assert!(ct_eq(&d("s3cret"), &d("s3cret")));
        assert!(!ct_eq(&d("s3cret"), &d("s3creT")));
    }
}
