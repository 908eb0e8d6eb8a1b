//! The transport seam: a request for one item goes out, an answer (or a transport failure)
//! comes back. Nothing here decides anything: the answer goes to the provider's
//! [`abide_core::Session`].
//!
//! Each transport lives in a folder of its own, with its settings:
//!
//! - [`http`]: [`HttpTransport`] (reqwest, one per provider: base URL, timeout,
//!   credentials, idempotency-key header), [`http::HttpConfig`], and the confinement of
//!   item paths below the base path ([`http::path`]).
//! - `smpp` (feature `smpp`): `SmppTransport`, SMPP 3.4 to an SMSC, one bind per
//!   provider, and its `SmppConfig`.
//! - [`scripted`]: [`ScriptedTransport`], answers from a script, in memory, for tests and
//!   benchmarks; from the providers file (`transport = "scripted"`), a fixed answer.
//!
//! ## Adding a transport
//!
//! One folder and one arm:
//!
//! 1. `transport/<name>/`: the transport (a type implementing [`Transport`]) and its
//!    settings: a type implementing [`TransportSettings`] (senders, attempt timeout,
//!    what an item must be, the preflight, how to build the transport) and a `Kind`
//!    (its name in `transport = "<name>"`, its keys in `[[provider]]`, how they are read,
//!    which shared keys it has no use for);
//! 2. its arm in the `transports!` list in `registry.rs`, which makes the [`TransportConfig`] arm
//!    and registers the `Kind`.
//!
//! The providers file, the checks at enqueue, the preflight, the dispatcher's senders and
//! the coordination key go through [`TransportSettings`] and [`Transport`]; nothing
//! outside the folder names the transport. [`scripted`] is the smallest example.

mod contract;
pub mod http;
pub(crate) mod preflight;
mod registry;
mod response;
pub mod scripted;
#[cfg(feature = "smpp")]
pub mod smpp;

pub use self::http::{target_url, HttpConfig, HttpTransport};
pub(crate) use contract::KindOf;
pub use contract::{
    BuildEnv, CloseFuture, SendFuture, Transport, TransportSettings, TransportStats,
};
pub use preflight::Preflight;
pub use registry::TransportConfig;
pub(crate) use registry::{Kind, KINDS};
pub use response::{Response, MAX_CLASSIFIED_BODY};
pub use scripted::{ScriptedConfig, ScriptedTransport, Sent};
#[cfg(feature = "smpp")]
pub use smpp::{SmppConfig, SmppStats, SmppTransport};
