//! Where credentials come from: a small source trait, so the outbox never reads the
//! process environment on its own.
//!
//! The CLI passes [`EnvCredentials`] (the providers file names an environment variable per
//! provider, `credentials_env`); tests and library users pass a [`StaticCredentials`] map
//! or their own source (a secrets manager, a file re-read on rotation). A source is asked
//! again after a `401`, so a rotated credential is picked up without a restart.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};

/// A credential (a token, a password). `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The value, for building the request header (or the bind) only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A source of provider credentials, looked up by the name the providers file gives
/// (`credentials_env`).
pub trait CredentialSource: Debug + Send + Sync {
    /// The current value of credential `name`, or `None` when it is not set. Called at
    /// start and again once after a `401`.
    fn get(&self, name: &str) -> Option<Secret>;
}

/// Reads each credential from the environment variable of that name.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvCredentials;

impl CredentialSource for EnvCredentials {
    fn get(&self, name: &str) -> Option<Secret> {
        std::env::var(name).ok().map(Secret::new)
    }
}

/// A fixed map of credentials (tests, library users holding secrets elsewhere).
///
/// ```
/// use abide_outbox::credentials::StaticCredentials;
/// let creds = StaticCredentials::new().with("SMS_TOKEN", "s3cret");
/// # use abide_outbox::credentials::CredentialSource;
/// assert_eq!(creds.get("SMS_TOKEN").unwrap().expose(), "s3cret");
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticCredentials {
    values: BTreeMap<String, Secret>,
}

impl StaticCredentials {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add (or replace) credential `name`.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.values.insert(name.into(), Secret::new(value));
        self
    }
}

impl CredentialSource for StaticCredentials {
    fn get(&self, name: &str) -> Option<Secret> {
        self.values.get(name).cloned()
    }
}
