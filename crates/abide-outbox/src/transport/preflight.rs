//! Why a provider cannot start sending as configured: checked when a dispatcher is made
//! ([`crate::Dispatcher::new`], [`crate::preflight`]), before anything is
//! claimed, rather than found out item by item.

use std::time::Duration;

/// A provider that cannot send as configured. Names the provider and the setting, never
/// a credential's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Preflight {
    /// The lease is shorter than the provider's longest attempt plus
    /// [`crate::MIN_LEASE_MARGIN`]: a sender hands back, unsent, an item whose lease would
    /// run out during its request, so every claim would be handed back and nothing sent.
    #[error(
        "provider {provider:?}: the lease ({lease:?}) must be at least the request timeout \
         ({attempt_timeout:?}) + {:?}; lengthen the lease to {least:?} or shorten the timeout",
        *least - *attempt_timeout
    )]
    LeaseTooShort {
        /// The provider.
        provider: String,
        /// The lease asked for.
        lease: Duration,
        /// The provider's longest attempt (HTTP `timeout_secs`; SMPP two `pdu_timeout`s).
        attempt_timeout: Duration,
        /// The shortest lease that works.
        least: Duration,
    },
    /// The credential the provider names is unset or empty: every request would be
    /// refused (an HTTP `401` and the item `DEFERRED`, an SMPP bind refused).
    #[error(
        "provider {provider:?}: its {setting} variable {variable} is unset or empty (the \
         value is never stored or logged)"
    )]
    CredentialMissing {
        /// The provider.
        provider: String,
        /// The setting that names it (`credentials_env`, `password_env`).
        setting: &'static str,
        /// The credential's name (an environment variable).
        variable: String,
    },
    /// An SMPP password that no bind can carry: not 1 to `max` printable ASCII characters
    /// (SMPP 3.4 §4.1.1: a C-Octet String of 9 octets with its NUL). The SMSC would
    /// refuse every bind.
    #[error(
        "provider {provider:?}: the password in its password_env variable {variable} is not \
         1-{max} printable ASCII characters, the most a bind carries (SMPP 3.4 §4.1: 9 octets \
         with the NUL); the SMSC would refuse every bind (the value is never shown)"
    )]
    PasswordUnfit {
        /// The provider.
        provider: String,
        /// The credential's name.
        variable: String,
        /// The longest password, in characters.
        max: usize,
    },
}
