//! What the engine needs of a transport ([`Transport`]) and of its settings
//! ([`TransportSettings`]).

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use abide_core::Clock;
use serde::Serialize;

use super::preflight::Preflight;
use super::response::Response;
#[cfg(feature = "smpp")]
use super::smpp::SmppStats;
use crate::credentials::CredentialSource;
use crate::error::Result;
use crate::model::{Item, NewItem};
use crate::receipt::ReceiptInbox;
use crate::toml_keys::{Keys, TableError};

/// What the engine needs of a transport's settings (one implementation per transport).
pub trait TransportSettings: Debug + Send + Sync {
    /// Concurrent senders the provider gets (HTTP `concurrency`, an SMPP `window`).
    fn concurrency(&self) -> usize;

    /// Take `senders` concurrent senders instead of the configured number, where the
    /// operator chooses them (`abide send --workers`); a transport whose senders the remote
    /// bounds (an SMPP window, negotiated with the SMSC) keeps its own, as does the default.
    fn set_senders(&mut self, _senders: usize) {}

    /// Longest time one attempt may take (HTTP `timeout_secs`; SMPP the wait for the bind
    /// and then for the response). A lease must outlast it by [`crate::MIN_LEASE_MARGIN`].
    fn attempt_timeout(&self) -> Duration;

    /// Where the provider is reached, as it may be shown (`https://api.example/v1`,
    /// `smpp://smsc.example:2775`); never a credential.
    fn endpoint(&self) -> String;

    /// The setting that names this provider's credential, as a user would fix it
    /// (`credentials_env = "SMS_TOKEN"`); `None` when it has none.
    fn credential_setting(&self) -> Option<String> {
        None
    }

    /// Check that `item` is one this provider can send (its path, its headers, an SMS
    /// that fits), before it is stored.
    ///
    /// # Errors
    /// [`crate::Error::InvalidRequest`] or [`crate::Error::Path`] naming `provider` and
    /// what is wrong.
    fn check_item(&self, provider: &str, item: &NewItem) -> Result<()>;

    /// Why the provider cannot start sending with the credentials in `credentials`
    /// (unset, or unfit for the protocol); `Ok` by default.
    ///
    /// # Errors
    /// The [`Preflight`] naming the provider and the setting.
    fn preflight(
        &self,
        _provider: &str,
        _credentials: &dyn CredentialSource,
    ) -> std::result::Result<(), Preflight> {
        Ok(())
    }

    /// Whether the remote sends delivery receipts for the messages it accepts (SMPP
    /// `deliver_sm`): a drained run may wait for them ([`crate::Dispatcher::run_drained`]).
    /// `false` by default.
    fn delivers_receipts(&self) -> bool {
        false
    }

    /// Who the provider's limit belongs to (the account a credential names): several
    /// nodes share one limit per account, so it is part of the coordination key. `None`
    /// when the provider has no account.
    fn account(&self, credentials: &dyn CredentialSource) -> Option<String>;

    /// The transport for provider `provider`.
    fn build(&self, provider: &str, env: &BuildEnv) -> Arc<dyn Transport>;
}

/// What a transport may be built with ([`TransportSettings::build`]).
#[derive(Debug, Clone)]
pub struct BuildEnv {
    /// The HTTP client (redirects off), shared by every HTTP provider.
    pub client: reqwest::Client,
    /// Where credentials are read.
    pub credentials: Arc<dyn CredentialSource>,
    /// Bytes of each response body read before the rest is dropped.
    pub max_response_body: usize,
    /// The dispatcher's clock.
    pub clock: Arc<dyn Clock>,
}

/// A transport as the providers file names it, reading its own settings `S` (the
/// registry wraps them in their [`TransportConfig`](super::TransportConfig) arm).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KindOf<S> {
    /// Its name in `transport = "..."`.
    pub(crate) name: &'static str,
    /// Its own keys in `[[provider]]` (its file struct's fields).
    pub(crate) keys: fn() -> &'static [&'static str],
    /// Shared keys it has no use for, as written (`rate_limit_dialect`,
    /// `pacer.use_rate_limit_headers`, `classify.http`): refused by name.
    pub(crate) unused_shared: &'static [&'static str],
    /// Read and check its keys for provider `provider`.
    pub(crate) read: fn(&str, &Keys) -> std::result::Result<S, TableError>,
}

/// What a transport reports of itself beyond the counters every provider has;
/// serialised as `{"<transport>": {...}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TransportStats {
    /// What an SMPP bind has seen (binds, drops, timeouts, receipts).
    #[cfg(feature = "smpp")]
    Smpp(SmppStats),
}

impl TransportStats {
    /// An SMPP bind's counters, when these are.
    #[cfg(feature = "smpp")]
    pub fn smpp(&self) -> Option<&SmppStats> {
        match self {
            TransportStats::Smpp(s) => Some(s),
        }
    }
}

/// A boxed, `Send` future returned by [`Transport::send`].
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Response> + Send + 'a>>;

/// A boxed, `Send` future returned by [`Transport::close`].
pub type CloseFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Sends one item's request to its provider.
pub trait Transport: Debug + Send + Sync {
    /// Send `item` once and return the answer. Never retries: retrying is the session's
    /// decision.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request; the item's lease and idempotency key make
    /// a later resend safe.
    fn send<'a>(&'a self, item: &'a Item) -> SendFuture<'a>;

    /// Why `item` can never be sent by this transport (a path that leaves the base URL, a
    /// message no SMS encoding holds), or `None` (the default). Validated at enqueue, so
    /// only a row edited by hand fails here. Senders ask before anything goes out and fail
    /// such an item at once: retrying cannot help, and a request never made is neither an
    /// attempt nor a host outage.
    fn unsendable(&self, _item: &Item) -> Option<String> {
        None
    }

    /// Fetch credentials anew (after a `401`). The default does nothing.
    fn refresh_credentials(&self) {}

    /// Delivery receipts the remote sends on its own (SMPP `deliver_sm`), to be stored
    /// and then acknowledged ([`crate::receipt::InboundReceipt::stored`]); `None` (the default) for
    /// transports without them. Called by the dispatcher when a run starts; a transport
    /// may start its connection then, so receipts flow before the first send.
    fn receipts(&self) -> Option<ReceiptInbox> {
        None
    }

    /// Resolves when a send would go out or fail at once, not wait for a connection
    /// being made (SMPP: the bind in progress, up to `pdu_timeout`); the default at once.
    /// Senders await it before an item is marked as sent, so a bind refused for good
    /// ([`Transport::suspended`]) charges no item an attempt.
    fn ready(&self) -> CloseFuture<'_> {
        Box::pin(std::future::ready(()))
    }

    /// Why the transport will not send again this run (an SMPP bind refused for good),
    /// naming what to fix; `None` (the default) while it may. The dispatcher stops
    /// claiming for a suspended provider; its items wait.
    fn suspended(&self) -> Option<String> {
        None
    }

    /// Why this transport cannot start sending (its credential unset or unfit for the
    /// protocol); `Ok` by default. Run by [`crate::Dispatcher::new`] before anything is
    /// claimed.
    ///
    /// # Errors
    /// The [`Preflight`] naming the provider and the setting.
    fn preflight(&self) -> std::result::Result<(), Preflight> {
        Ok(())
    }

    /// What the last attempt that got no answer failed with (a refused connection, a DNS
    /// error, a timeout), as it may be shown: never a credential nor a URL's query.
    /// `None` (the default) when the transport keeps nothing.
    fn last_failure(&self) -> Option<String> {
        None
    }

    /// What the transport has seen of the remote beyond the answers (SMPP: binds, drops,
    /// timeouts, receipts); `None` (the default) when it has nothing to add.
    fn stats(&self) -> Option<TransportStats> {
        None
    }

    /// Say goodbye to the remote (SMPP `unbind`) and stop. The default does nothing.
    fn close(&self) -> CloseFuture<'_> {
        Box::pin(std::future::ready(()))
    }
}
