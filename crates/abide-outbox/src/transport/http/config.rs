//! The settings of a provider reached over HTTP (`transport = "http"`, the default).
//!
//! ```toml
//! [[provider]]
//! name = "sms-primary"
//! base_url = "https://api.example.com"    # item paths are appended to it
//! credentials_env = "SMS_PRIMARY_TOKEN"   # the variable's NAME; its value is never stored
//! auth_header = "X-Api-Key"               # the token as is; default Authorization: Bearer
//! concurrency = 16                        # concurrent senders
//! idempotency_key_header = "Idempotency-Key"
//! timeout_secs = 10
//! ```

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::echo::{self, clip};
use crate::error::{Error, Result};
use crate::model::{headers, MAX_HEADER_NAME_LEN};
use crate::toml_keys::{field_names, Keys, TableError};
use crate::transport::KindOf;

/// Default idempotency-key header (IETF draft-ietf-httpapi-idempotency-key-header).
pub const DEFAULT_IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
/// Headers abide sets on every request, beside the connection's
/// ([`crate::model::headers::CONNECTION_HEADERS`]): not for `auth_header` or
/// `idempotency_key_header`.
const SET_BY_ABIDE: &[&str] = &["content-type"];
/// Longest accepted `base_url`, in bytes.
const MAX_BASE_URL_LEN: usize = 2048;
/// Highest accepted `concurrency`: abide-core's bound on senders
/// ([`abide_core::session::limits::SENDERS`]).
pub const MAX_CONCURRENCY: usize = abide_core::ratelimit::MAX_CONCURRENCY as usize;

/// How to reach one HTTP provider.
///
/// # Default
/// - `concurrency`: 4 senders
/// - `timeout`: 10 s per request
/// - `idempotency_key_header`: `Idempotency-Key`
/// - `auth_header`: none, i.e. `Authorization: Bearer <token>` (RFC 6750 §2.1)
/// - no credentials
#[derive(Clone, PartialEq)]
pub struct HttpConfig {
    /// Base URL; item paths are appended to it (never a query, fragment or credential).
    pub base_url: reqwest::Url,
    /// Name of the environment variable holding the token (never the token itself).
    pub credentials_env: Option<String>,
    /// Header that carries the token as is; `None` sends `Authorization: Bearer <token>`.
    pub auth_header: Option<http::HeaderName>,
    /// Concurrent senders.
    pub concurrency: usize,
    /// Longest time one request may take (per-request timeout).
    pub timeout: Duration,
    /// Header carrying the item's idempotency key.
    pub idempotency_key_header: http::HeaderName,
}

impl fmt::Debug for HttpConfig {
    // Written out so that a future secret field cannot leak through a derive; the
    // credential itself is never held here, only the variable's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("base_url", &self.base_url.as_str())
            .field("credentials_env", &self.credentials_env)
            .field("auth_header", &self.auth_header)
            .field("concurrency", &self.concurrency)
            .field("timeout", &self.timeout)
            .field("idempotency_key_header", &self.idempotency_key_header)
            .finish_non_exhaustive()
    }
}

/// The `[[provider]]` keys of an HTTP provider, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    base_url: Option<String>,
    credentials_env: Option<String>,
    auth_header: Option<String>,
    concurrency: Option<i64>,
    timeout_secs: Option<f64>,
    idempotency_key_header: Option<String>,
}

/// `transport = "http"`.
pub(crate) const KIND: KindOf<HttpConfig> = KindOf {
    name: "http",
    keys: field_names::<FileHttp>,
    unused_shared: &["classify.smpp"],
    read,
};

fn read(n: &str, keys: &Keys) -> std::result::Result<HttpConfig, TableError> {
    let f: FileHttp = keys.read()?;
    let base_url = base_url(n, f.base_url)?;
    let concurrency = f.concurrency.unwrap_or(4);
    let Some(concurrency) = usize::try_from(concurrency)
        .ok()
        .filter(|c| (1..=MAX_CONCURRENCY).contains(c))
    else {
        let why = format!("{concurrency} is outside 1..={MAX_CONCURRENCY}");
        return Err(Error::config(n, "concurrency", why).into());
    };
    let timeout_secs = f.timeout_secs.unwrap_or(10.0);
    if !(timeout_secs.is_finite() && (0.001..=600.0).contains(&timeout_secs)) {
        let why = format!("{timeout_secs} is outside 0.001..=600");
        return Err(Error::config(n, "timeout_secs", why).into());
    }
    if let Some(var) = &f.credentials_env {
        if var.is_empty()
            || var.len() > MAX_HEADER_NAME_LEN
            || var.contains('=')
            || var.contains('\0')
        {
            let why = "must be the NAME of an environment variable";
            return Err(Error::config(n, "credentials_env", why).into());
        }
    }
    let header = |field: &str, h: &str| {
        let name = http::HeaderName::from_bytes(h.as_bytes())
            .map_err(|_| Error::config(n, field, format!("{} is not a header name", clip(h))))?;
        // The token or the key would go out as `Host: <token>`, `Transfer-Encoding:
        // <token>, chunked`: request framing and routing, not a credential.
        if headers::is_connection(name.as_str()) || SET_BY_ABIDE.contains(&name.as_str()) {
            let why = format!(
                "{} belongs to the connection or the request framing, or is set by abide \
                 (Host, Content-Length, Transfer-Encoding, Connection, Upgrade, TE, Trailer, \
                 Keep-Alive, Expect, Proxy-*, Content-Type); use a header of the API",
                clip(h)
            );
            return Err(Error::config(n, field, why));
        }
        Ok(name)
    };
    let auth_header = f
        .auth_header
        .map(|h| header("auth_header", &h))
        .transpose()?;
    let idem_set = f.idempotency_key_header.is_some();
    let idem = f
        .idempotency_key_header
        .unwrap_or_else(|| DEFAULT_IDEMPOTENCY_KEY_HEADER.to_owned());
    let idempotency_key_header = header("idempotency_key_header", &idem)?;
    let field = "idempotency_key_header";
    if auth_header.as_ref() == Some(&idempotency_key_header) && !idem_set {
        // The user named only auth_header: name that one, and the default it meets.
        let why = format!(
            "{} is the header the idempotency key goes in (idempotency_key_header's \
             default); use another, or set idempotency_key_header",
            clip(&idem)
        );
        return Err(Error::config(n, "auth_header", why).into());
    }
    if auth_header.as_ref() == Some(&idempotency_key_header)
        || (auth_header.is_none() && idempotency_key_header == http::header::AUTHORIZATION)
    {
        let why = format!(
            "{} is the header the credential goes in; use another",
            clip(&idem)
        );
        return Err(Error::config(n, field, why).into());
    }
    if headers::is_credential(idempotency_key_header.as_str()) {
        let why = format!(
            "{} is a credential header; the key would be sent as a credential",
            clip(&idem)
        );
        return Err(Error::config(n, field, why).into());
    }
    Ok(HttpConfig {
        base_url,
        credentials_env: f.credentials_env,
        auth_header,
        concurrency,
        timeout: Duration::from_secs_f64(timeout_secs),
        idempotency_key_header,
    })
}

/// The `base_url` of an HTTP provider: required, http(s), with a host, no query,
/// fragment or credentials; shown without its password when it does not parse.
fn base_url(n: &str, raw: Option<String>) -> Result<reqwest::Url> {
    let bad = |why: String| Error::config(n, "base_url", why);
    let Some(raw) = raw else {
        return Err(bad("required (or set transport = \"smpp\")".into()));
    };
    if raw.len() > MAX_BASE_URL_LEN {
        let len = raw.len();
        return Err(bad(format!(
            "is {len} bytes; the limit is {MAX_BASE_URL_LEN}"
        )));
    }
    // Shown without its password even when it does not parse (a password makes it
    // unusable here anyway; see below).
    let url = reqwest::Url::parse(&raw)
        .map_err(|e| bad(format!("{}: {e}", clip(&echo::redact_url(&raw)))))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad("must be an http or https URL with a host".into()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("must not have a query or fragment".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not embed credentials; use credentials_env".into()));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use crate::{Config, Error};

    fn with(extra: &str) -> crate::Result<Config> {
        Config::from_toml_str(&format!(
            "[[provider]]\nname = \"p\"\nbase_url = \"https://api.example\"\n{extra}\n"
        ))
    }

    #[test]
    fn connection_and_framing_headers_are_refused_as_settings() {
        for field in ["auth_header", "idempotency_key_header"] {
            for name in [
                "Host",
                "Transfer-Encoding",
                "connection",
                "Content-Length",
                "Upgrade",
                "TE",
                "Trailer",
                "Keep-Alive",
                "Expect",
                "Proxy-Authorization",
                "Proxy-Connection",
                "Content-Type",
            ] {
                let e = with(&format!("{field} = \"{name}\"")).unwrap_err();
                assert!(
                    matches!(&e, Error::Config { field: f, .. } if f == field),
                    "{field} = {name}: {e:?}"
                );
                assert!(e.to_string().contains(name), "{e}");
            }
        }
        // The key never goes out as a credential.
        for extra in [
            "idempotency_key_header = \"Authorization\"",
            "idempotency_key_header = \"X-Api-Key\"",
            "auth_header = \"X-Key\"\nidempotency_key_header = \"X-Key\"",
        ] {
            let e = with(extra).unwrap_err();
            assert!(
                matches!(&e, Error::Config { field, .. } if field == "idempotency_key_header"),
                "{extra}: {e:?}"
            );
        }
        for extra in [
            "auth_header = \"X-Api-Key\"",
            "auth_header = \"Authorization\"",
            "idempotency_key_header = \"X-Request-Id\"",
        ] {
            assert!(with(extra).is_ok(), "{extra}");
        }
    }
}
