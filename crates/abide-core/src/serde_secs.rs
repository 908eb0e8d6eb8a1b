//! Serialise durations as fractional seconds (`delay_secs: 1.5`) for stable JSON output.

use std::time::Duration;

use serde::Serializer;

/// Serialise a `Duration` as a number of seconds.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
pub(crate) fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Serialise `Option<Duration>` as a number of seconds or `null`.
pub(crate) fn opt<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}
