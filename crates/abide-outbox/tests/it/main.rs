//! The one integration test binary of abide-outbox.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod bodies;
mod connect;
mod delivery;
mod dialects;
mod drain_race;
mod faults;
mod migrations;
mod refused;
mod same_decisions;
mod schemas;
mod slow_provider;
mod smpp;
mod smpp_fake;
mod stop_during_fault;
mod store_conformance;
mod stored_text;
mod support;
mod virtual_time;
