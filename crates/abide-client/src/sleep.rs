//! How waiting is done: [`Sleeper`] and its tokio and manual implementations, shared with
//! every other driver of an `abide_core::Session` (see [`abide_core::sleep`]).

pub use abide_core::sleep::{ManualSleeper, SleepFuture, Sleeper, TokioSleeper};
