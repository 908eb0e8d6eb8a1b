//! The call an item makes: method, path, headers, body, and the limits each is checked
//! against before anything is stored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::headers;
use crate::echo::clip;
use crate::error::Error;

pub use crate::transport::http::path::MAX_PATH_LEN;
/// Longest accepted method, in bytes (the longest in the IANA HTTP Method Registry,
/// `UPDATEREDIRECTREF`, has 17).
pub const MAX_METHOD_LEN: usize = 32;
/// Longest accepted header name, in bytes.
pub const MAX_HEADER_NAME_LEN: usize = 256;
/// Longest accepted header value, in bytes (servers commonly refuse a header line over
/// 8 KiB, e.g. nginx's `large_client_header_buffers`).
pub const MAX_HEADER_VALUE_LEN: usize = 8192;
/// Longest provider name, in bytes (configured names are 1-64 of `A-Z a-z 0-9 - _ .`).
pub const MAX_PROVIDER_NAME_LEN: usize = 64;
/// Most non-secret headers an item may carry.
pub const MAX_HEADERS: usize = 32;
/// Longest accepted idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;
/// Largest accepted request body, in bytes (1 MiB), measured as sent: the UTF-8 text, or
/// the JSON as serialised. Items are stored whole in the database and read on every claim
/// and `status`; a provider API call (an SMS, a notification, a payment) is far smaller,
/// so a larger body is a mistake, not a message.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// `name` as an HTTP method: at most [`MAX_METHOD_LEN`] bytes, an RFC 9110 §9.1 token,
/// in upper case (`POST`, `PUT`, an extension method such as `UPDATEREDIRECTREF`).
///
/// # Errors
/// [`Error::InvalidRequest`] saying which rule `name` breaks, quoting it clipped.
pub fn parse_method(name: &str) -> Result<http::Method, Error> {
    if name.len() > MAX_METHOD_LEN {
        return Err(Error::InvalidRequest(format!(
            "method {} is longer than {MAX_METHOD_LEN} bytes",
            clip(name)
        )));
    }
    match http::Method::from_bytes(name.as_bytes()) {
        Ok(m) if !name.is_empty() && name == name.to_ascii_uppercase() => Ok(m),
        _ => Err(Error::InvalidRequest(format!(
            "method {} is not an upper-case HTTP method",
            clip(name)
        ))),
    }
}

/// Methods no provider call is made with: `CONNECT` asks for a tunnel (RFC 9110 §9.3.6),
/// `TRACE` for an echo of the request itself (§9.3.8), credentials included.
pub(crate) const REFUSED_METHODS: &[&str] = &["CONNECT", "TRACE"];

/// `method` is one a provider call can be made with (not one of [`REFUSED_METHODS`]).
///
/// # Errors
/// [`Error::InvalidRequest`] naming the method and why.
pub(crate) fn check_sendable_method(method: &http::Method) -> Result<(), Error> {
    if REFUSED_METHODS.contains(&method.as_str()) {
        return Err(Error::InvalidRequest(format!(
            "method {} is not one a provider call is made with (CONNECT opens a tunnel, TRACE \
             echoes the request); use GET, POST, PUT, PATCH, DELETE, ...",
            method.as_str()
        )));
    }
    Ok(())
}

/// [`Request::method`] as its name.
mod method_name {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(m: &http::Method, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(m.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<http::Method, D::Error> {
        let name = String::deserialize(d)?;
        super::parse_method(&name).map_err(serde::de::Error::custom)
    }
}

/// A request body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    /// Sent as `application/json`.
    Json(serde_json::Value),
    /// Sent as `text/plain; charset=utf-8`.
    Text(String),
}

/// The call to make: relative to the provider's base URL, never a full URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// HTTP method, upper case (e.g. `POST`); serialised (and stored) as its name, read
    /// back through [`parse_method`].
    #[serde(with = "method_name")]
    pub method: http::Method,
    /// Path (and optional query) below the provider's base URL, starting with `/`.
    pub path: String,
    /// Non-secret headers: credential headers ([`super::headers::is_credential`]) and the
    /// connection's ([`super::headers::is_connection`]) are refused.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Optional body.
    #[serde(default)]
    pub body: Option<Body>,
}

impl Request {
    /// A `POST` of a JSON body to `path`.
    pub fn post_json(path: impl Into<String>, body: serde_json::Value) -> Self {
        Self {
            method: http::Method::POST,
            path: path.into(),
            headers: BTreeMap::new(),
            body: Some(Body::Json(body)),
        }
    }

    /// Check that the request cannot reach an arbitrary URL or carry a secret.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] naming the problem: a path broken by a rule of
    /// [`crate::transport::http::path`] (an absolute URL, `//host`, a dot segment in any spelling, a
    /// backslash, `%2F`, control characters, ...; the message names the rule), a method
    /// over [`MAX_METHOD_LEN`] bytes, not one, or `CONNECT` or `TRACE`, a header name over [`MAX_HEADER_NAME_LEN`]
    /// or a value over [`MAX_HEADER_VALUE_LEN`] bytes, a bad header, a credential header
    /// ([`headers::is_credential`]), `Idempotency-Key` (abide sets it from the item's key)
    /// or a header of the connection ([`headers::CONNECTION_HEADERS`], `Proxy-*`), or a body over
    /// [`MAX_BODY_BYTES`]. A provider's own idempotency-key and auth header names are
    /// checked by [`crate::Config::check_item`].
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |why: String| Err(Error::InvalidRequest(why));
        crate::transport::http::path::check(&self.path)?;
        parse_method(self.method.as_str())?;
        check_sendable_method(&self.method)?;
        if self.headers.len() > MAX_HEADERS {
            return bad(format!("more than {MAX_HEADERS} headers"));
        }
        for (name, value) in &self.headers {
            if name.len() > MAX_HEADER_NAME_LEN {
                return bad(format!(
                    "header name {} is longer than {MAX_HEADER_NAME_LEN} bytes",
                    clip(name)
                ));
            }
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return bad(format!("header name {name:?} is not valid"));
            }
            if value.len() > MAX_HEADER_VALUE_LEN {
                return bad(format!(
                    "header {name:?}: value is {} bytes; the limit is {MAX_HEADER_VALUE_LEN}",
                    value.len()
                ));
            }
            if let Some(fault) = headers::value_fault(value) {
                return bad(format!("header {name:?}: the value {fault}"));
            }
            if http::HeaderValue::from_str(value).is_err() {
                return bad(format!("header {name:?} has an invalid value"));
            }
            if headers::is_credential(name) {
                return bad(format!(
                    "header {name:?} carries a secret; credentials come from the provider's credentials_env"
                ));
            }
            if headers::is_connection(name) || name.eq_ignore_ascii_case("idempotency-key") {
                return bad(format!(
                    "header {name:?} is set by abide or belongs to the connection; remove it \
                     (the idempotency key goes in the item's idempotency_key)"
                ));
            }
        }
        let body_len = match &self.body {
            None => 0,
            Some(Body::Text(t)) => t.len(),
            Some(Body::Json(v)) => serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()),
        };
        if body_len > MAX_BODY_BYTES {
            return bad(format!(
                "body is {body_len} bytes; the limit is {MAX_BODY_BYTES} bytes (1 MiB)"
            ));
        }
        Ok(())
    }
}
