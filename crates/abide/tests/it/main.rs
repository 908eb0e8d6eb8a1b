//! The one integration test binary of the `abide` CLI: the real binary run as a child
//! process against fakes on loopback, one module per subcommand or theme, helpers in
//! `support/`. One binary links once and runs its tests on the test harness's threads, as
//! ripgrep's `tests/tests.rs` does; every test owns its temp dir, database and Redis prefix,
//! and none sets an environment variable of this process. The two
//! throughput tests, which need the machine to themselves, are `tests/scale_out/`.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod check;
mod completions_man;
mod crash;
mod demo;
mod dialects;
mod docs;
mod hardening;
mod inspect;
mod inspect_bodies;
mod log_format;
mod provider;
mod provider_delay;
mod proxy;
mod proxy_ops;
mod send;
mod serve;
mod serve_listener;
mod sim;
mod smpp;
mod status;
mod support;
mod throttle_styles;
