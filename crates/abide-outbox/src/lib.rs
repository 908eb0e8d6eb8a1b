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
//! - [`model`]: [`Item`], [`Request`], [`NewItem`], [`Outcome`], attempt records.
//! - [`state`]: the state machine as one pure table, [`transition`].
//! - [`store`]: the [`Store`] trait; [`SqlStore`] written once over a [`SqlBackend`], as
//!   [`SqliteStore`] (default) and [`PostgresStore`]; [`AnyStore`] (chosen from a URL).
//!   Stores enforce the table in SQL.
//! - [`lock`]: one sender per SQLite file ([`SenderLock`]) and the start-up reclaim of a
//!   dead run's leases ([`open_for_sending`]).
//! - [`keys`]: idempotency keys derived from content ([`assign_content_keys`]).
//! - [`config`]: providers from TOML ([`Config`]); the file names credentials, never holds them.
//! - [`dispatcher`]: [`Dispatcher`]: per provider a claimer, N senders sharing one
//!   [`abide_core::Session`] (pace, pauses, retry budget, rules), and a completer;
//!   [`Progress`] snapshots.
//! - [`transport`]: the [`Transport`] seam: [`HttpTransport`] (reqwest),
//!   [`SmppTransport`] (SMPP 3.4 on rusmpp: one bind per provider, a window of
//!   outstanding `submit_sm`, delivery receipts), [`ScriptedTransport`] (answers from a
//!   script, for tests and benchmarks).
//! - Redis coordination (feature `redis`, default): several nodes sharing each provider's
//!   limit through abide-redis's `RedisCoordination` (abide-core's
//!   [`abide_core::Coordination`] seam), configured by `[coordination]`.
//! - [`credentials`]: where tokens come from ([`EnvCredentials`] at the CLI edge,
//!   [`StaticCredentials`] in tests and for library users).
//! - [`path`]: item paths confined below the provider's base path ([`path::confine`]).
//! - [`receipt`]: delivery receipts ([`Receipt`], [`ReceiptState`], [`ReceiptCounts`]),
//!   stored apart from items and matched to them by `message_id`.
//! - [`echo`]: what may be shown of input: bounded ([`echo::clip`]), without credentials
//!   ([`echo::redact_url`]); abide-core's, re-exported.
//! - [`sleep`]: how waiting is done ([`TokioSleeper`], [`ManualSleeper`] for tests).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod config;
pub mod credentials;
pub mod dispatcher;
pub mod error;
pub mod keys;
pub mod lock;
pub mod model;
pub mod path;
pub mod progress;
pub mod receipt;
pub mod sleep;
pub mod state;
pub mod store;
pub mod transport;

pub use abide_core::echo;
pub use config::{Config, FailoverConfig, PacerSettings, ProviderConfig, RetryConfig, Secret};
pub use credentials::{CredentialSource, EnvCredentials, StaticCredentials};
pub use dispatcher::{Dispatcher, DispatcherOptions, MIN_LEASE_MARGIN};
pub use error::{Error, Result};
pub use keys::{assign_content_keys, content_digest_hex, content_key};
pub use lock::{open_for_sending, SenderLock, SendingStore};
pub use model::{
    AttemptRecord, Body, Completion, Counts, Enqueued, Item, ListFilter, NewItem, Outcome,
    RemoteCode, Request, RequeueFilter, SendMark, StoredAttempt,
};
pub use progress::{LastPause, Progress, ProviderProgress, Totals};
pub use receipt::{Receipt, ReceiptCounts, ReceiptState};
pub use sleep::{ManualSleeper, Sleeper, TokioSleeper};
pub use state::{transition, Event, IllegalTransition, State};
pub use store::{AnyStore, PostgresStore, SqlBackend, SqlStore, SqliteStore, Store};
pub use transport::{
    HttpTransport, Response, ScriptedTransport, SmppStats, SmppTransport, Transport,
};
