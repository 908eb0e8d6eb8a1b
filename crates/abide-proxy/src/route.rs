//! Where a request goes: the proxy's own routes, a provider (reverse route
//! `/{provider}/{path}` or an absolute-form request whose origin is a provider's
//! `base_url`), or a refusal.
//!
//! A provider's path is confined below its `base_url` by the same rules as an outbox item's
//! ([`abide_outbox::transport::http::path::confine`]): a path that could leave the base path
//! in any spelling is refused, naming the rule.

use abide_outbox::transport::http::path::{self, PathError};
use http::{Method, Uri};

/// Prefix of the proxy's own routes (never a provider name: provider names hold no `_`
/// at the start by this convention, and the prefix is matched first).
pub const OWN_PREFIX: &str = "/_abide/";

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// `/_abide/<name>`.
    Own(String),
    /// Provider number `index`, at `url` (confined below its `base_url`).
    Provider {
        /// Index in the proxy's provider list.
        index: usize,
        /// The upstream URL, query kept.
        url: reqwest::Url,
        /// The path below the provider's base, for logs and warnings.
        path: String,
    },
    /// A `CONNECT`: a TLS tunnel, inside which nothing can be seen.
    Connect,
    /// A method outside [`FORWARDED_METHODS`] (`TRACE` echoes the request, credential
    /// included; `TRACK` and extension methods are not API calls).
    Method(Method),
    /// No provider by that name (or no provider at that origin, for an absolute form).
    Unknown(String),
    /// The path is refused by a confinement rule.
    Refused(PathError),
}

/// The providers as the router sees them: name and base URL.
pub(crate) trait Bases {
    /// Number of providers.
    fn len(&self) -> usize;
    /// Name of provider `i`.
    fn name(&self, i: usize) -> &str;
    /// Base URL of provider `i`.
    fn base(&self, i: usize) -> &reqwest::Url;
}

/// The methods forwarded to a provider: those an API call is made with (RFC 9110 §9.3 less
/// `CONNECT` and `TRACE`, plus `PATCH`, RFC 5789). Any other is refused, never sent with the
/// credential the proxy adds: `TRACE` would echo it back to the caller.
pub(crate) const FORWARDED_METHODS: &[Method] = &[
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
];

/// Route one request.
pub(crate) fn route(method: &Method, uri: &Uri, bases: &dyn Bases) -> Target {
    if method == Method::CONNECT {
        return Target::Connect;
    }
    if !FORWARDED_METHODS.contains(method) {
        return Target::Method(method.clone());
    }
    if uri.scheme().is_some() && uri.authority().is_some() {
        return absolute(uri, bases);
    }
    let raw = uri.path();
    if let Some(own) = raw.strip_prefix(OWN_PREFIX) {
        return Target::Own(own.to_owned());
    }
    let rest = raw.strip_prefix('/').unwrap_or(raw);
    let (name, below) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let Some(index) = (0..bases.len()).find(|&i| bases.name(i) == name) else {
        return Target::Unknown(name.to_owned());
    };
    confined(index, below, uri.query(), bases)
}

/// An absolute-form request (`HTTP_PROXY=http://ADDR`): the provider whose `base_url` has
/// the same origin and whose base path the request's path starts with.
fn absolute(uri: &Uri, bases: &dyn Bases) -> Target {
    let scheme = uri.scheme_str().unwrap_or("");
    let host = uri.host().unwrap_or("");
    let port = uri.port_u16().or(match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    });
    let path = uri.path();
    for i in 0..bases.len() {
        let b = bases.base(i);
        let same_origin = b.scheme() == scheme
            && b.host_str().is_some_and(|h| h.eq_ignore_ascii_case(host))
            && b.port_or_known_default() == port;
        if !same_origin {
            continue;
        }
        let base_path = b.path().trim_end_matches('/');
        let Some(below) = path.strip_prefix(base_path) else {
            continue;
        };
        if below.is_empty() || below.starts_with('/') {
            let below = if below.is_empty() { "/" } else { below };
            return confined(i, below, uri.query(), bases);
        }
    }
    // The origin as asked, its port included when given (`localhost:8080` and
    // `localhost:9090` are different origins); never the user info.
    let shown_port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    Target::Unknown(format!("{scheme}://{host}{shown_port}"))
}

fn confined(index: usize, below: &str, query: Option<&str>, bases: &dyn Bases) -> Target {
    let with_query = match query {
        Some(q) => format!("{below}?{q}"),
        None => below.to_owned(),
    };
    let base = bases.base(index);
    match path::confine(base, &with_query) {
        Ok(url) => Target::Provider {
            index,
            url,
            path: below.to_owned(),
        },
        Err(e) => Target::Refused(e.below(
            bases.name(index),
            abide_core::echo::redact_url(base.as_str()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Two(Vec<(String, reqwest::Url)>);

    impl Bases for Two {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn name(&self, i: usize) -> &str {
            &self.0[i].0
        }
        fn base(&self, i: usize) -> &reqwest::Url {
            &self.0[i].1
        }
    }

    fn bases() -> Two {
        Two(vec![
            ("sms".into(), "http://127.0.0.1:9/api/".parse().unwrap()),
            ("mail".into(), "http://mail.example".parse().unwrap()),
        ])
    }

    fn at(m: Method, uri: &str) -> Target {
        route(&m, &uri.parse().unwrap(), &bases())
    }

    #[test]
    fn the_reverse_route_keeps_the_path_and_query_below_the_base() {
        match at(Method::GET, "/sms/v1/export?bytes=10&x=..") {
            Target::Provider { index, url, path } => {
                assert_eq!(index, 0);
                assert_eq!(
                    url.as_str(),
                    "http://127.0.0.1:9/api/v1/export?bytes=10&x=.."
                );
                assert_eq!(path, "/v1/export");
            }
            t => panic!("{t:?}"),
        }
        assert!(matches!(
            at(Method::GET, "/mail"),
            Target::Provider { index: 1, .. }
        ));
        assert_eq!(
            at(Method::GET, "/_abide/healthz"),
            Target::Own("healthz".into())
        );
        assert_eq!(at(Method::GET, "/nope/x"), Target::Unknown("nope".into()));
        assert_eq!(at(Method::CONNECT, "mail.example:443"), Target::Connect);
        for m in ["TRACE", "TRACK", "PROPFIND"] {
            let m = Method::from_bytes(m.as_bytes()).unwrap();
            assert_eq!(at(m.clone(), "/sms/v1/x"), Target::Method(m));
        }
    }

    #[test]
    fn escaping_paths_are_refused_naming_the_rule() {
        for (p, rule) in [
            ("/sms/%2e%2e/admin", "dot-segment"),
            ("/sms/..;/admin", "dot-segment"),
            ("/sms/a%2Fb", "encoded-slash"),
            ("/sms//evil.example/x", "names-a-host"),
        ] {
            match at(Method::GET, p) {
                Target::Refused(e) => {
                    let text = e.to_string();
                    assert!(text.contains(rule), "{p}: {text}");
                    assert!(text.contains("\"sms\""), "{p}: {text}");
                }
                t => panic!("{p}: {t:?}"),
            }
        }
    }

    #[test]
    fn absolute_form_requests_match_a_provider_s_origin_and_base_path() {
        match at(Method::POST, "http://127.0.0.1:9/api/v1/messages?a=1") {
            Target::Provider { index, url, .. } => {
                assert_eq!(index, 0);
                assert_eq!(url.as_str(), "http://127.0.0.1:9/api/v1/messages?a=1");
            }
            t => panic!("{t:?}"),
        }
        assert!(matches!(
            at(Method::GET, "http://MAIL.example:80/v1"),
            Target::Provider { index: 1, .. }
        ));
        // Same host, outside the base path; another port; another host.
        for u in [
            "http://127.0.0.1:9/other",
            "http://127.0.0.1:10/api/v1",
            "http://evil.example/api/v1",
        ] {
            assert!(matches!(at(Method::GET, u), Target::Unknown(_)), "{u}");
        }
        // The origin is named with its port, never with user info.
        assert_eq!(
            at(Method::GET, "http://127.0.0.1:10/api/v1"),
            Target::Unknown("http://127.0.0.1:10".into())
        );
        assert_eq!(
            at(Method::GET, "http://u:pw@localhost:8080/x"),
            Target::Unknown("http://localhost:8080".into())
        );
        assert_eq!(
            at(Method::GET, "http://evil.example/x"),
            Target::Unknown("http://evil.example".into())
        );
    }
}
