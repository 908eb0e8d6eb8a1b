//! Serde helpers: times as RFC 3339 strings (UTC, `Z`), durations as whole milliseconds,
//! so that JSON readers (`jq`, dashboards) need no knowledge of Rust's `SystemTime`.

use std::time::{Duration, SystemTime};

use serde::Serializer;

/// RFC 3339 (RFC 3339 §5.6), e.g. `2025-06-15T14:13:20.123Z`.
pub(crate) fn format(t: SystemTime) -> String {
    abide_core::rfc3339::format(t)
}

pub(crate) fn rfc3339<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*t))
}

pub(crate) fn rfc3339_opt<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&format(*t)),
        None => s.serialize_none(),
    }
}

pub(crate) fn display_opt<S: Serializer, T: std::fmt::Display>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

pub(crate) fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub(crate) fn millis_opt<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => millis(d, s),
        None => s.serialize_none(),
    }
}
