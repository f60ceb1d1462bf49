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
    schema_path: String,
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
        [a, b, rest @ ..] => format!("{a}, {b} or {} other candidates", rest.len()),
    };
    format!("{} is not one of {listed}", instance(value))
}

/// Checks `body` against `schema`.
pub(crate) fn check(schema: &Schema, body: &Value) -> Result<(), ApiError> {
    let Value::Object(map) = body else {
        return Err(failure(types_message(body, &[Ty::Object]), "type", schema.path.to_owned(), "", body));
    };
    for name in schema.required {
        if !map.contains_key(*name) {
            let message = format!("\"{name}\" is a required property");
            return Err(failure(message, "required", schema.path.to_owned(), "", body));
        }
    }
    for (name, rule) in schema.properties {
        let Some(value) = map.get(*name) else { continue };
        let at = || format!("{}[\"properties\"][\"{name}\"]", schema.path);
        let instance_path = format!("[\"{name}\"]");
        match rule {
            Rule::Types(types) if !types.iter().any(|t| t.admits(value)) => {
                return Err(failure(types_message(value, types), "type", at(), &instance_path, value));
            }
            Rule::Enum(options, nullable) => {
                let ok =
                    (*nullable && value.is_null()) || value.as_str().is_some_and(|s| options.contains(&s));
                if !ok {
                    return Err(failure(enum_message(value, options), "enum", at(), &instance_path, value));
                }
            }
            Rule::Items(_) if value.is_null() => {}
            Rule::Items(_) if !value.is_array() => {
                return Err(failure(types_message(value, &[Ty::Array]), "type", at(), &instance_path, value));
            }
            Rule::Items(options) => {
                let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
                let wrong = items
                    .iter()
                    .enumerate()
                    .find(|(_, item)| !item.as_str().is_some_and(|s| options.contains(&s)));
                if let Some((i, item)) = wrong {
                    let at = format!("{}[\"items\"]", at());
                    return Err(failure(
                        enum_message(item, options),
                        "enum",
                        at,
                        &format!("{instance_path}[{i}]"),
                        item,
                    ));
                }
            }
            Rule::AnyOf(test) if !test(value) => {
                let message = format!(
                    "{} is not valid under any of the schemas listed in the 'anyOf' keyword",
                    instance(value)
                );
                return Err(failure(message, "anyOf", at(), &instance_path, value));
            }
            _ => {}
        }
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
            "\"x\" is not one of \"a\", \"b\" or 1 other candidates\n\nFailed validating \"enum\" in schema[\"properties\"][\"select\"][\"items\"]\n\nOn instance[\"select\"][1]:\n    \"x\""
        );
        let e = check(&S, &json!({"value": {}, "select": "a"})).unwrap_err();
        assert!(e.detail.starts_with("\"a\" is not of type \"array\""), "{}", e.detail);
        assert!(check(&S, &json!({"value": {}, "select": ["c", "a"]})).is_ok());
    }
}
