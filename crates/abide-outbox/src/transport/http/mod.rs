//! HTTP with reqwest: one [`HttpTransport`] per provider, and [`path`]: item paths
//! confined below the provider's base path.

mod config;
pub mod path;

pub(crate) use config::KIND;
pub use config::{HttpConfig, DEFAULT_IDEMPOTENCY_KEY_HEADER, MAX_CONCURRENCY};

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use abide_core::TransportFailure;
use bytes::{Bytes, BytesMut};
use http::HeaderValue;

use super::{Preflight, Response, SendFuture, Transport, TransportSettings, MAX_CLASSIFIED_BODY};
use crate::credentials::{CredentialSource, Secret};
use crate::model::{Body, Item};

/// Sends items to one provider over HTTP.
///
/// Redirects must be off in the client (an item may only reach its provider); at most
/// `max_body` bytes of each response are read, so the connection can be reused and a
/// hostile provider cannot make us buffer without limit.
#[derive(Debug)]
pub struct HttpTransport {
    provider: String,
    cfg: HttpConfig,
    client: reqwest::Client,
    source: Arc<dyn CredentialSource>,
    token: RwLock<Option<Secret>>,
    max_body: usize,
    /// The last request that got no answer: reqwest's error chain, without the URL.
    last_failure: Mutex<Option<String>>,
}

impl HttpTransport {
    /// A transport for provider `provider` reached as `cfg` says, reading its credential
    /// from `source` now (and again once after a `401`).
    pub fn new(
        provider: &str,
        cfg: &HttpConfig,
        client: reqwest::Client,
        source: Arc<dyn CredentialSource>,
        max_body: usize,
    ) -> Self {
        let token = cfg.credentials_env.as_deref().and_then(|n| source.get(n));
        Self {
            provider: provider.to_owned(),
            cfg: cfg.clone(),
            client,
            source,
            token: RwLock::new(token),
            max_body,
            last_failure: Mutex::new(None),
        }
    }

    /// A reqwest client fit for providers: no redirects, a large idle pool.
    ///
    /// # Errors
    /// When reqwest cannot build a client (TLS back-end initialisation).
    pub fn client() -> reqwest::Result<reqwest::Client> {
        reqwest::Client::builder()
            // A redirect could lead anywhere; items may only reach their provider.
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(256)
            .build()
    }

    fn token(&self) -> Option<Secret> {
        self.token
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    async fn send_one(&self, item: &Item) -> Response {
        let Some(url) = target_url(&self.cfg.base_url, &item.request.path) else {
            // Refused before the send (`unsendable`); kept for direct callers. Never sent.
            return Response::Transport(TransportFailure::Connect);
        };
        let method = item.request.method.clone();
        let mut req = self.client.request(method, url).timeout(self.cfg.timeout);
        for (k, v) in &item.request.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Ok(v) = HeaderValue::from_str(&item.idempotency_key) {
            req = req.header(self.cfg.idempotency_key_header.clone(), v);
        }
        if let Some(token) = self.token() {
            req = match &self.cfg.auth_header {
                Some(name) => match HeaderValue::from_str(token.expose()) {
                    Ok(mut v) => {
                        v.set_sensitive(true);
                        req.header(name.clone(), v)
                    }
                    Err(_) => req,
                },
                None => req.bearer_auth(token.expose()),
            };
        }
        req = match &item.request.body {
            Some(Body::Json(v)) => req.json(v),
            Some(Body::Text(t)) => req
                .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(t.clone()),
            None => req,
        };
        match req.send().await {
            Ok(mut resp) => {
                let status = resp.status();
                let headers = std::mem::take(resp.headers_mut());
                let mut kept = BytesMut::new();
                let mut read = 0usize;
                while read < self.max_body {
                    match resp.chunk().await {
                        Ok(Some(chunk)) => {
                            read += chunk.len();
                            let room = MAX_CLASSIFIED_BODY.saturating_sub(kept.len());
                            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
                        }
                        _ => break,
                    }
                }
                Response::Http {
                    status,
                    headers,
                    body: Bytes::from(kept),
                }
            }
            Err(e) => {
                let connect = e.is_connect();
                *self
                    .last_failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(error_chain(e));
                if connect {
                    Response::Transport(TransportFailure::Connect)
                } else {
                    // Sent (or possibly sent): every request carries an idempotency key,
                    // so a replay is safe as long as the provider honours it.
                    Response::Transport(TransportFailure::AfterSend { replay_safe: true })
                }
            }
        }
    }
}

impl Transport for HttpTransport {
    fn send<'a>(&'a self, item: &'a Item) -> SendFuture<'a> {
        Box::pin(self.send_one(item))
    }

    fn unsendable(&self, item: &Item) -> Option<String> {
        path::confine(&self.cfg.base_url, &item.request.path)
            .err()
            .map(|e| e.to_string())
    }

    fn preflight(&self) -> Result<(), Preflight> {
        self.cfg.preflight(&self.provider, &*self.source)
    }

    fn last_failure(&self) -> Option<String> {
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn refresh_credentials(&self) {
        let fresh = self
            .cfg
            .credentials_env
            .as_deref()
            .and_then(|n| self.source.get(n));
        *self.token.write().unwrap_or_else(PoisonError::into_inner) = fresh;
    }
}

/// What reqwest said, with its sources ("error sending request: client error (Connect):
/// tcp connect error: Connection refused (os error 111)"), without the URL: a query may
/// carry a key, and the caller names the provider's endpoint itself.
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    if let Some((cut, _)) = text.char_indices().nth(300) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// `base` + `path`, or `None` for a path that could leave `base`'s path (see
/// [`path::confine`], which says which rule).
pub fn target_url(base: &reqwest::Url, path: &str) -> Option<reqwest::Url> {
    path::confine(base, path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_stay_on_the_provider() {
        let base = reqwest::Url::parse("http://127.0.0.1:9/api/").unwrap();
        assert_eq!(
            target_url(&base, "/v1/m?x=1").map(|u| u.to_string()),
            Some("http://127.0.0.1:9/api/v1/m?x=1".into())
        );
        for p in ["//evil/x", "http://evil/x", "v1", "/@evil.example"] {
            let u = target_url(&base, p);
            assert!(
                u.as_ref().is_none_or(|u| u.host_str() == Some("127.0.0.1")),
                "{p}: {u:?}"
            );
        }
        // A row edited in the database after enqueue: refused just before sending too.
        for p in [
            "/%2e%2e/v1/m",
            "/.%2E/v1",
            "/..;/v1",
            "/..\\v1",
            "/%252e%252e/v1",
        ] {
            assert_eq!(target_url(&base, p), None, "{p}");
        }
    }
}
