//! Folding JSON writes: LangGraph's `operator.add`, list append and topic items.

use serde_json::{Number, Value};

/// `left + right` as Python's `operator.add` does it on JSON values: numbers add, strings and lists
/// concatenate; other pairs are an error.
pub(super) fn add(left: &mut Value, right: Value) -> Result<(), String> {
    match (left, right) {
        (Value::Array(items), Value::Array(more)) => items.extend(more),
        (Value::String(text), Value::String(more)) => text.push_str(&more),
        (Value::Number(a), Value::Number(b)) => *a = add_numbers(a, &b)?,
        (left, right) => {
            return Err(format!("cannot add {} to {}", type_name(&right), type_name(left)));
        }
    }
    Ok(())
}

fn add_numbers(a: &Number, b: &Number) -> Result<Number, String> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        if let Some(sum) = x.checked_add(y) {
            return Ok(sum.into());
        }
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        if let Some(sum) = x.checked_add(y) {
            return Ok(sum.into());
        }
    }
    let sum = a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN);
    Number::from_f64(sum).ok_or_else(|| format!("the sum of {a} and {b} is not a finite number"))
}

/// Appends a write to a list value: a list adds its items, anything else adds itself.
pub(super) fn append(left: &mut Value, right: Value) -> Result<(), String> {
    let Value::Array(items) = left else {
        return Err(format!("cannot append to {}", type_name(left)));
    };
    match right {
        Value::Array(more) => items.extend(more),
        item => items.push(item),
    }
    Ok(())
}

/// The items of a topic write: a list is flattened, anything else is one item.
pub(super) fn items(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        item => vec![item],
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
