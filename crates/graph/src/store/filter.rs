//! Search filters: equality (recursive for maps and lists) and comparison operators.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::StoreError;

const OPERATORS: [&str; 6] = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"];

/// Checks that every operator in `filter` is one of `$eq $ne $gt $gte $lt $lte`; the error names the
/// unknown operator and its key.
pub fn validate_filter(filter: &Map<String, Value>) -> Result<(), StoreError> {
    fn walk(key: &str, wanted: &Value) -> Result<(), StoreError> {
        match wanted {
            Value::Object(map) if map.keys().any(|k| k.starts_with('$')) => {
                match map.keys().find(|k| !OPERATORS.contains(&k.as_str())) {
                    Some(op) => Err(StoreError::InvalidFilter(format!(
                        "unknown operator '{op}' for key '{key}' (expected one of {})",
                        OPERATORS.join(", ")
                    ))),
                    None => Ok(()),
                }
            }
            Value::Object(map) => map.iter().try_for_each(|(k, v)| walk(&format!("{key}.{k}"), v)),
            _ => Ok(()),
        }
    }
    filter.iter().try_for_each(|(k, v)| walk(k, v))
}

/// Whether an item's value matches a filter checked by [`validate_filter`], as every store applies it
/// (for backends that filter outside their database).
pub fn matches_filter(value: &Value, filter: &Map<String, Value>) -> bool {
    matches(value, filter)
}

/// Whether an item's value matches a validated filter.
pub(crate) fn matches(value: &Value, filter: &Map<String, Value>) -> bool {
    filter.iter().all(|(key, wanted)| compare(value.get(key), wanted))
}

fn compare(found: Option<&Value>, wanted: &Value) -> bool {
    match wanted {
        Value::Object(ops) if ops.keys().any(|k| k.starts_with('$')) => {
            ops.iter().all(|(op, arg)| apply(found, op, arg))
        }
        Value::Object(fields) => match found {
            Some(Value::Object(_)) => fields.iter().all(|(k, v)| compare(found.and_then(|f| f.get(k)), v)),
            _ => false,
        },
        Value::Array(items) => match found {
            Some(Value::Array(got)) => {
                got.len() == items.len() && got.iter().zip(items).all(|(g, w)| compare(Some(g), w))
            }
            _ => false,
        },
        scalar => found.is_some_and(|f| equal(f, scalar)),
    }
}

fn apply(found: Option<&Value>, op: &str, arg: &Value) -> bool {
    match op {
        "$eq" => found.is_some_and(|f| equal(f, arg)),
        "$ne" => !found.is_some_and(|f| equal(f, arg)),
        "$gt" => order(found, arg) == Some(Ordering::Greater),
        "$gte" => matches!(order(found, arg), Some(Ordering::Greater | Ordering::Equal)),
        "$lt" => order(found, arg) == Some(Ordering::Less),
        "$lte" => matches!(order(found, arg), Some(Ordering::Less | Ordering::Equal)),
        _ => false,
    }
}

/// JSON equality with numbers compared by value (`1 == 1.0`).
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

/// Ordering between two numbers or two strings; `None` for anything else.
fn order(found: Option<&Value>, arg: &Value) -> Option<Ordering> {
    match (found?, arg) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn nested_maps_match_as_containment() {
        let item = json!({"a": {"b": 1, "c": 2}});
        assert!(matches(&item, &f(json!({"a": {"b": 1}}))));
        assert!(!matches(&item, &f(json!({"a": {"b": 2}}))));
    }

    #[test]
    fn operators_on_missing_keys() {
        let item = json!({"a": 1});
        assert!(matches(&item, &f(json!({"z": {"$ne": 1}}))));
        assert!(!matches(&item, &f(json!({"z": {"$gt": 0}}))));
    }

    #[test]
    fn unknown_operator_is_named_with_its_key() {
        let err = validate_filter(&f(json!({"score": {"$near": 3}}))).unwrap_err().to_string();
        assert!(err.contains("'$near'") && err.contains("'score'"), "{err}");
        let err = validate_filter(&f(json!({"a": {"b": {"$in": [1]}}}))).unwrap_err().to_string();
        assert!(err.contains("'a.b'"), "{err}");
    }
}
