//! The request an item makes over HTTP, built in one place for the send and for the
//! pre-flight: a header that cannot be built is found at start, as a configuration error,
//! never as a request that silently goes out without it or that fails as "no answer".

use http::{HeaderName, HeaderValue};

use super::config::HttpConfig;
use super::path::target_url;
use crate::credentials::Secret;
use crate::model::{Body, Request};

/// Why a request cannot be built. Names the header, never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unbuildable {
    /// The credential cannot be a header value; `why` says what is wrong with it, never
    /// what it is.
    Credential {
        /// The header it would go in.
        header: String,
        /// What is wrong (which byte, where; never the value).
        why: String,
    },
    /// Another header (the item's own, its idempotency key) or the URL.
    Other(String),
}

impl std::fmt::Display for Unbuildable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Credential { header, why } => {
                write!(f, "the credential cannot be sent in header {header}: {why}")
            }
            Self::Other(why) => f.write_str(why),
        }
    }
}

/// The header carrying `token`: `auth_header` with the token as is, or `Authorization:
/// Bearer <token>` (RFC 6750 §2.1), marked sensitive (never logged by the HTTP stack).
///
/// # Errors
/// A token with a control byte (a trailing `\n` or `\r` from a file is the common case),
/// empty, or with edge spaces: it cannot be sent as a header value (RFC 9110 §5.5), and
/// trimming it would send a credential other than the one configured.
pub(crate) fn credential_header(
    cfg: &HttpConfig,
    token: &Secret,
) -> Result<(HeaderName, HeaderValue), Unbuildable> {
    let name = cfg
        .auth_header
        .clone()
        .unwrap_or(http::header::AUTHORIZATION);
    let unfit = |why| Unbuildable::Credential {
        header: name.as_str().to_owned(),
        why,
    };
    let t = token.expose();
    if let Some(fault) = crate::model::headers::value_fault(t) {
        let from_file = if t.ends_with(['\n', '\r']) {
            " (a line break at the end, as read from a file)"
        } else {
            ""
        };
        return Err(unfit(format!("it {fault}{from_file}")));
    }
    if let Some(at) = t.find('\t') {
        return Err(unfit(format!("it contains a tab (0x09) at byte {at}")));
    }
    if t.trim().is_empty() {
        return Err(unfit("it is blank".into()));
    }
    if t.trim() != t {
        return Err(unfit("it begins or ends with a space".into()));
    }
    let value = match &cfg.auth_header {
        Some(_) => HeaderValue::from_str(t),
        None => HeaderValue::from_str(&format!("Bearer {t}")),
    };
    let mut value = value.map_err(|_| unfit("it is not a valid header value".into()))?;
    value.set_sensitive(true);
    Ok((name, value))
}

/// The request `request` (an item's, with its idempotency key `key`) makes to the
/// provider `cfg` describes, with `token` when one is set.
///
/// # Errors
/// A path that leaves the base path, a header that cannot be built (the credential's
/// included): nothing is sent.
pub(crate) fn build(
    cfg: &HttpConfig,
    request: &Request,
    key: &str,
    token: Option<&Secret>,
) -> Result<reqwest::Request, Unbuildable> {
    let url = target_url(&cfg.base_url, &request.path)
        .ok_or_else(|| Unbuildable::Other("the path leaves the base path".into()))?;
    let mut req = reqwest::Request::new(request.method.clone(), url);
    *req.timeout_mut() = Some(cfg.timeout);
    let h = req.headers_mut();
    for (k, v) in &request.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| Unbuildable::Other(format!("header name {k:?} is not valid")))?;
        let value = HeaderValue::from_str(v).map_err(|_| {
            let fault = crate::model::headers::value_fault(v);
            let fault = fault.as_deref().unwrap_or("is not valid");
            Unbuildable::Other(format!("header {k:?}: the value {fault}"))
        })?;
        h.append(name, value);
    }
    let key = HeaderValue::from_str(key).map_err(|_| {
        Unbuildable::Other("the idempotency key is not a valid header value".into())
    })?;
    h.append(cfg.idempotency_key_header.clone(), key);
    if let Some(token) = token {
        let (name, value) = credential_header(cfg, token)?;
        h.append(name, value);
    }
    let body = match &request.body {
        Some(Body::Json(v)) => {
            if !h.contains_key(http::header::CONTENT_TYPE) {
                let json = HeaderValue::from_static("application/json");
                h.insert(http::header::CONTENT_TYPE, json);
            }
            let bytes = serde_json::to_vec(v)
                .map_err(|e| Unbuildable::Other(format!("the JSON body: {e}")))?;
            Some(reqwest::Body::from(bytes))
        }
        Some(Body::Text(t)) => {
            let text = HeaderValue::from_static("text/plain; charset=utf-8");
            h.append(http::header::CONTENT_TYPE, text);
            Some(reqwest::Body::from(t.clone()))
        }
        None => None,
    };
    *req.body_mut() = body;
    Ok(req)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::HttpTransport;
    use super::*;
    use crate::credentials::StaticCredentials;
    use crate::model::Item;
    use crate::transport::{Preflight, Transport, TransportConfig, TransportSettings};
    use crate::Config;

    fn http(extra: &str) -> HttpConfig {
        let text = format!(
            "[[provider]]\nname = \"p\"\nbase_url = \"https://api.example/v1\"\n\
             credentials_env = \"P_TOKEN\"\n{extra}\n"
        );
        let c = Config::from_toml_str(&text).unwrap();
        match &c.providers[0].transport {
            TransportConfig::Http(h) => h.clone(),
            other => panic!("{other:?}"),
        }
    }

    const SECRET: &str = "s3cret-VALUE";

    fn item(request: Request) -> Item {
        let t = std::time::UNIX_EPOCH;
        Item {
            id: "i".into(),
            provider: "p".into(),
            current_provider: "p".into(),
            request,
            idempotency_key: "k".into(),
            created_at: t,
            state: crate::State::InFlight,
            attempts: 0,
            window_attempts: 0,
            window_start: t,
            next_attempt_at: t,
            last_provider_code: None,
            reason: None,
            moved_by: None,
            lease_owner: None,
            lease_expires_at: None,
            message_id: None,
        }
    }

    #[test]
    fn an_unfit_credential_is_a_preflight_error_never_an_attempt() {
        for extra in ["", "auth_header = \"X-Token\""] {
            let cfg = http(extra);
            for bad in [
                format!("{SECRET}\n"),
                format!("{SECRET}\r\n"),
                format!("{SECRET}\r"),
                format!("{SECRET}\u{1}x"),
                format!("{SECRET}\tx"),
                format!("{SECRET}\u{7f}"),
                format!(" {SECRET}"),
            ] {
                let creds = StaticCredentials::new().with("P_TOKEN", bad.clone());
                let e = cfg.preflight("p", &creds).unwrap_err();
                assert!(
                    matches!(&e, Preflight::CredentialUnfit { variable, .. } if variable == "P_TOKEN"),
                    "{bad:?}: {e:?}"
                );
                let shown = format!("{e} {e:?}");
                assert!(
                    shown.contains("credentials_env") && shown.contains("P_TOKEN"),
                    "{shown}"
                );
                if bad == format!("{SECRET}\n") {
                    let at = SECRET.len();
                    assert!(
                        shown.contains(&format!("line feed (0x0A) at byte {at}")),
                        "{shown}"
                    );
                }
                assert!(!shown.contains(SECRET), "{shown}");
                // A transport made anyway refuses to send without it, before any request.
                let t =
                    HttpTransport::new("p", &cfg, reqwest::Client::new(), Arc::new(creds), 1024);
                assert!(t.preflight().is_err());
                let item = item(Request::post_json("/m", serde_json::json!({})));
                let why = t.unsendable(&item).expect("sent without its credential");
                assert!(why.contains("P_TOKEN") && !why.contains(SECRET), "{why}");
            }
        }
    }

    #[test]
    fn the_credential_goes_in_its_header_never_dropped() {
        let token = Secret::new(SECRET);
        let req = Request::post_json("/m", serde_json::json!({"a": 1}));
        let cfg = http("auth_header = \"X-Token\"");
        let built = build(&cfg, &req, "k1", Some(&token)).unwrap();
        assert_eq!(built.headers()["x-token"], SECRET);
        assert!(built.headers()["x-token"].is_sensitive());
        assert_eq!(built.headers()["idempotency-key"], "k1");
        assert_eq!(built.headers()["content-type"], "application/json");
        assert_eq!(built.url().as_str(), "https://api.example/v1/m");
        assert!(!built.headers().contains_key("authorization"));
        let cfg = http("");
        let built = build(&cfg, &req, "k1", Some(&token)).unwrap();
        assert_eq!(
            built.headers()["authorization"],
            format!("Bearer {SECRET}").as_str()
        );
        let creds = StaticCredentials::new().with("P_TOKEN", SECRET);
        assert_eq!(cfg.preflight("p", &creds), Ok(()));
    }
}
