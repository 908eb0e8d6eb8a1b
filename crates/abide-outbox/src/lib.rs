//! # abide-outbox
//!
//! A durable outbound queue that delivers API calls as fast as each provider allows and no
//! faster, and never loses an item to a throttle, a crash or an outage.
//!
//! ```no_run
//! # async fn demo() -> abide_outbox::Result<()> {
//! use abide_outbox::{Config, Dispatcher, DispatcherOptions, NewItem, Request, SqliteStore};
//! use std::sync::Arc;
//!
//! let config = Config::load("providers.toml")?;
//! let store = SqliteStore::open("outbox.db").await?;
//! let outbox = Dispatcher::new(store, config, Arc::new(abide_core::SystemClock), DispatcherOptions::default())?;
//! let msg = Request::post_json("/v1/messages", serde_json::json!({"to": "+15550100", "text": "hi"}));
//! outbox.enqueue(&[NewItem::new("sms-primary", msg).with_idempotency_key("order-42")]).await?;
//! let report = outbox.run_until_drained().await?;
//! println!("delivered {} at {:.0}/s", report.totals.delivered, report.achieved_rate());
//! # Ok(()) }
//! ```
//!
//! ## Map
//!
//! Two ideas, and one folder per transport.
//!
//! **The durable queue**: what is stored and the rules of storing it.
//! - [`model`]: [`Item`], [`Request`], [`NewItem`], [`Outcome`], attempt records (typed:
//!   [`RemoteCode`], [`abide_core::VerdictClass`], [`DelayReason`], stored as text).
//! - [`state`]: the state machine as one pure table, [`transition`].
//! - [`store`]: the [`Store`] trait; [`SqlStore`] written once over a [`SqlBackend`], as
//!   `SqliteStore` (feature `sqlite`, default) and `PostgresStore` (feature `postgres`);
//!   [`AnyStore`] (chosen from a URL). Stores enforce the table in SQL.
//! - [`lock`]: one sender per SQLite file ([`SenderLock`]) and the start-up reclaim of a
//!   dead run's leases ([`open_for_sending`]).
//! - [`keys`]: idempotency keys derived from content ([`assign_content_keys`], streamed
//!   [`ContentKeys`]) and one key per message over a stream ([`KeyUses`]).
//! - [`receipt`]: delivery receipts ([`Receipt`], [`ReceiptState`], [`ReceiptCounts`]),
//!   stored apart from items and matched to them by `message_id`.
//!
//! **Its engine**: delivering what the queue holds, by the rules of a run.
//! - [`config`]: providers from TOML ([`Config`]); the file names credentials, never
//!   holds them; the session's rules checked by [`abide_core::SessionConfig::validate`].
//! - [`dispatcher`]: [`Dispatcher`]: per provider a claimer, N senders sharing one
//!   [`abide_core::Session`] (pace, pauses, retry budget, rules), and a writer;
//!   [`preflight`] before a run; [`Dispatcher::run_until`] and the drained run
//!   ([`Dispatcher::run_drained`], [`Dispatcher::is_drained`]); [`Progress`] snapshots.
//! - Redis coordination (feature `redis`): several nodes sharing each provider's limit
//!   through abide-redis's `RedisCoordination` (abide-core's [`abide_core::Coordination`]
//!   seam), configured by `[coordination]`.
//! - [`credentials`]: where tokens come from ([`EnvCredentials`] at the CLI edge,
//!   [`StaticCredentials`] in tests and for library users).
//! - [`error`]: [`Error`] and its [`ErrorKind`].
//! - [`echo`]: what may be shown of input: bounded ([`echo::clip`]), without credentials
//!   ([`echo::redact_url`]); abide-core's, re-exported.
//! - [`sleep`]: how waiting is done ([`TokioSleeper`], [`ManualSleeper`] for tests).
//!
//! **The transports** ([`transport`], [`Transport`], [`TransportConfig`]; adding one is a
//! folder and an enum arm, see the module docs): `transport/http/` ([`HttpTransport`],
//! and item paths confined below the base path), `transport/smpp/` (feature `smpp`:
//! `SmppTransport`, SMPP 3.4 on rusmpp: one bind per provider, a window of outstanding
//! `submit_sm`, delivery receipts), `transport/scripted/` ([`ScriptedTransport`]: answers
//! from a script, for tests and benchmarks).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod config;
pub mod credentials;
pub mod dispatcher;
pub mod error;
pub mod keys;
pub mod lock;
pub mod model;
pub mod progress;
pub mod receipt;
pub mod sleep;
pub mod state;
pub mod store;
pub mod transport;

mod toml_keys;

pub use abide_core::echo;
pub use config::{read_bounded, MAX_FILE_BYTES};
pub use config::{Config, FailoverConfig, PacerSettings, ProviderConfig, RetryConfig};
pub use credentials::{CredentialSource, EnvCredentials, Secret, StaticCredentials};
pub use dispatcher::{
    preflight, Dispatcher, DispatcherOptions, Ending, Feed, FeedCloser, FeedState,
    DEFAULT_UNREACHABLE_AFTER, MIN_LEASE_MARGIN,
};
pub use error::{DatabaseError, Error, ErrorKind, Result};
pub use keys::{assign_content_keys, content_digest_hex, content_key, ContentKeys, KeyUses};
pub use lock::{open_for_sending, SenderLock, SendingStore};
pub use model::{
    parse_method, AttemptRecord, Body, Completion, Counts, DelayReason, Enqueued, Item, ListFilter,
    NewItem, Outcome, RemoteCode, Request, RequeueFilter, SendMark, StoredAttempt,
};
pub use progress::{LastPause, Progress, ProviderProgress, Totals};
pub use receipt::{InboundReceipt, Receipt, ReceiptCounts, ReceiptInbox, ReceiptState};
pub use sleep::{ManualSleeper, Sleeper, TokioSleeper};
pub use state::{transition, Event, IllegalTransition, State, CANCELLED_REASON};
#[cfg(feature = "postgres")]
pub use store::PostgresStore;
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::{AnyStore, SqlBackend, SqlStore, Store};
pub use transport::{
    HttpConfig, HttpTransport, Preflight, Response, ScriptedConfig, ScriptedTransport, Transport,
    TransportConfig, TransportSettings, TransportStats,
};
#[cfg(feature = "smpp")]
pub use transport::{SmppConfig, SmppStats, SmppTransport};
