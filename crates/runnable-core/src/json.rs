//! Conversions between typed run values and JSON, used where LCEL passes dicts (parallel maps, assign,
//! pick, fallbacks with an exception key).

use std::any::Any;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Converts `value` to JSON; a value that already is JSON is moved, not copied.
pub(crate) fn into_value<T: Serialize + 'static>(value: T, what: &str) -> Result<Value> {
    let mut slot = Some(value);
    if let Some(json) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Value>>().and_then(Option::take) {
        return Ok(json);
    }
    serde_json::to_value(&slot)
        .map_err(|e| Error::Serialization(format!("output of {what} could not be converted to JSON: {e}")))
}

/// Converts JSON back to `T`; JSON wanted as JSON is moved, not copied.
pub(crate) fn from_value<T: DeserializeOwned + 'static>(value: Value, what: &str) -> Result<T> {
    let mut slot = Some(value);
    if let Some(typed) = (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>().and_then(Option::take) {
        return Ok(typed);
    }
    let value = slot.unwrap_or(Value::Null);
    serde_json::from_value(value)
        .map_err(|e| Error::Serialization(format!("chunk of {what} could not be read back from JSON: {e}")))
}

/// The JSON object inside `value`, when `T` is `serde_json::Value` and the value is an object.
pub(crate) fn as_object_mut<T: 'static>(value: &mut T) -> Option<&mut Map<String, Value>> {
    (value as &mut dyn Any).downcast_mut::<Value>()?.as_object_mut()
}

/// Describes what `value` is, for error messages (`a string`, `an array`, ...).
pub(crate) fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Describes the JSON shape of a typed value, for error messages.
pub(crate) fn describe_typed<T: 'static>(value: &T) -> String {
    match (value as &dyn Any).downcast_ref::<Value>() {
        Some(json) => describe(json).to_owned(),
        None => format!("a value of type {}", std::any::type_name::<T>()),
    }
}

/// An object with one key.
pub(crate) fn single_entry(key: &str, value: Value) -> Value {
    let mut map = Map::with_capacity(1);
    map.insert(key.to_owned(), value);
    Value::Object(map)
}
