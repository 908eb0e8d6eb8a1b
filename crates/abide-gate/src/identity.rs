//! Who a request comes from: [`Identity`], the [`Identify`] trait and [`BearerKeys`].

use std::collections::HashMap;
use std::fmt;

use http::request::Parts;

/// Who a request comes from, as far as the gates care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The caller's API key (never logged; see [`crate::safe_trace`]).
    pub key: String,
    /// The account the key belongs to, for account-scoped gates.
    pub account: Option<String>,
}

/// Finds the [`Identity`] of a request. `None` means "not authenticated": the gate lets such
/// a request through untouched so the application can answer it (typically 401).
pub trait Identify: Send + Sync + 'static {
    /// Identify the caller from the request head.
    fn identify(&self, parts: &Parts) -> Option<Identity>;
}

impl<F> Identify for F
where
    F: Fn(&Parts) -> Option<Identity> + Send + Sync + 'static,
{
    fn identify(&self, parts: &Parts) -> Option<Identity> {
        self(parts)
    }
}

/// Identifies callers by `Authorization: Bearer <key>` against a fixed table of keys and
/// their accounts.
#[derive(Clone, Default)]
pub struct BearerKeys {
    keys: HashMap<String, Option<String>>,
}

impl fmt::Debug for BearerKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are secrets: show only how many there are.
        f.debug_struct("BearerKeys")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl BearerKeys {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accept `key`, belonging to `account`.
    pub fn with_key(mut self, key: &str, account: Option<&str>) -> Self {
        self.keys.insert(key.to_owned(), account.map(str::to_owned));
        self
    }

    /// Look up the bearer token of a request head.
    pub fn lookup(&self, headers: &http::HeaderMap) -> Option<Identity> {
        let token = bearer_token(headers)?;
        let account = self.keys.get(token)?;
        Some(Identity {
            key: token.to_owned(),
            account: account.clone(),
        })
    }
}

impl Identify for BearerKeys {
    fn identify(&self, parts: &Parts) -> Option<Identity> {
        self.lookup(&parts.headers)
    }
}

/// The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1).
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}
