//! # abide-outbox
//!
//! A durable outbound queue that delivers API calls as fast as each provider allows and no
//! faster, and never loses an item to a throttle, a crash or an outage.
//!
//! OWNER NOTE: quick start written once the dispatcher lands.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod config;
pub mod dispatcher;
pub mod error;
pub mod model;
pub mod progress;
pub mod sleep;
pub mod state;
pub mod store;
mod worker;

pub use config::{Config, FailoverConfig, ProviderConfig, RetryConfig, Secret};
pub use dispatcher::{Dispatcher, DispatcherOptions};
pub use error::{Error, Result};
pub use model::{
    AttemptRecord, Body, Completion, Counts, Enqueued, Item, NewItem, Outcome, RemoteCode, Request,
    RequeueFilter, StoredAttempt,
};
pub use progress::{Progress, ProviderProgress, Totals};
pub use sleep::{ManualSleeper, Sleeper, TokioSleeper};
pub use state::{transition, Event, IllegalTransition, State};
pub use store::{AnyStore, PostgresStore, SqliteStore, Store};
