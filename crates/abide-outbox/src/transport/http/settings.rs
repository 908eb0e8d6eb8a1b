//! What the engine reads of an HTTP provider's settings (senders, timeout, checks at
//! enqueue, preflight, building the transport): `TransportSettings for HttpConfig`.

use std::sync::Arc;
use std::time::Duration;

use super::config::HttpConfig;
use super::HttpTransport;
use crate::credentials::CredentialSource;
use crate::echo;
use crate::error::{Error, Result};
use crate::model::NewItem;
use crate::transport::{BuildEnv, Preflight, Transport, TransportSettings};

impl TransportSettings for HttpConfig {
    fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// `concurrency` becomes `senders`.
    fn set_senders(&mut self, senders: usize) {
        self.concurrency = senders;
    }

    fn attempt_timeout(&self) -> Duration {
        self.timeout
    }

    fn endpoint(&self) -> String {
        self.base_url.to_string()
    }

    fn credential_setting(&self) -> Option<String> {
        self.credentials_env
            .as_deref()
            .map(|name| format!("credentials_env = {name:?}"))
    }

    /// The item's path stays below the base path ([`super::path::confine`]), and it
    /// carries neither the provider's idempotency-key header (abide sends the item's key
    /// there) nor its auth header (a secret).
    fn check_item(&self, provider: &str, item: &NewItem) -> Result<()> {
        // Before `validate`, which checks the path too but cannot name the base path.
        super::path::confine(&self.base_url, &item.request.path).map_err(|e| {
            let base = echo::clip(&echo::redact_url(self.base_url.as_str()));
            Error::Path(e.below(provider, base))
        })?;
        item.validate()?;
        for name in item.request.headers.keys() {
            if name.eq_ignore_ascii_case(self.idempotency_key_header.as_str()) {
                return Err(Error::InvalidRequest(format!(
                    "header {name:?} is provider {provider:?}'s idempotency-key header, set by \
                     abide from the item's idempotency_key; remove it"
                )));
            }
            if self
                .auth_header
                .as_ref()
                .is_some_and(|h| name.eq_ignore_ascii_case(h.as_str()))
            {
                return Err(Error::InvalidRequest(format!(
                    "header {name:?} carries provider {provider:?}'s credential; credentials \
                     come from its credentials_env"
                )));
            }
        }
        Ok(())
    }

    /// The `credentials_env` variable, when one is named, is set and not blank (without
    /// it every request would get a `401` and its item end `DEFERRED`), and one real
    /// request (URL, idempotency-key header, credential header) can be built with it: a
    /// credential read from a file with its line break, or with a control byte, can never
    /// be sent, and would otherwise fail every attempt without a request going out.
    fn preflight(
        &self,
        provider: &str,
        credentials: &dyn CredentialSource,
    ) -> std::result::Result<(), Preflight> {
        let token = match &self.credentials_env {
            None => None,
            Some(var) => match credentials.get(var) {
                Some(v) if !v.expose().trim().is_empty() => Some(v),
                _ => {
                    return Err(Preflight::CredentialMissing {
                        provider: provider.to_owned(),
                        setting: "credentials_env",
                        variable: var.clone(),
                    })
                }
            },
        };
        let probe = crate::model::Request::post_json("/", serde_json::json!({}));
        match super::request::build(self, &probe, "abide-preflight", token.as_ref()) {
            Ok(_) => Ok(()),
            Err(super::request::Unbuildable::Credential { header, why }) => {
                Err(Preflight::CredentialUnfit {
                    provider: provider.to_owned(),
                    variable: self.credentials_env.clone().unwrap_or_default(),
                    header,
                    why,
                })
            }
            Err(super::request::Unbuildable::Other(why)) => Err(Preflight::RequestUnbuildable {
                provider: provider.to_owned(),
                why,
            }),
        }
    }

    /// The credential's value: the limit belongs to the key, not to the provider's name.
    fn account(&self, credentials: &dyn CredentialSource) -> Option<String> {
        let var = self.credentials_env.as_deref()?;
        credentials.get(var).map(|s| s.expose().to_owned())
    }

    fn build(&self, provider: &str, env: &BuildEnv) -> Arc<dyn Transport> {
        Arc::new(HttpTransport::new(
            provider,
            self,
            env.client.clone(),
            Arc::clone(&env.credentials),
            env.max_response_body,
        ))
    }
}
