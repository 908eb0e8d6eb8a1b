//! JSON objects with each name once: an item's `body` and `headers`.
//!
//! RFC 8259 §4 leaves a repeated name to the parser ("many implementations report the last
//! name/value pair only"; others the first), and I-JSON (RFC 7493 §2.3) forbids it. A body
//! `{"to":"+1555…01","to":"+1555…02"}` would be stored as abide read it and could be read
//! otherwise by the provider, so such an item is refused, naming the key and where it is.
//! Header names are compared ignoring case (RFC 9110 §5.1).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use abide_outbox::echo;

/// `body`: any JSON value, refused if an object in it repeats a name; `null` is no body
/// (as an absent one).
pub(crate) fn body<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Unique::deserialize_at(d, "body").map(|v| (!v.is_null()).then_some(v))
}

/// `headers`: names to values, refused if a name appears twice in any spelling.
pub(crate) fn headers<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of header names to string values")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            let mut seen = std::collections::HashSet::new();
            while let Some((k, v)) = m.next_entry::<String, String>()? {
                if !seen.insert(k.to_ascii_lowercase()) {
                    return Err(de::Error::custom(format!(
                        "header {} given twice (header names ignore case)",
                        echo::clip(&k)
                    )));
                }
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

/// A JSON value whose objects each name a key once; `path` is where it is (`body.to`).
struct Unique<'p> {
    path: &'p str,
}

impl Unique<'_> {
    fn deserialize_at<'de, D: Deserializer<'de>>(d: D, path: &str) -> Result<Value, D::Error> {
        d.deserialize_any(Unique { path })
    }
}

/// One element of an array or an object, deserialized with its path.
struct At(String);

impl<'de> de::DeserializeSeed<'de> for At {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Unique::deserialize_at(d, &self.0)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = s.next_element_seed(At(format!("{}[{}]", self.path, out.len())))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = m.next_key::<String>()? {
            let path = format!("{}.{k}", self.path);
            if out.contains_key(&k) {
                return Err(de::Error::custom(format!(
                    "{} given twice: a JSON object names each key once (RFC 7493 §2.3)",
                    echo::clip(&path)
                )));
            }
            let v = m.next_value_seed(At(path))?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Item {
        #[serde(default, deserialize_with = "body")]
        body: Option<Value>,
        #[serde(default, deserialize_with = "headers")]
        headers: BTreeMap<String, String>,
    }

    fn parse(s: &str) -> Result<Item, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn a_repeated_name_is_refused_naming_its_path() {
        for (text, path) in [
            (r#"{"body":{"to":"1","to":"2"}}"#, "\"body.to\""),
            (
                r#"{"body":{"a":[{"b":1},{"b":1,"b":2}]}}"#,
                "\"body.a[1].b\"",
            ),
            (r#"{"headers":{"X-Tag":"a","x-tag":"b"}}"#, "\"x-tag\""),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(path) && e.contains("twice"), "{text}: {e}");
        }
    }

    #[test]
    fn values_read_as_serde_json_reads_them() {
        let text = r#"{"body":{"n":-1,"u":18446744073709551615,"f":1.5,"s":"x","z":null,
            "t":true,"a":[1,[2,{"k":"v"}]],"o":{}},"headers":{"X-A":"1","X-B":"2"}}"#;
        let item = parse(text).unwrap();
        let plain: Value = serde_json::from_str(text).unwrap();
        assert_eq!(item.body.unwrap(), plain["body"]);
        assert_eq!(item.headers.len(), 2);
        assert_eq!(parse("{}").unwrap().body, None);
        assert_eq!(parse(r#"{"body":null}"#).unwrap().body, None);
    }
}
