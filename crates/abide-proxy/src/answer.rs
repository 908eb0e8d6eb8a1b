//! The proxy's own answers: what it says when it does not pass an upstream answer on.
//!
//! Each body is one line of plain text that says what happened and what to do. A `429`
//! carries `Retry-After` as delay-seconds (rounded up, at least 1; RFC 9110 §10.2.3) and the
//! provider's `RateLimit-Policy` / `RateLimit` fields
//! (draft-ietf-httpapi-ratelimit-headers), written by abide-core's writers.

use std::time::Duration;

use abide_core::ratelimit::RateLimitFields;
use abide_core::retry_after::RetryAfter;
use axum::body::Body;
use http::{header, HeaderValue, Response, StatusCode};

/// Header naming why the proxy answered itself (`queue_full`, `wait_too_long`, ...).
pub const ABIDE_STOPPED: &str = "abide-stopped";

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(Body::from(body + "\n"));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn stopped(mut r: Response<Body>, code: &'static str) -> Response<Body> {
    r.headers_mut()
        .insert(ABIDE_STOPPED, HeaderValue::from_static(code));
    r
}

/// `429`: the request would have to wait `wait`, longer than its budget, or the provider's
/// waiting queue is full. `pace` is the provider's pace in requests per second, when known.
pub(crate) fn too_many(
    provider: &str,
    wait: Duration,
    pace: Option<f64>,
    code: &'static str,
    why: &str,
) -> Response<Body> {
    let ra = RetryAfter::after(wait);
    let mut r = stopped(
        text(
            StatusCode::TOO_MANY_REQUESTS,
            format!("abide proxy: provider {provider:?}: {why}; retry after {ra} s (Retry-After)"),
        ),
        code,
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, ra.to_header_value());
    let mut f = RateLimitFields::new();
    let quota = pace.map_or(1, |p| (p.floor() as u64).max(1));
    f.push(provider, quota, Some(Duration::from_secs(1)), 0, wait);
    f.insert_into(r.headers_mut());
    r
}

/// `502` or `504`: no usable answer, and the request is not replayed (it may have been
/// acted on) or could not be sent at all.
pub(crate) fn gateway(status: StatusCode, provider: &str, why: &str) -> Response<Body> {
    let code = if status == StatusCode::GATEWAY_TIMEOUT {
        "upstream_timeout"
    } else {
        "upstream_failed"
    };
    stopped(
        text(status, format!("abide proxy: provider {provider:?}: {why}")),
        code,
    )
}

/// `408` and `Connection: close`: the request body came slower than the minimum rate;
/// nothing was sent upstream.
pub(crate) fn slow_body(provider: &str, why: &str) -> Response<Body> {
    let mut r = stopped(
        text(
            StatusCode::REQUEST_TIMEOUT,
            format!("abide proxy: provider {provider:?}: {why} (min_body_rate); nothing was sent"),
        ),
        "slow_body",
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// `404`: no provider by that name (or at that origin).
pub(crate) fn unknown(asked: &str, configured: &[&str]) -> Response<Body> {
    let asked = abide_core::echo::clip(asked);
    text(
        StatusCode::NOT_FOUND,
        format!(
            "abide proxy: no provider {asked}; configured: {}. Send to http://PROXY/{{provider}}/{{path}}",
            configured.join(", ")
        ),
    )
}

/// `501` for `CONNECT`.
pub(crate) fn connect(example: Option<&str>) -> Response<Body> {
    let route = example.map_or_else(
        || "http://PROXY/{provider}/{path}".to_owned(),
        |p| format!("http://PROXY/{p}/{{path}}"),
    );
    text(
        StatusCode::NOT_IMPLEMENTED,
        format!(
            "abide proxy: CONNECT is not supported: inside a TLS tunnel the proxy cannot see \
             statuses or Retry-After, so it could neither pace nor retry. Send plain HTTP to \
             the reverse route {route}; the proxy speaks TLS to the provider."
        ),
    )
}

/// `405` for a method the proxy does not forward ([`crate::route::FORWARDED_METHODS`]),
/// with `Allow` listing those it does (RFC 9110 §15.5.6).
pub(crate) fn method(m: &http::Method) -> Response<Body> {
    let allow = crate::route::FORWARDED_METHODS
        .iter()
        .map(http::Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let why = if *m == http::Method::TRACE {
        " (TRACE echoes the request, and with it the credential the proxy adds)"
    } else {
        ""
    };
    let mut res = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("abide proxy: method {m} is not forwarded{why}; forwarded: {allow}"),
    );
    if let Ok(v) = http::HeaderValue::from_str(&allow) {
        res.headers_mut().insert(http::header::ALLOW, v);
    }
    stopped(res, "method_not_forwarded")
}

/// `400`: a path refused by a confinement rule (the error names the rule).
pub(crate) fn refused(why: &str) -> Response<Body> {
    stopped(
        text(StatusCode::BAD_REQUEST, format!("abide proxy: {why}")),
        "path_refused",
    )
}

/// `400`: a header the proxy reads is malformed.
pub(crate) fn bad_header(name: &str, why: &str) -> Response<Body> {
    text(
        StatusCode::BAD_REQUEST,
        format!("abide proxy: header {name}: {why}"),
    )
}

/// `400`: the request itself is malformed (`why` says how).
pub(crate) fn bad_request(why: &str) -> Response<Body> {
    stopped(
        text(StatusCode::BAD_REQUEST, format!("abide proxy: {why}")),
        "bad_request",
    )
}

/// `403`: a browser's request (it names its page): the proxy adds credentials, and serves
/// programs, not pages (see `origin.rs`).
pub(crate) fn from_a_browser() -> Response<Body> {
    stopped(
        text(
            StatusCode::FORBIDDEN,
            "abide proxy: requests from web pages (Origin, Sec-Fetch-Site) are refused: the \
             proxy adds the provider's credential, and any page could otherwise spend it; \
             call it from your program, not a browser"
                .into(),
        ),
        "browser_request",
    )
}

/// `401`: the proxy's token is missing or wrong.
pub(crate) fn unauthorized() -> Response<Body> {
    let mut r = text(
        StatusCode::UNAUTHORIZED,
        "abide proxy: send Proxy-Authorization: Bearer <token> (the proxy's --token-env)".into(),
    );
    r.headers_mut().insert(
        header::PROXY_AUTHENTICATE,
        HeaderValue::from_static("Bearer"),
    );
    r
}
