//! The scale-out tests, in a binary of their own: they assert delivered ÷ (time × limit)
//! ≥ 0.90 for three real processes sharing one limit, which holds only with the machine to
//! themselves. Cargo runs test binaries one after another, so no test of `tests/it` runs
//! beside them, and [`ONE_AT_A_TIME`] keeps the two of this binary apart.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod send;
mod serve;
#[path = "../it/support/mod.rs"]
mod support;

/// Held by each throughput test for its whole run.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
