//! The scale-out tests, in a binary of their own: three real processes sharing one limit
//! each, with floors on the busiest second and on delivered ÷ (time × limit)
//! (`support::services`).
//! Cargo runs test binaries one after another, so no test of `tests/it` runs beside them,
//! and [`ONE_AT_A_TIME`] keeps the two of this binary apart: each starts three nodes and a
//! provider, and two such runs at once on a 2-core machine only measure each other.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod send;
mod serve;
#[path = "../it/support/mod.rs"]
mod support;

/// Held by each throughput test for its whole run.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
