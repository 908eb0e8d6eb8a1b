//! What a vendor rule found ([`Finding`]) and a delay read from a body ([`BodyDelay`]).

use std::time::Duration;

use serde_json::Value;

use crate::classify::duration;
use crate::classify::verdict::VerdictClass;

/// A body (or vendor header) that decides the class, whatever the status says.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// [`VerdictClass::Throttle`] or [`VerdictClass::OutOfQuota`].
    pub class: VerdictClass,
    /// The reason code's tail, e.g. `shopify_throttled` (the verdict's reason is
    /// `http_<status>_<tail>`).
    pub tail: String,
    /// A delay the vendor's shape itself gives (Shopify's cost model), before any clamp.
    pub delay: Option<BodyDelay>,
}

impl Finding {
    pub(super) fn throttle(tail: impl Into<String>) -> Self {
        Self {
            class: VerdictClass::Throttle,
            tail: tail.into(),
            delay: None,
        }
    }

    pub(super) fn out_of_quota(tail: impl Into<String>) -> Self {
        Self {
            class: VerdictClass::OutOfQuota,
            tail: tail.into(),
            delay: None,
        }
    }
}

/// A delay read from a body, before any floor or cap.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyDelay {
    /// A readable delay; `raw` is what was read, for the log.
    Given {
        /// The delay, at most [`duration::MAX_DURATION`].
        delay: Duration,
        /// The field and its value as received.
        raw: String,
    },
    /// The field is there but its value is no delay (negative, garbled).
    Unreadable {
        /// The field and its value as received.
        raw: String,
    },
}

/// Most bytes of a raw value kept for the log.
const MAX_RAW: usize = 128;

impl BodyDelay {
    /// A number of seconds at `field`.
    pub(crate) fn from_json(field: &str, v: &Value) -> Option<Self> {
        let raw = format!("{field}={}", cut(&v.to_string()));
        let delay = match v {
            Value::Number(n) => n.as_f64().and_then(duration::from_secs_f64),
            Value::String(s) => duration::parse_go(s),
            Value::Null => return None,
            _ => None,
        };
        Some(match delay {
            Some(delay) => BodyDelay::Given { delay, raw },
            None => BodyDelay::Unreadable { raw },
        })
    }
}

pub(super) fn cut(s: &str) -> &str {
    let mut end = s.len().min(MAX_RAW);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
