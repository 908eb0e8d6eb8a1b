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
    /// The credential in `credentials_env` cannot be sent as a header value (RFC 9110
    /// §5.5): it ends with a line break (read from a file with it), holds a control byte,
    /// or has edge spaces. No request could carry it; trimming it would send another.
    #[error(
        "provider {provider:?}: the credential in its credentials_env variable {variable} \
         cannot be sent in header {header}: {why}; fix the value (it is never shown)"
    )]
    CredentialUnfit {
        /// The provider.
        provider: String,
        /// The credential's name (an environment variable).
        variable: String,
        /// The header it would go in (`authorization`, or the provider's `auth_header`).
        header: String,
        /// What is wrong with it (which byte, where), never what it is.
        why: String,
    },
    /// The provider's request cannot be built (its URL, a configured header).
    #[error("provider {provider:?}: its request cannot be built: {why}")]
    RequestUnbuildable {
        /// The provider.
        provider: String,
        /// What could not be built.
        why: String,
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
