//! Who may use the proxy: it adds each provider's credential to what it forwards, so a
//! request it cannot trust to come from the user's own programs would spend that
//! credential for someone else.
//! - **Browsers** name the page a request comes from (`Origin`, `Sec-Fetch-Site`): any page
//!   the user has open could POST to a loopback proxy (a "simple" request needs no CORS
//!   preflight). Such requests are refused with `403`; the proxy serves programs, not pages.
//! - **DNS rebinding**: a page on `attacker.example` that re-resolves to 127.0.0.1 sends
//!   `Host: attacker.example`. On a loopback listener an origin-form request (`/sms/...`)
//!   must name the listener or `localhost` ([`loopback_hosts`]), else `421` (RFC 9110
//!   §15.5.20). An absolute-form request (`HTTP_PROXY`) names the upstream's origin in its
//!   `Host`, as it must, and is routed by that origin.
//! - **Ambiguous `Host`**: two `Host` lines, or an HTTP/1.1 request with none, is `400` on
//!   every listener ([`host_field_problem`], RFC 9112 §3.2): an intermediary in front may
//!   have read the other line.

use std::net::SocketAddr;

use axum::body::Body;
use http::uri::Authority;
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode, Uri, Version};

use crate::answer;

/// The `Host` values a loopback listener on `addr` answers: its address and `localhost`,
/// each with its port or none; `None` (any) for a listener on another address, where a
/// token is required instead. The rule of every abide listener (`abide serve` too).
pub fn loopback_hosts(addr: SocketAddr) -> Option<Vec<String>> {
    if !addr.ip().is_loopback() {
        return None;
    }
    let ip = match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let port = addr.port();
    let mut hosts = Vec::new();
    for name in [ip.as_str(), "localhost"] {
        hosts.push(format!("{name}:{port}"));
        hosts.push(name.to_owned());
    }
    Some(hosts)
}

/// What is wrong with a request's target authority or `Host` field lines, if anything:
/// more than one `Host` line, none in an HTTP/1.1 request, or one that is not
/// `host[:port]` (RFC 9112 §3.2 makes each a `400 Bad Request`; an empty value is allowed
/// there), or userinfo (`user:pass@`) in an absolute-form target (RFC 9110 §4.2.4: an
/// error). The rule of every abide listener (`abide serve` too).
pub fn host_field_problem(
    uri: &Uri,
    headers: &HeaderMap,
    version: Version,
) -> Option<&'static str> {
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Some("userinfo (user:password@) in the request target (RFC 9110 §4.2.4)");
    }
    let mut lines = headers.get_all(header::HOST).iter();
    match (lines.next(), lines.next()) {
        (Some(_), Some(_)) => Some("more than one Host header line (RFC 9112 §3.2)"),
        (None, _) if version == Version::HTTP_11 => {
            Some("an HTTP/1.1 request without a Host header (RFC 9112 §3.2)")
        }
        (Some(v), None) if !v.is_empty() && !is_authority(v.as_bytes()) => {
            Some("a Host header that is not host[:port] (RFC 9112 §3.2)")
        }
        _ => None,
    }
}

/// `host[:port]` with no userinfo and a port of digits only (the `Host` field's grammar,
/// RFC 9110 §7.2 and RFC 3986 §3.2.3: `port = *DIGIT`).
fn is_authority(v: &[u8]) -> bool {
    let after_host = match v.iter().rposition(|&b| b == b']') {
        Some(i) => &v[i + 1..],
        None => v,
    };
    let port_ok = match after_host.iter().rposition(|&b| b == b':') {
        Some(i) => after_host[i + 1..].iter().all(u8::is_ascii_digit),
        None => true,
    };
    port_ok && !v.contains(&b'@') && Authority::try_from(v).is_ok()
}

/// The answer to a request the proxy will not forward for a page or a foreign `Host`, or
/// `None` to go on.
pub(crate) fn refuse(req: &Request<Body>, hosts: Option<&[String]>) -> Option<Response<Body>> {
    let h = req.headers();
    if let Some(why) = host_field_problem(req.uri(), h, req.version()) {
        return Some(answer::bad_request(why));
    }
    if h.contains_key(header::ORIGIN) || h.contains_key("sec-fetch-site") {
        return Some(answer::from_a_browser());
    }
    let hosts = hosts?;
    if req.uri().authority().is_some() {
        return None;
    }
    let host = h
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    if host.is_some_and(|h| hosts.contains(&h)) {
        return None;
    }
    let mut r = Response::new(Body::from(format!(
        "abide proxy: this loopback listener answers only Host {}\n",
        hosts.join(", ")
    )));
    *r.status_mut() = StatusCode::MISDIRECTED_REQUEST;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Some(r)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn req(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
        // HTTP/1.0 unless a test says otherwise: no Host is required there.
        let mut b = Request::post(uri).version(Version::HTTP_10);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Body::empty()).unwrap()
    }

    #[test]
    fn a_page_or_a_rebound_name_is_refused_and_programs_pass() {
        let hosts = loopback_hosts("127.0.0.1:8788".parse().unwrap()).unwrap();
        let hosts = Some(hosts.as_slice());
        let status = |r: &Request<Body>| refuse(r, hosts).map(|r| r.status());
        // A program (curl, urllib3, Node's fetch) names the listener.
        assert_eq!(status(&req("/sms/v1", &[("host", "127.0.0.1:8788")])), None);
        assert_eq!(status(&req("/sms/v1", &[("host", "localhost:8788")])), None);
        // A page on any origin, even naming the listener.
        let page = [
            ("host", "127.0.0.1:8788"),
            ("origin", "http://evil.example"),
        ];
        assert_eq!(status(&req("/sms/v1", &page)), Some(StatusCode::FORBIDDEN));
        let fetch = [("host", "127.0.0.1:8788"), ("sec-fetch-site", "cross-site")];
        assert_eq!(status(&req("/sms/v1", &fetch)), Some(StatusCode::FORBIDDEN));
        // DNS rebinding: the page's own name in Host.
        let rebound = [("host", "attacker.example")];
        assert_eq!(
            status(&req("/sms/v1", &rebound)),
            Some(StatusCode::MISDIRECTED_REQUEST)
        );
        assert_eq!(
            status(&req("/sms/v1", &[])),
            Some(StatusCode::MISDIRECTED_REQUEST)
        );
        // Forward-proxy form names the upstream in Host, as it must.
        let absolute = [("host", "127.0.0.1:8080")];
        assert_eq!(status(&req("http://127.0.0.1:8080/v1", &absolute)), None);
        // Another address: no Host rule (a token is required there), browsers still refused.
        assert_eq!(loopback_hosts("0.0.0.0:8788".parse().unwrap()), None);
        assert_eq!(
            refuse(&req("/sms/v1", &rebound), None).map(|r| r.status()),
            None
        );
        assert_eq!(
            refuse(&req("/sms/v1", &page), None).map(|r| r.status()),
            Some(StatusCode::FORBIDDEN)
        );
    }

    #[test]
    fn two_host_lines_or_none_in_http_1_1_are_a_bad_request() {
        let hosts = loopback_hosts("127.0.0.1:8788".parse().unwrap()).unwrap();
        for listener in [Some(hosts.as_slice()), None] {
            let two = [("host", "127.0.0.1:8788"), ("host", "evil.example")];
            let r = refuse(&req("/sms/v1", &two), listener).unwrap();
            assert_eq!(r.status(), StatusCode::BAD_REQUEST);
            let mut none = req("/sms/v1", &[]);
            *none.version_mut() = Version::HTTP_11;
            assert_eq!(
                refuse(&none, listener).map(|r| r.status()),
                Some(StatusCode::BAD_REQUEST)
            );
        }
        let mut one = req("/sms/v1", &[("host", "127.0.0.1:8788")]);
        *one.version_mut() = Version::HTTP_11;
        assert_eq!(
            host_field_problem(one.uri(), one.headers(), one.version()),
            None
        );
        // Not host[:port], or userinfo in the target: 400 too; an empty Host is allowed.
        for (uri, host) in [
            ("/sms/v1", "a, b"),
            ("/sms/v1", "user@127.0.0.1:8788"),
            ("/sms/v1", "127.0.0.1:88x"),
            ("http://user:pw@127.0.0.1:8080/v1", "127.0.0.1:8080"),
        ] {
            let r = req(uri, &[("host", host)]);
            assert!(
                host_field_problem(r.uri(), r.headers(), r.version()).is_some(),
                "{uri} Host: {host}"
            );
        }
        let empty = req("/sms/v1", &[("host", "")]);
        assert_eq!(
            host_field_problem(empty.uri(), empty.headers(), empty.version()),
            None
        );
        assert_eq!(
            refuse(&one, Some(hosts.as_slice())).map(|r| r.status()),
            None
        );
    }
}
