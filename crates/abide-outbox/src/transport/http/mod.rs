//! HTTP with reqwest: one [`HttpTransport`] per provider, and [`path`]: item paths
//! confined below the provider's base path.

mod config;
pub mod path;
mod request;
mod settings;

pub(crate) use config::KIND;
pub use config::{HttpConfig, DEFAULT_IDEMPOTENCY_KEY_HEADER, MAX_CONCURRENCY};
pub use path::target_url;

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use abide_core::TransportFailure;
use bytes::{Bytes, BytesMut};

use super::{Preflight, Response, SendFuture, Transport, TransportSettings, MAX_CLASSIFIED_BODY};
use crate::credentials::{CredentialSource, Secret};
use crate::model::Item;

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
        let token = self.token();
        let req = match request::build(
            &self.cfg,
            &item.request,
            &item.idempotency_key,
            token.as_ref(),
        ) {
            Ok(req) => req,
            // Refused before the send (`unsendable`, the pre-flight); kept for direct
            // callers. Never sent.
            Err(_) => return Response::Transport(TransportFailure::Connect),
        };
        match self.client.execute(req).await {
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
        if let Err(e) = path::confine(&self.cfg.base_url, &item.request.path) {
            return Some(e.to_string());
        }
        // The pre-flight refuses such a credential at start; a transport made without
        // one never sends a request that lacks it.
        let token = self.token()?;
        let var = self.cfg.credentials_env.as_deref().unwrap_or_default();
        request::credential_header(&self.cfg, &token)
            .err()
            .map(|e| format!("{e} (credentials_env {var})"))
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
        let Some(var) = self.cfg.credentials_env.as_deref() else {
            return;
        };
        let fresh = self.source.get(var);
        if let Some(token) = &fresh {
            if let Err(e) = request::credential_header(&self.cfg, token) {
                // Keep the one that could be sent rather than send none.
                tracing::warn!(provider = %self.provider, credentials_env = var,
                    "the refreshed credential is unfit, keeping the previous one: {e}");
                return;
            }
        }
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
