//! Serialise durations as fractional seconds (`delay_secs: 1.5`) for stable JSON output.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// Serialise a `SystemTime` as RFC 3339 UTC (`2026-06-15T08:02:31Z`), whole seconds.
pub(crate) fn rfc3339<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_rfc3339(*t))
}

/// Serialise `Option<SystemTime>` as RFC 3339 UTC or `null`.
pub(crate) fn opt_rfc3339<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339(t, s),
        None => s.serialize_none(),
    }
}

/// RFC 3339 UTC with whole seconds; times before the epoch are formatted too.
pub(crate) fn format_rfc3339(t: SystemTime) -> String {
    let secs: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    let (y, m, d) = crate::retry_after::civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}
