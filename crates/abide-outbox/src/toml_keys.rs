//! The keys of one `[[provider]]` table that its transport reads, with where each stands
//! in the providers file, so that an error names the key and its line.
//!
//! `config::file` reads the shared keys (`retry`, `pacer`, `failover`, ...) and hands the
//! rest to the provider's transport, which reads them into a struct of its own with
//! [`Keys::read`]: serde's derive, every field optional. A value of the wrong type is
//! reported at that value, as the TOML parser reports the shared keys.

use std::ops::Range;

use serde::de::{self, DeserializeOwned, Visitor};
use serde::forward_to_deserialize_any;
use toml::Spanned;

use crate::error::Error;

/// A byte range of the providers file.
pub(crate) type Span = Range<usize>;

/// Why a table was refused.
#[derive(Debug)]
pub(crate) enum TableError {
    /// A setting's value is refused ([`Error::Config`], naming provider and setting).
    Invalid(Error),
    /// The text at `span` is not what was expected (a value of the wrong type, an
    /// unknown key); the message is the TOML parser's.
    At {
        /// Where.
        span: Span,
        /// What is wrong.
        message: String,
    },
}

impl From<Error> for TableError {
    fn from(e: Error) -> Self {
        TableError::Invalid(e)
    }
}

/// Keys of one table, in file order, each with its value.
#[derive(Debug, Default)]
pub(crate) struct Keys(pub(crate) Vec<(Spanned<String>, Spanned<toml::Value>)>);

impl Keys {
    /// The keys read as `T`, a struct of optional fields deriving `Deserialize`.
    ///
    /// # Errors
    /// [`TableError::At`] the first value that does not fit its field.
    pub(crate) fn read<T: DeserializeOwned>(&self) -> Result<T, TableError> {
        let table = |keys: &[(Spanned<String>, Spanned<toml::Value>)]| {
            let t: toml::Table = keys
                .iter()
                .map(|(k, v)| (k.get_ref().clone(), v.get_ref().clone()))
                .collect();
            toml::Value::Table(t).try_into::<T>()
        };
        let whole = match table(&self.0) {
            Ok(t) => return Ok(t),
            Err(e) => e,
        };
        // Which key: the first that fails on its own (every field is optional).
        for one in self.0.chunks(1) {
            if let Err(e) = table(one) {
                return Err(TableError::At {
                    span: one[0].1.span(),
                    message: e.message().to_owned(),
                });
            }
        }
        Err(TableError::At {
            span: self.0.first().map_or(0..0, |(k, _)| k.span()),
            message: whole.message().to_owned(),
        })
    }
}

/// The field names of `T` (a struct deriving `Deserialize`), as serde's derive lists
/// them: the keys a transport's table accepts, written once, on its struct.
pub(crate) fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldsOf(&mut fields));
    fields
}

/// A deserializer that only notes the fields a derived struct asks for.
struct FieldsOf<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for FieldsOf<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("fields noted"))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, Default)]
    #[serde(deny_unknown_fields)]
    struct Two {
        window: Option<usize>,
        address: Option<String>,
    }

    fn keys(text: &str) -> Keys {
        let t: std::collections::BTreeMap<String, Spanned<toml::Value>> =
            toml::from_str(text).unwrap();
        // Spans of keys are not kept by a plain map: the tests only need the values'.
        Keys(
            t.into_iter()
                .map(|(k, v)| (Spanned::new(0..0, k), v))
                .collect(),
        )
    }

    #[test]
    fn a_value_of_the_wrong_type_is_reported_at_that_value() {
        let text = "address = \"h:1\"\nwindow = \"ten\"\n";
        match keys(text).read::<Two>() {
            Err(TableError::At { span, message }) => {
                assert_eq!(&text[span], "\"ten\"");
                assert!(message.contains("expected usize"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let two = keys("window = 3").read::<Two>().unwrap();
        assert_eq!((two.window, two.address), (Some(3), None));
    }

    #[test]
    fn field_names_are_the_derived_structs() {
        assert_eq!(field_names::<Two>(), ["window", "address"]);
    }
}
