//! Serde for code-keyed maps: keys are strings in files (decimal, or `0x` hex for SMPP).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::Serializer;

use super::VerdictClass;

struct CodeMap;

impl<'de> Visitor<'de> for CodeMap {
    type Value = Vec<(u64, VerdictClass)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map from status code to verdict class")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some((k, v)) = map.next_entry::<Code, VerdictClass>()? {
            out.push((k.0, v));
        }
        Ok(out)
    }
}

struct Code(u64);

impl<'de> de::Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Code;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a code: an integer, decimal string or 0x-hex string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Code, E> {
                Ok(Code(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Code, E> {
                u64::try_from(v)
                    .map(Code)
                    .map_err(|_| E::custom(format!("negative code {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Code, E> {
                let t = v.trim();
                let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => t.parse(),
                };
                parsed
                    .map(Code)
                    .map_err(|_| E::custom(format!("not a code: {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// The entries as `T` keys; a key `T` cannot hold is refused with `what` it must be. Which
/// values of `T` are meaningful is the validator's rule ([`super::ClassifyOverrides::validate`]), so
/// that one message says it for every spelling.
fn narrow<T: TryFrom<u64> + Ord, E: de::Error>(
    entries: Vec<(u64, VerdictClass)>,
    what: &str,
) -> Result<BTreeMap<T, VerdictClass>, E> {
    entries
        .into_iter()
        .map(|(k, v)| {
            T::try_from(k)
                .map(|k| (k, v))
                .map_err(|_| E::custom(format!("code {k}: {what}")))
        })
        .collect()
}

pub(super) fn de_http<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<u16, VerdictClass>, D::Error> {
    narrow(
        d.deserialize_map(CodeMap)?,
        "not an HTTP status code (100-599)",
    )
}

pub(super) fn de_smpp<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<u32, VerdictClass>, D::Error> {
    narrow(
        d.deserialize_map(CodeMap)?,
        "not an SMPP command_status (32 bits)",
    )
}

pub(super) fn ser_http<S: Serializer>(
    m: &BTreeMap<u16, VerdictClass>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(m.iter().map(|(k, v)| (k.to_string(), v)))
}

pub(super) fn ser_smpp<S: Serializer>(
    m: &BTreeMap<u32, VerdictClass>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(m.iter().map(|(k, v)| (format!("0x{k:02x}"), v)))
}
