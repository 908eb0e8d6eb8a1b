//! Why a proxy cannot start: [`ProxyError`].

/// A proxy that cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// A provider cannot be proxied as configured.
    #[error("provider {provider:?}: {problem}")]
    Config {
        /// The provider's name.
        provider: String,
        /// What is wrong.
        problem: String,
    },
    /// An option is out of range.
    #[error("proxy option {option}: {problem}")]
    Option {
        /// The option.
        option: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The HTTP client could not be built (TLS back-end initialisation).
    #[error("HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// Listening failed.
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}
