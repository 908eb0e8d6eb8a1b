//! The transports compiled in: [`TransportConfig`] (one arm per transport, holding its
//! settings) and the providers file's list of kinds.

use super::contract::TransportSettings;
#[cfg(feature = "smpp")]
use super::smpp::SmppConfig;
use super::{HttpConfig, ScriptedConfig};
use crate::toml_keys::{Keys, TableError};

/// The transports compiled in: each makes one arm of [`TransportConfig`] (holding the
/// transport's settings) and registers its `Kind` for the providers file.
macro_rules! transports {
    ($( $(#[cfg($cfg:meta)])? $arm:ident($settings:ty) = $kind:expr ),+ $(,)?) => {
        /// How a provider is reached: the settings of its transport (`transport = "..."` in
        /// the providers file; `http` when absent).
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum TransportConfig {
            $(
                $(#[cfg($cfg)])?
                #[doc = concat!("See [`", stringify!($settings), "`].")]
                $arm($settings),
            )+
        }

        impl TransportConfig {
            /// The settings, as the engine reads them.
            pub fn settings(&self) -> &dyn TransportSettings {
                match self {
                    $( $(#[cfg($cfg)])? Self::$arm(s) => s, )+
                }
            }

            /// The settings, to change them before a run ([`TransportSettings::set_senders`]).
            pub fn settings_mut(&mut self) -> &mut dyn TransportSettings {
                match self {
                    $( $(#[cfg($cfg)])? Self::$arm(s) => s, )+
                }
            }
        }

        /// Every transport compiled in, as the providers file names them.
        pub(crate) const KINDS: &[Kind] = &[ $( $(#[cfg($cfg)])? Kind {
            name: $kind.name,
            keys: $kind.keys,
            unused_shared: $kind.unused_shared,
            read: |provider, keys| ($kind.read)(provider, keys).map(TransportConfig::$arm),
        }, )+ ];
    };
}

transports! {
    Http(HttpConfig) = super::http::KIND,
    #[cfg(feature = "smpp")]
    Smpp(SmppConfig) = super::smpp::KIND,
    Scripted(ScriptedConfig) = super::scripted::KIND,
}

/// A transport as the providers file names it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    /// Its name in `transport = "..."`.
    pub(crate) name: &'static str,
    /// Its own keys in `[[provider]]` (its file struct's fields).
    pub(crate) keys: fn() -> &'static [&'static str],
    /// Shared keys it has no use for, as written (`rate_limit_dialect`,
    /// `pacer.use_rate_limit_headers`, `classify.http`): refused by name.
    pub(crate) unused_shared: &'static [&'static str],
    /// Read and check its keys for provider `provider`.
    pub(crate) read: fn(&str, &Keys) -> std::result::Result<TransportConfig, TableError>,
}
