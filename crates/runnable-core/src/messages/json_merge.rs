//! Deep merging of provider JSON (`additional_kwargs`, `response_metadata`, content blocks) the way
//! langchain-core's `merge_dicts` and `merge_lists` merge it.

use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// String keys that repeat the same value in every chunk instead of being streamed piece by piece.
const REPEATED_STRING_KEYS: [&str; 4] = ["id", "output_version", "model_provider", "ls_provider"];

/// Integer keys whose latest value wins instead of being summed.
const LATEST_INT_KEYS: [&str; 3] = ["index", "created", "timestamp"];

/// Merges `right` into `left`, key by key: new keys are added, a `null` on either side gives way to the
/// other value, strings concatenate (except repeated ids), objects merge recursively, lists merge by
/// `index`, equal values stay, integers add up (except `index`, `created`, `timestamp`, where the latest
/// wins). `what` names the map in error messages (`additional_kwargs`, ...).
pub(crate) fn merge_maps(
    mut left: Map<String, Value>,
    right: Map<String, Value>,
    what: &str,
) -> Result<Map<String, Value>> {
    for (key, right_value) in right {
        let merged = match left.remove(&key) {
            None | Some(Value::Null) => right_value,
            Some(left_value) => merge_values(&key, left_value, right_value, what)?,
        };
        left.insert(key, merged);
    }
    Ok(left)
}

fn merge_values(key: &str, left: Value, right: Value, what: &str) -> Result<Value> {
    Ok(match (left, right) {
        (left, Value::Null) => left,
        (Value::String(mut a), Value::String(b)) => {
            let keep =
                (key == "index" && a.starts_with("lc_")) || (REPEATED_STRING_KEYS.contains(&key) && a == b);
            if !keep {
                a.push_str(&b);
            }
            Value::String(a)
        }
        (Value::Object(a), Value::Object(b)) => Value::Object(merge_maps(a, b, what)?),
        (Value::Array(a), Value::Array(b)) => Value::Array(merge_lists(a, b, what)?),
        (a, b) if a == b => a,
        (Value::Bool(_), Value::Bool(b)) => Value::Bool(b),
        (Value::Number(a), Value::Number(b)) => merge_numbers(key, a, b, what)?,
        (a, b) if std::mem::discriminant(&a) != std::mem::discriminant(&b) => {
            return Err(Error::InvalidInput(format!(
                "{what}[\"{key}\"] already exists in this message, but with a different type ({a} and {b})"
            )));
        }
        (a, _) => a,
    })
}

fn merge_numbers(key: &str, a: Number, b: Number, what: &str) -> Result<Value> {
    if LATEST_INT_KEYS.contains(&key) && !a.is_f64() && !b.is_f64() {
        return Ok(Value::Number(b));
    }
    let sum = match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => x.checked_add(y).map(Number::from),
        (_, _, Some(x), Some(y)) => x.checked_add(y).map(Number::from),
        _ => None,
    };
    sum.map(Value::Number).ok_or_else(|| {
        Error::InvalidInput(format!(
            "{what}[\"{key}\"] holds different values {a} and {b} that cannot be merged"
        ))
    })
}

/// Appends `right` to `left`, except that an object with an integer `index` (or a string index starting
/// with `lc_`) merges into the object of `left` with the same index and no conflicting `id`; the right
/// object's `type` is ignored in that merge.
pub(crate) fn merge_lists(mut left: Vec<Value>, right: Vec<Value>, what: &str) -> Result<Vec<Value>> {
    for element in right {
        let Value::Object(mut object) = element else {
            left.push(element);
            continue;
        };
        let position = mergeable_index(&object).and_then(|index| {
            left.iter().position(|existing| match existing {
                Value::Object(existing) => {
                    existing.get("index") == Some(index) && ids_agree(existing, &object)
                }
                _ => false,
            })
        });
        match position {
            Some(position) => {
                object.remove("type");
                if let Value::Object(existing) = left[position].take() {
                    left[position] = Value::Object(merge_maps(existing, object, what)?);
                }
            }
            None => left.push(Value::Object(object)),
        }
    }
    Ok(left)
}

fn mergeable_index(object: &Map<String, Value>) -> Option<&Value> {
    object.get("index").filter(|index| match index {
        Value::Number(n) => n.is_i64() || n.is_u64(),
        Value::String(s) => s.starts_with("lc_"),
        _ => false,
    })
}

fn ids_agree(left: &Map<String, Value>, right: &Map<String, Value>) -> bool {
    let id = |m: &Map<String, Value>| match m.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(other) => Some(other.clone()),
    };
    match (id(left), id(right)) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}
