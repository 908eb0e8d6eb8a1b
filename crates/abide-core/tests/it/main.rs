//! Contract and property tests for abide-core's header parsers (one test binary).

#![allow(clippy::unwrap_used, missing_docs)]

mod dialects;
mod props;
mod ratelimit;
mod resume;
mod retry_after;
mod support;
mod warnings;
