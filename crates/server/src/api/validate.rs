//! Request bodies checked against the parts of LangGraph's JSON Schemas that clients run into, with the
//! error texts its validator (jsonschema-rs) gives: required properties, types, enums, `anyOf`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;

/// A JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Object,
    Array,
    String,
    Boolean,
    Integer,
    Number,
    Null,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Boolean => "boolean",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Null => "null",
        }
    }

    fn admits(self, value: &Value) -> bool {
        match self {
            Ty::Object => value.is_object(),
            Ty::Array => value.is_array(),
            Ty::String => value.is_string(),
            Ty::Boolean => value.is_boolean(),
            Ty::Integer => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            Ty::Number => value.is_number(),
            Ty::Null => value.is_null(),
        }
    }
}

/// What a property must be.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rule {
    /// One of these types.
    Types(&'static [Ty]),
    /// One of these strings (or, with `null`, also null).
    Enum(&'static [&'static str], bool),
    /// Passes one of these checks (`anyOf`): reported as a whole.
    AnyOf(fn(&Value) -> bool),
    /// A list of these strings (a search's `select`), or null.
    Items(&'static [&'static str]),
    /// An integer within `minimum` and `maximum` (each where given).
    Range(Option<i64>, Option<i64>),
    /// A list whose every item follows the rule.
    Each(&'static Rule),
    /// An object following a schema of its own (named when its `path` is not empty, else inline).
    Object(&'static Schema),
}

/// A request body's schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schema {
    /// Where the schema is, as the error shows it: `schema` for inline schemas,
    /// `schema["components"]["schemas"]["Name"]` for named ones.
    pub(crate) path: &'static str,
    pub(crate) required: &'static [&'static str],
    pub(crate) properties: &'static [(&'static str, Rule)],
}

/// Compact JSON with object keys sorted, as the validator prints instances.
pub(crate) fn instance(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> = map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value)).unwrap_or_default()
}

fn failure(
    message: String,
    keyword: &str,
    schema_path: &str,
    instance_path: &str,
    value: &Value,
) -> ApiError {
    ApiError::unprocessable(format!(
        "{message}\n\nFailed validating \"{keyword}\" in {schema_path}\n\nOn instance{instance_path}:\n    {}",
        instance(value)
    ))
}

fn types_message(value: &Value, types: &[Ty]) -> String {
    match types {
        [one] => format!("{} is not of type \"{}\"", instance(value), one.name()),
        many => {
            let names: Vec<String> = many.iter().map(|t| format!("\"{}\"", t.name())).collect();
            format!("{} is not of types {}", instance(value), names.join(", "))
        }
    }
}

fn enum_message(value: &Value, options: &[&str]) -> String {
    let quoted: Vec<String> = options.iter().map(|o| format!("\"{o}\"")).collect();
    let listed = match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        [a, b, c] => format!("{a}, {b} or {c}"),
        [a, b, rest @ ..] => format!("{a}, {b} or {} other candidates", rest.len()),
    };
    format!("{} is not one of {listed}", instance(value))
}

/// Checks `body` against `schema`.
pub(crate) fn check(schema: &Schema, body: &Value) -> Result<(), ApiError> {
    check_object(schema, schema.path, body, "")
}

fn check_object(schema: &Schema, at: &str, body: &Value, instance_path: &str) -> Result<(), ApiError> {
    let Value::Object(map) = body else {
        return Err(failure(types_message(body, &[Ty::Object]), "type", at, instance_path, body));
    };
    for name in schema.required {
        if !map.contains_key(*name) {
            let message = format!("\"{name}\" is a required property");
            return Err(failure(message, "required", at, instance_path, body));
        }
    }
    for (name, rule) in schema.properties {
        let Some(value) = map.get(*name) else { continue };
        let at = format!("{at}[\"properties\"][\"{name}\"]");
        check_rule(rule, value, &at, &format!("{instance_path}[\"{name}\"]"))?;
    }
    Ok(())
}

/// Checks one value against `rule`; `at` is the rule's place in the schema, `instance_path` the value's.
fn check_rule(rule: &Rule, value: &Value, at: &str, instance_path: &str) -> Result<(), ApiError> {
    match rule {
        Rule::Types(types) if !types.iter().any(|t| t.admits(value)) => {
            Err(failure(types_message(value, types), "type", at, instance_path, value))
        }
        Rule::Enum(options, nullable) => {
            let ok = (*nullable && value.is_null()) || value.as_str().is_some_and(|s| options.contains(&s));
            if ok {
                Ok(())
            } else {
                Err(failure(enum_message(value, options), "enum", at, instance_path, value))
            }
        }
        Rule::Items(_) if value.is_null() => Ok(()),
        Rule::Items(options) => {
            let Some(items) = value.as_array() else {
                return Err(failure(types_message(value, &[Ty::Array]), "type", at, instance_path, value));
            };
            let wrong = items
                .iter()
                .enumerate()
                .find(|(_, item)| !item.as_str().is_some_and(|s| options.contains(&s)));
            match wrong {
                Some((i, item)) => Err(failure(
                    enum_message(item, options),
                    "enum",
                    &format!("{at}[\"items\"]"),
                    &format!("{instance_path}[{i}]"),
                    item,
                )),
                None => Ok(()),
            }
        }
        Rule::AnyOf(test) if !test(value) => {
            let message = format!(
                "{} is not valid under any of the schemas listed in the 'anyOf' keyword",
                instance(value)
            );
            Err(failure(message, "anyOf", at, instance_path, value))
        }
        Rule::Range(minimum, maximum) => check_range(*minimum, *maximum, value, at, instance_path),
        Rule::Each(item_rule) => {
            let Some(items) = value.as_array() else {
                return Err(failure(types_message(value, &[Ty::Array]), "type", at, instance_path, value));
            };
            let at = format!("{at}[\"items\"]");
            for (i, item) in items.iter().enumerate() {
                check_rule(item_rule, item, &at, &format!("{instance_path}[{i}]"))?;
            }
            Ok(())
        }
        Rule::Object(schema) => {
            let at = if schema.path.is_empty() { at } else { schema.path };
            check_object(schema, at, value, instance_path)
        }
        _ => Ok(()),
    }
}

fn check_range(
    minimum: Option<i64>,
    maximum: Option<i64>,
    value: &Value,
    at: &str,
    instance_path: &str,
) -> Result<(), ApiError> {
    if !Ty::Integer.admits(value) {
        return Err(failure(types_message(value, &[Ty::Integer]), "type", at, instance_path, value));
    }
    let number = value.as_f64().unwrap_or_default();
    if let Some(min) = minimum.filter(|m| number < *m as f64) {
        let message = format!("{} is less than the minimum of {min}", instance(value));
        return Err(failure(message, "minimum", at, instance_path, value));
    }
    if let Some(max) = maximum.filter(|m| number > *m as f64) {
        let message = format!("{} is greater than the maximum of {max}", instance(value));
        return Err(failure(message, "maximum", at, instance_path, value));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const S: Schema = Schema {
        path: "schema",
        required: &["value"],
        properties: &[
            ("value", Rule::Types(&[Ty::Object])),
            ("prefix", Rule::Types(&[Ty::Array, Ty::Null])),
            ("status", Rule::Enum(&["idle", "busy", "interrupted", "error"], false)),
            ("select", Rule::Items(&["a", "b", "c"])),
        ],
    };

    #[test]
    fn messages_are_the_validators() {
        let e = check(&S, &json!({"namespace": ["a"], "key": "k"})).unwrap_err();
        assert_eq!(
            e.detail,
            "\"value\" is a required property\n\nFailed validating \"required\" in schema\n\nOn instance:\n    {\"key\":\"k\",\"namespace\":[\"a\"]}"
        );
        let e = check(&S, &json!({"value": {}, "prefix": "x"})).unwrap_err();
        assert!(e.detail.starts_with("\"x\" is not of types \"array\", \"null\"\n\nFailed validating \"type\" in schema[\"properties\"][\"prefix\"]"), "{}", e.detail);
        let e = check(&S, &json!({"value": {}, "status": "nope"})).unwrap_err();
        assert!(
            e.detail.starts_with("\"nope\" is not one of \"idle\", \"busy\" or 2 other candidates"),
            "{}",
            e.detail
        );
        let e = check(&S, &json!([1, 2])).unwrap_err();
        assert!(e.detail.starts_with("[1,2] is not of type \"object\""), "{}", e.detail);
        assert!(check(&S, &json!({"value": {}, "prefix": null})).is_ok());
        let e = check(&S, &json!({"value": {}, "select": ["a", "x"]})).unwrap_err();
        assert_eq!(
            e.detail,
            "\"x\" is not one of \"a\", \"b\" or \"c\"\n\nFailed validating \"enum\" in schema[\"properties\"][\"select\"][\"items\"]\n\nOn instance[\"select\"][1]:\n    \"x\""
        );
        let e = check(&S, &json!({"value": {}, "select": "a"})).unwrap_err();
        assert!(e.detail.starts_with("\"a\" is not of type \"array\""), "{}", e.detail);
        assert!(check(&S, &json!({"value": {}, "select": ["c", "a"]})).is_ok());
    }

    const INNER: Schema = Schema {
        path: "",
        required: &["updates"],
        properties: &[("updates", Rule::Each(&Rule::Types(&[Ty::String])))],
    };
    const NESTED: Schema = Schema {
        path: "schema",
        required: &[],
        properties: &[
            ("limit", Rule::Range(Some(1), Some(1000))),
            ("offset", Rule::Range(Some(0), None)),
            ("steps", Rule::Each(&Rule::Object(&INNER))),
        ],
    };

    #[test]
    fn ranges_lists_and_nested_objects_are_checked_where_they_are() {
        let e = check(&NESTED, &json!({"limit": 0})).unwrap_err();
        assert_eq!(
            e.detail,
            "0 is less than the minimum of 1\n\nFailed validating \"minimum\" in schema[\"properties\"][\"limit\"]\n\nOn instance[\"limit\"]:\n    0"
        );
        let e = check(&NESTED, &json!({"limit": 1001})).unwrap_err();
        assert!(
            e.detail.starts_with("1001 is greater than the maximum of 1000\n\nFailed validating \"maximum\"")
        );
        let e = check(&NESTED, &json!({"limit": "x"})).unwrap_err();
        assert!(e.detail.starts_with("\"x\" is not of type \"integer\""), "{}", e.detail);
        assert!(check(&NESTED, &json!({"offset": -1})).is_err());
        assert!(check(&NESTED, &json!({"limit": 1000, "offset": 0})).is_ok());
        let e = check(&NESTED, &json!({"steps": [{"updates": []}, {}]})).unwrap_err();
        assert_eq!(
            e.detail,
            "\"updates\" is a required property\n\nFailed validating \"required\" in schema[\"properties\"][\"steps\"][\"items\"]\n\nOn instance[\"steps\"][1]:\n    {}"
        );
        let e = check(&NESTED, &json!({"steps": [{"updates": ["a", 3]}]})).unwrap_err();
        assert_eq!(
            e.detail,
            "3 is not of type \"string\"\n\nFailed validating \"type\" in schema[\"properties\"][\"steps\"][\"items\"][\"properties\"][\"updates\"][\"items\"]\n\nOn instance[\"steps\"][0][\"updates\"][1]:\n    3"
        );
        let e = check(&NESTED, &json!({"steps": "x"})).unwrap_err();
        assert!(e.detail.starts_with("\"x\" is not of type \"array\""), "{}", e.detail);
        assert!(check(&NESTED, &json!({"steps": [{"updates": ["a"]}]})).is_ok());
    }
}
