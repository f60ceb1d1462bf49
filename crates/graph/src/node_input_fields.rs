//! The field names of a node's input type, read from its `Deserialize` implementation (serde's derive
//! names a struct's fields when it deserializes one), so that compile can check them against the state's
//! channels.

use serde::de::{self, Deserialize, Visitor};

/// Why reading the fields stopped: the fields, when the type asked for a struct.
#[derive(Debug)]
struct Stop(Option<&'static [&'static str]>);

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names read")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop(None)
    }
}

/// A deserializer that answers every request with an error, except that a struct request records the
/// struct's field names first.
struct Fields;

impl<'de> de::Deserializer<'de> for Fields {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop(None))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        Err(Stop(Some(fields)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// The field names of `T` when it deserializes as a struct (derived `Deserialize`); `None` otherwise (a
/// map, a newtype, a number, ...).
pub(crate) fn struct_fields<'de, T: Deserialize<'de>>() -> Option<&'static [&'static str]> {
    match T::deserialize(Fields) {
        Ok(_) => None,
        Err(Stop(fields)) => fields,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Narrow {
        topic: String,
        #[serde(default)]
        notes: Vec<String>,
    }

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Wrapper(String);

    #[test]
    fn a_struct_names_its_fields_and_other_types_none() {
        assert_eq!(struct_fields::<Narrow>(), Some(&["topic", "notes"][..]));
        assert_eq!(struct_fields::<Wrapper>(), None);
        assert_eq!(struct_fields::<i64>(), None);
        assert_eq!(struct_fields::<serde_json::Value>(), None);
        assert_eq!(struct_fields::<std::collections::HashMap<String, i64>>(), None);
    }
}
