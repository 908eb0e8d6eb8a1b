//! [`SettingError`]: a setting of a [`SessionConfig`](super::SessionConfig) outside its
//! documented range, named by its path.

use std::borrow::Cow;

/// A setting of a [`SessionConfig`](super::SessionConfig) that no run needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingError {
    /// A number outside its documented range (NaN and infinities included).
    #[error("{setting}: {value} is outside {range}")]
    OutOfRange {
        /// Path of the setting in [`SessionConfig`](super::SessionConfig), e.g.
        /// `retry.max_attempts`.
        setting: Cow<'static, str>,
        /// The value given, with its unit (`Duration` as `{:?}`: `1.5s`, `100ms`).
        value: String,
        /// The accepted range, e.g. `1..=10000`, `100ms..=600s`; a bound set by another
        /// setting names it (`retry.backoff.base (2s)..=86400s`).
        range: String,
    },
    /// A classification override the tables cannot take: a status outside 100–599, a
    /// success (HTTP 2xx, SMPP `ESME_ROK`) made anything but a success, or a body or
    /// header rule that cannot match or decide (`classify.body[2].json`, ...).
    #[error("{setting}: {problem}")]
    Classify {
        /// Path of the override, e.g. `classify.http.999`, `classify.smpp.0x0`.
        setting: Cow<'static, str>,
        /// What is wrong with it.
        problem: Cow<'static, str>,
    },
}

impl SettingError {
    /// Path of the setting in [`SessionConfig`](super::SessionConfig) (`retry.max_attempts`, `pacer.headroom`,
    /// `classify.http.999`), for the caller to prefix with where it came from.
    pub fn setting(&self) -> &str {
        match self {
            SettingError::OutOfRange { setting, .. } | SettingError::Classify { setting, .. } => {
                setting
            }
        }
    }
}
