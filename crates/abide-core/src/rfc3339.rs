//! Times as RFC 3339 UTC text (`2026-06-15T08:02:31Z`, `2025-06-15T14:13:20.123Z`), the one
//! formatting every JSON output, record and display of the workspace uses.
//!
//! Formatted by the `time` crate's well-known `Rfc3339` (fractional seconds only when the
//! time has them, trailing zeros dropped). RFC 3339 years have four digits, so a time outside
//! 0000–9999 is written as the nearest end of that span instead of failing (`time` would
//! panic converting it).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serializer;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Latest time an RFC 3339 timestamp can name.
const LAST: &str = "9999-12-31T23:59:59Z";
/// Earliest.
const FIRST: &str = "0000-01-01T00:00:00Z";

/// `t` as RFC 3339 UTC, e.g. `2026-06-15T08:02:31Z`.
///
/// # Examples
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let t = UNIX_EPOCH + Duration::from_millis(1_781_510_551_250);
/// assert_eq!(abide_core::rfc3339::format(t), "2026-06-15T08:02:31.25Z");
/// assert_eq!(abide_core::rfc3339::format(UNIX_EPOCH), "1970-01-01T00:00:00Z");
/// ```
pub fn format(t: SystemTime) -> String {
    to_utc(t)
        .and_then(|d| d.format(&Rfc3339).ok())
        .unwrap_or_else(|| if t >= UNIX_EPOCH { LAST } else { FIRST }.to_owned())
}

/// The UTC date-time of `t`; `None` outside what `time` can hold.
pub(crate) fn to_utc(t: SystemTime) -> Option<OffsetDateTime> {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => OffsetDateTime::UNIX_EPOCH.checked_add(after.try_into().ok()?),
        Err(e) => OffsetDateTime::UNIX_EPOCH.checked_sub(e.duration().try_into().ok()?),
    }
}

/// Serialise a `SystemTime` with [`format()`] (serde `serialize_with`).
///
/// # Errors
/// Only the serializer's own.
pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*t))
}

/// Serialise an `Option<SystemTime>` with [`format()`], or `null`.
///
/// # Errors
/// Only the serializer's own.
pub fn serialize_opt<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => serialize(t, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn whole_seconds_have_no_fraction_and_the_ends_hold() {
        let t = UNIX_EPOCH + Duration::from_secs(1_781_510_551);
        assert_eq!(format(t), "2026-06-15T08:02:31Z");
        assert_eq!(
            format(t + Duration::from_nanos(1)),
            "2026-06-15T08:02:31.000000001Z"
        );
        assert_eq!(
            format(UNIX_EPOCH - Duration::from_secs(1)),
            "1969-12-31T23:59:59Z"
        );
        assert_eq!(format(UNIX_EPOCH + Duration::from_secs(u64::MAX / 4)), LAST);
        assert_eq!(
            format(UNIX_EPOCH + Duration::from_secs(253_402_300_800)),
            LAST
        );
        if let Some(long_ago) = UNIX_EPOCH.checked_sub(Duration::from_secs(70_000_000_000)) {
            assert_eq!(format(long_ago), FIRST);
        }
    }
}
