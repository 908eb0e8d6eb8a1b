//! Errors of abide-fake: [`Error`].

/// Errors of abide-fake.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is missing, malformed or out of range.
    #[error("configuration: {0}")]
    Config(String),
    /// The limits do not make a valid gate set.
    #[error("limits: {0}")]
    Gate(#[from] abide_gate::Error),
}

impl From<abide_core::UnknownName> for Error {
    /// A style or state name that is not one of its spellings.
    fn from(e: abide_core::UnknownName) -> Self {
        Error::Config(e.to_string())
    }
}
