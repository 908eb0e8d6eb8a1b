//! Stable names of enums: the spelling stored in a database, written in a providers file,
//! shown in JSON and logs, and parsed back.
//!
//! [`named_enum!`](crate::named_enum) declares an enum together with its name table, so a
//! variant and its spelling are written once: `as_str`, `ALL` (every variant, in order),
//! `NAMES` (every accepted spelling), `Display`, and `FromStr` (and `TryFrom<String>`, for
//! serde's `try_from`) with an [`UnknownName`] that names the input and what was expected. A variant may accept aliases after its stable
//! name (`ImfFixdate = "imf-fixdate" | "http-date"`); `as_str` gives the first.
//!
//! A macro rather than `strum`'s derives: the error must name the setting and list the
//! choices (the rule for bad input), which `strum::ParseError` does not, and the table is
//! a dozen lines that need no proc-macro build.

/// A name that is not one of an enum's spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}: expected one of {}", expected.join(", "))]
#[non_exhaustive]
pub struct UnknownName {
    /// What was being named, e.g. `delay reason`.
    pub kind: &'static str,
    /// The input, cut after 64 bytes.
    pub value: String,
    /// Every accepted spelling.
    pub expected: &'static [&'static str],
}

impl UnknownName {
    /// `value` was not one of `expected` (spellings of a `kind`).
    pub fn new(kind: &'static str, value: &str, expected: &'static [&'static str]) -> Self {
        let mut end = value.len().min(64);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        Self {
            kind,
            value: value[..end].to_owned(),
            expected,
        }
    }
}

/// Declare an enum with its stable names (see [`crate::names`]).
///
/// ```
/// abide_core::named_enum! {
///     /// A colour.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Colour("colour") {
///         /// Red.
///         Red = "red",
///         /// Grey, either spelling.
///         Grey = "grey" | "gray",
///     }
/// }
/// assert_eq!(Colour::Grey.as_str(), "grey");
/// assert_eq!("gray".parse::<Colour>(), Ok(Colour::Grey));
/// assert_eq!(Colour::ALL, [Colour::Red, Colour::Grey]);
/// assert_eq!(Colour::NAMES, ["red", "grey", "gray"]);
/// assert!("Red".parse::<Colour>().is_err()); // exact, unless declared `("colour", ignore_ascii_case)`
/// let e = "blue".parse::<Colour>().unwrap_err();
/// assert_eq!(e.to_string(), r#"unknown colour "blue": expected one of red, grey, gray"#);
/// ```
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident ($kind:literal $(, $case:ident)?) {
            $( $(#[$vm:meta])* $v:ident = $s:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$m])*
        $vis enum $name { $( $(#[$vm])* $v ),+ }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [Self; [$(stringify!($v)),+].len()] = [$(Self::$v),+];

            /// Every accepted spelling: each variant's stable name, then its aliases.
            pub const NAMES: &'static [&'static str] = &[$($s $(, $alias)*),+];

            /// The stable name, as stored and shown.
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),+ }
            }

            /// The variant spelled exactly `s` (a stable name or an alias).
            pub fn from_name(s: &str) -> ::core::option::Option<Self> {
                match s {
                    $( $s $(| $alias)* => Some(Self::$v), )+
                    _ => None,
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::core::str::FromStr for $name {
            type Err = $crate::names::UnknownName;

            /// # Errors
            /// [`UnknownName`]($crate::names::UnknownName) naming the input and every
            /// accepted spelling.
            fn from_str(s: &str) -> ::core::result::Result<Self, Self::Err> {
                $crate::named_enum!(@lookup $($case)? s)
                    .ok_or_else(|| $crate::names::UnknownName::new($kind, s, Self::NAMES))
            }
        }

        impl ::core::convert::TryFrom<::std::string::String> for $name {
            type Error = $crate::names::UnknownName;

            /// As `FromStr` (for `#[serde(try_from = "String")]`).
            fn try_from(s: ::std::string::String) -> ::core::result::Result<Self, Self::Error> {
                s.parse()
            }
        }
    };
    (@lookup $s:ident) => { Self::from_name($s) };
    // Surrounding whitespace and ASCII case ignored (names a person writes by hand).
    (@lookup ignore_ascii_case $s:ident) => {
        Self::from_name(&$s.trim().to_ascii_lowercase())
    };
}

#[cfg(test)]
mod tests {
    use super::UnknownName;
    use crate::{CoordinationMode, DelayReason, HandBackReason, VerdictClass};

    /// These spellings are stored in databases and read back: they never change.
    #[test]
    fn stored_names_are_pinned_and_read_back() {
        assert_eq!(
            DelayReason::NAMES,
            [
                "honoured",
                "floored",
                "capped",
                "unparseable",
                "absent",
                "lease_expired"
            ]
        );
        assert_eq!(
            VerdictClass::NAMES,
            [
                "success",
                "throttle",
                "retry",
                "refresh_credentials",
                "terminal",
                "out_of_quota",
                "unknown"
            ]
        );
        assert_eq!(
            HandBackReason::NAMES,
            [
                "provider_paused",
                "lease_near_expiry",
                "retry_budget_exhausted",
                "shutdown"
            ]
        );
        assert_eq!(CoordinationMode::NAMES, ["local", "redis", "fallback"]);
        for r in DelayReason::ALL {
            assert_eq!(r.as_str().parse(), Ok(r));
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        for c in VerdictClass::ALL {
            assert_eq!(c.as_str().parse(), Ok(c));
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        for r in HandBackReason::ALL {
            assert_eq!(r.as_str().parse(), Ok(r));
        }
        let e = "Honoured".parse::<DelayReason>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown delay reason \"Honoured\": expected one of honoured, floored, capped, \
             unparseable, absent, lease_expired"
        );
    }

    #[test]
    fn a_long_or_multibyte_value_is_cut_on_a_char_boundary() {
        let e = UnknownName::new("x", &"é".repeat(100), &["a"]);
        assert_eq!(e.value, "é".repeat(32));
    }
}
