//! A validator for the subset of JSON Schema that schemars emits, to check a model's tool arguments before
//! a tool runs.
//!
//! Supported: boolean schemas, `type` (one or several; `integer` accepts only whole numbers written
//! without a fraction, as Rust's integer types require), `enum`, `const`, `properties`, `required`,
//! `additionalProperties`, `items`, `prefixItems`, `minItems`, `maxItems`, `uniqueItems`, `minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `anyOf`, `oneOf`, `allOf`,
//! `not`, and `$ref` to `#/$defs/...` or `#/definitions/...`. `pattern` and `format` are not checked.

use serde_json::{Map, Value};

/// How deep `$ref`s and nested schemas may go before the validator gives up (recursive schemas).
const MAX_DEPTH: usize = 64;

/// Checks `args` against `schema`; on failure returns one `path: message` line per violation.
///
/// Paths join object keys and array indices with dots (`people.0.age`); the whole value is `(root)`.
pub fn validate_args(schema: &Value, args: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let mut path = Vec::new();
    Validator { root: schema }.check(schema, args, &mut path, &mut errors, 0);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

struct Validator<'s> {
    root: &'s Value,
}

impl<'s> Validator<'s> {
    fn check(
        &self,
        schema: &'s Value,
        value: &Value,
        path: &mut Vec<String>,
        errors: &mut Vec<String>,
        depth: usize,
    ) {
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => return errors.push(line(path, "no value is allowed here")),
            Value::Object(schema) => schema,
            _ => return,
        };
        if depth > MAX_DEPTH {
            return errors.push(line(path, "schema nests too deeply"));
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some(target) => self.check(target, value, path, errors, depth + 1),
                None => errors.push(line(path, &format!("unresolvable schema reference {reference}"))),
            }
        }
        if let Some(types) = schema.get("type") {
            if !type_matches(types, value) {
                return errors
                    .push(line(path, &format!("expected {}, got {}", type_list(types), describe(value))));
            }
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            if !allowed.contains(value) {
                errors.push(line(
                    path,
                    &format!("expected one of {}, got {}", Value::Array(allowed.clone()), describe(value)),
                ));
            }
        }
        if let Some(constant) = schema.get("const") {
            if constant != value {
                errors.push(line(path, &format!("expected {constant}, got {}", describe(value))));
            }
        }
        self.check_combinators(schema, value, path, errors, depth);
        match value {
            Value::Object(map) => self.check_object(schema, map, path, errors, depth),
            Value::Array(items) => self.check_array(schema, items, path, errors, depth),
            Value::Number(n) => check_number(schema, n.as_f64().unwrap_or(f64::NAN), path, errors),
            Value::String(s) => check_string(schema, s, path, errors),
            _ => {}
        }
    }

    fn resolve(&self, reference: &str) -> Option<&'s Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn passes(&self, schema: &'s Value, value: &Value, path: &[String], depth: usize) -> Vec<String> {
        let mut errors = Vec::new();
        self.check(schema, value, &mut path.to_vec(), &mut errors, depth + 1);
        errors
    }

    fn check_combinators(
        &self,
        schema: &'s Map<String, Value>,
        value: &Value,
        path: &mut Vec<String>,
        errors: &mut Vec<String>,
        depth: usize,
    ) {
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for sub in all {
                self.check(sub, value, path, errors, depth + 1);
            }
        }
        for keyword in ["anyOf", "oneOf"] {
            let Some(branches) = schema.get(keyword).and_then(Value::as_array) else { continue };
            let results: Vec<Vec<String>> =
                branches.iter().map(|b| self.passes(b, value, path, depth)).collect();
            let matched = results.iter().filter(|r| r.is_empty()).count();
            if matched == 0 {
                errors.extend(self.explain_no_match(branches, results, value, path));
            } else if keyword == "oneOf" && matched > 1 {
                errors.push(line(
                    path,
                    &format!("matches {matched} of the alternatives, expected exactly one"),
                ));
            }
        }
        if let Some(not) = schema.get("not") {
            if self.passes(not, value, path, depth).is_empty() {
                errors.push(line(path, "matches a schema it must not match"));
            }
        }
    }

    /// The errors to report when no alternative of `anyOf`/`oneOf` matched.
    fn explain_no_match(
        &self,
        branches: &'s [Value],
        mut results: Vec<Vec<String>>,
        value: &Value,
        path: &[String],
    ) -> Vec<String> {
        let constants: Option<Vec<Value>> = branches
            .iter()
            .map(|b| {
                let b = self.deref(b);
                b.get("const")
                    .map(|c| vec![c.clone()])
                    .or_else(|| b.get("enum").and_then(Value::as_array).cloned())
            })
            .collect::<Option<Vec<_>>>()
            .map(|lists| lists.into_iter().flatten().collect());
        if let Some(allowed) = constants {
            return vec![line(
                path,
                &format!("expected one of {}, got {}", Value::Array(allowed), describe(value)),
            )];
        }
        let non_null: Vec<usize> =
            (0..branches.len()).filter(|&i| !is_null_schema(self.deref(&branches[i]))).collect();
        if let [only] = non_null[..] {
            if !value.is_null() {
                return std::mem::take(&mut results[only]);
            }
        }
        let tried: Vec<String> = results.iter().filter_map(|r| r.first().cloned()).collect();
        vec![line(path, &format!("matches none of the alternatives ({})", tried.join("; ")))]
    }

    fn deref(&self, schema: &'s Value) -> &'s Value {
        match schema.get("$ref").and_then(Value::as_str).and_then(|r| self.resolve(r)) {
            Some(target) => target,
            None => schema,
        }
    }

    fn check_object(
        &self,
        schema: &'s Map<String, Value>,
        map: &Map<String, Value>,
        path: &mut Vec<String>,
        errors: &mut Vec<String>,
        depth: usize,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for field in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(field) {
                    path.push(field.to_owned());
                    errors.push(line(path, "missing required field"));
                    path.pop();
                }
            }
        }
        let additional = schema.get("additionalProperties");
        for (key, item) in map {
            path.push(key.clone());
            match properties.and_then(|p| p.get(key)) {
                Some(sub) => self.check(sub, item, path, errors, depth + 1),
                None => match additional {
                    Some(Value::Bool(false)) => errors.push(line(path, "unexpected field")),
                    Some(sub) => self.check(sub, item, path, errors, depth + 1),
                    None => {}
                },
            }
            path.pop();
        }
    }

    fn check_array(
        &self,
        schema: &'s Map<String, Value>,
        items: &[Value],
        path: &mut Vec<String>,
        errors: &mut Vec<String>,
        depth: usize,
    ) {
        let prefix = schema.get("prefixItems").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for (i, item) in items.iter().enumerate() {
            let sub = prefix.get(i).or_else(|| schema.get("items"));
            if let Some(sub) = sub {
                path.push(i.to_string());
                if i >= prefix.len() && *sub == Value::Bool(false) {
                    errors.push(line(path, "unexpected item"));
                } else {
                    self.check(sub, item, path, errors, depth + 1);
                }
                path.pop();
            }
        }
        let len = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64).filter(|&m| len < m) {
            errors.push(line(path, &format!("expected at least {min} items, got {len}")));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64).filter(|&m| len > m) {
            errors.push(line(path, &format!("expected at most {max} items, got {len}")));
        }
        if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
            let duplicate = items.iter().enumerate().any(|(i, a)| items[..i].contains(a));
            if duplicate {
                errors.push(line(path, "expected unique items"));
            }
        }
    }
}

fn check_number(schema: &Map<String, Value>, n: f64, path: &[String], errors: &mut Vec<String>) {
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(min) = bound("minimum").filter(|&m| n < m) {
        errors.push(line(path, &format!("expected a number >= {min}, got {n}")));
    }
    if let Some(max) = bound("maximum").filter(|&m| n > m) {
        errors.push(line(path, &format!("expected a number <= {max}, got {n}")));
    }
    if let Some(min) = bound("exclusiveMinimum").filter(|&m| n <= m) {
        errors.push(line(path, &format!("expected a number > {min}, got {n}")));
    }
    if let Some(max) = bound("exclusiveMaximum").filter(|&m| n >= m) {
        errors.push(line(path, &format!("expected a number < {max}, got {n}")));
    }
}

fn check_string(schema: &Map<String, Value>, s: &str, path: &[String], errors: &mut Vec<String>) {
    let len = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64).filter(|&m| len < m) {
        errors.push(line(path, &format!("expected at least {min} characters, got {len}")));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64).filter(|&m| len > m) {
        errors.push(line(path, &format!("expected at most {max} characters, got {len}")));
    }
}

fn type_matches(types: &Value, value: &Value) -> bool {
    match types {
        Value::String(t) => is_type(t, value),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| is_type(t, value)),
        _ => true,
    }
}

fn is_type(name: &str, value: &Value) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "string" => value.is_string(),
        _ => true,
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

fn type_list(types: &Value) -> String {
    match types {
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        Value::String(t) => t.clone(),
        other => other.to_string(),
    }
}

/// The kind and (shortened) text of a value, for messages: `string "zz"`, `null`, `object {...}`.
fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".to_owned(),
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mut text = value.to_string();
    if text.chars().count() > 60 {
        text = text.chars().take(57).collect::<String>() + "...";
    }
    format!("{kind} {text}")
}

fn line(path: &[String], message: &str) -> String {
    if path.is_empty() { format!("(root): {message}") } else { format!("{}: {message}", path.join(".")) }
}
