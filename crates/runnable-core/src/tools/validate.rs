//! Checking a model's tool arguments against the tool's JSON schema before the tool runs, with a complete
//! JSON Schema implementation ([boon](https://docs.rs/boon): drafts 4, 6, 7, 2019-09 and 2020-12, the
//! default when a schema names none) — `patternProperties`, `$ref`, `if`/`then`, `dependentRequired` and
//! every other keyword included. `format` is an annotation, not checked, as the 2020-12 draft says.
//!
//! A tool keeps its schema compiled as an [`ArgsValidator`] (made once); [`validate_args`] and tools that
//! keep none find compiled schemas in a bounded cache keyed by the schema itself. A schema that is not valid JSON Schema is not enforced: the arguments pass as they are (with a
//! warning in the log), as LangChain passes a JSON-schema tool's arguments.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use boon::{Compiler, ErrorKind, SchemaIndex, Schemas, ValidationError};
use serde_json::Value;

/// How many compiled schemas are kept before the cache starts over.
const CACHE_LIMIT: usize = 1024;

/// Checks `args` against `schema`; on failure returns one `path: message` line per violation.
///
/// Paths join object keys and array indices with dots (`people.0.age`); the whole value is `(root)`.
pub fn validate_args(schema: &Value, args: &Value) -> Result<(), Vec<String>> {
    ArgsValidator::new(schema).validate(args)
}

/// A tool's argument schema, compiled once: checks arguments without looking the schema up again.
/// Cloning it is cheap (the compiled schema is shared).
#[derive(Clone)]
pub struct ArgsValidator {
    entry: Arc<Entry>,
}

impl std::fmt::Debug for ArgsValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsValidator")
            .field("schema", &self.entry.schema)
            .field("enforced", &self.entry.compiled.is_some())
            .finish()
    }
}

impl ArgsValidator {
    /// `schema` compiled (or found compiled in the cache). A schema that is not valid JSON Schema makes a
    /// validator that lets every argument pass, with a warning in the log.
    pub fn new(schema: &Value) -> Self {
        Self { entry: entry(schema) }
    }

    /// Checks `args`; on failure returns one `path: message` line per violation, as [`validate_args`].
    pub fn validate(&self, args: &Value) -> Result<(), Vec<String>> {
        let Some(compiled) = &self.entry.compiled else { return Ok(()) };
        match compiled.schemas.validate(args, compiled.index) {
            Ok(()) => Ok(()),
            Err(error) => {
                let mut lines = Vec::new();
                explain(&error, args, &mut lines);
                if lines.is_empty() {
                    lines.push(format!("(root): {}", error.kind));
                }
                Err(lines)
            }
        }
    }
}

/// A schema and its compiled form (`None` when it is not valid JSON Schema).
struct Entry {
    schema: Value,
    compiled: Option<Compiled>,
}

struct Compiled {
    schemas: Schemas,
    index: SchemaIndex,
}

type Cache = HashMap<u64, Vec<Arc<Entry>>>;

static CACHE: std::sync::LazyLock<Mutex<Cache>> = std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

/// `schema` compiled, from the cache or compiled now.
fn entry(schema: &Value) -> Arc<Entry> {
    let key = fingerprint(schema);
    {
        let cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = cache.get(&key).and_then(|list| list.iter().find(|e| e.schema == *schema)) {
            return Arc::clone(hit);
        }
    }
    let made = Arc::new(Entry { schema: schema.clone(), compiled: compile(schema) });
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.entry(key).or_default().push(Arc::clone(&made));
    made
}

fn compile(schema: &Value) -> Option<Compiled> {
    let mut compiler = Compiler::new();
    let mut schemas = Schemas::new();
    const LOCATION: &str = "weft:///tool-arguments.json";
    let compiled = match compiler.add_resource(LOCATION, schema.clone()) {
        Ok(()) => compiler.compile(LOCATION, &mut schemas),
        Err(err) => Err(err),
    };
    match compiled {
        Ok(index) => Some(Compiled { schemas, index }),
        Err(err) => {
            tracing::warn!(error = %err, "a tool's argument schema is not valid JSON Schema: its arguments are not checked");
            None
        }
    }
}

/// A hash of the schema's content (objects hashed by key, in order).
fn fingerprint(value: &Value) -> u64 {
    fn walk(value: &Value, h: &mut std::collections::hash_map::DefaultHasher) {
        match value {
            Value::Null => 0u8.hash(h),
            Value::Bool(b) => b.hash(h),
            Value::Number(n) => n.to_string().hash(h),
            Value::String(s) => s.hash(h),
            Value::Array(items) => {
                items.len().hash(h);
                items.iter().for_each(|i| walk(i, h));
            }
            Value::Object(map) => {
                map.len().hash(h);
                for (k, v) in map {
                    k.hash(h);
                    walk(v, h);
                }
            }
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    walk(value, &mut h);
    h.finish()
}

/// The path of an instance location, dot-joined (`(root)` for the whole value), and the value there.
fn located<'v>(error: &ValidationError<'_, '_>, args: &'v Value) -> (Vec<String>, Option<&'v Value>) {
    let mut path = Vec::new();
    let mut at = Some(args);
    for token in &error.instance_location.tokens {
        match token {
            boon::InstanceToken::Prop(p) => {
                path.push(p.to_string());
                at = at.and_then(|v| v.get(p.as_ref()));
            }
            boon::InstanceToken::Item(i) => {
                path.push(i.to_string());
                at = at.and_then(|v| v.get(*i));
            }
        }
    }
    (path, at)
}

fn line(path: &[String], message: &str) -> String {
    if path.is_empty() { format!("(root): {message}") } else { format!("{}: {message}", path.join(".")) }
}

/// The lines of `error`: one per failed keyword, the combinators' branches summed up.
fn explain(error: &ValidationError<'_, '_>, args: &Value, lines: &mut Vec<String>) {
    let (path, value) = located(error, args);
    let got = || value.map_or_else(|| "nothing".to_owned(), describe);
    let message = match &error.kind {
        ErrorKind::Group | ErrorKind::Schema { .. } | ErrorKind::Reference { .. } | ErrorKind::AllOf => {
            for cause in &error.causes {
                explain(cause, args, lines);
            }
            return;
        }
        ErrorKind::AnyOf | ErrorKind::OneOf(None) => {
            // An optional value (`anyOf: [T, {type: null}]`) that is not null: what is wrong with the `T`.
            let not_null: Vec<&ValidationError<'_, '_>> =
                error.causes.iter().filter(|c| !is_null_branch(c)).collect();
            if let ([only], true) = (not_null.as_slice(), value.is_some_and(|v| !v.is_null())) {
                return explain(only, args, lines);
            }
            let mut tried = Vec::new();
            for cause in &error.causes {
                explain(cause, args, &mut tried);
            }
            format!("matches none of the alternatives ({})", tried.join("; "))
        }
        ErrorKind::OneOf(Some((a, b))) => format!("matches more than one alternative ({a} and {b})"),
        ErrorKind::Required { want } => {
            for field in want {
                let mut at = path.clone();
                at.push((*field).to_owned());
                lines.push(line(&at, "missing required field"));
            }
            return;
        }
        ErrorKind::AdditionalProperties { got } => {
            for field in got {
                let mut at = path.clone();
                at.push(field.to_string());
                lines.push(line(&at, "unexpected field"));
            }
            return;
        }
        ErrorKind::AdditionalItems { got } => format!("expected at most {got} items"),
        ErrorKind::FalseSchema => "no value is allowed here".to_owned(),
        ErrorKind::Type { want, .. } => {
            let want: Vec<String> = want.iter().map(|t| t.to_string()).collect();
            format!("expected {}, got {}", want.join(" or "), got())
        }
        ErrorKind::Enum { want } => {
            format!("expected one of {}, got {}", Value::Array((*want).clone()), got())
        }
        ErrorKind::Const { want } => format!("expected {want}, got {}", got()),
        ErrorKind::MinItems { got: n, want } => format!("expected at least {want} items, got {n}"),
        ErrorKind::MaxItems { got: n, want } => format!("expected at most {want} items, got {n}"),
        ErrorKind::UniqueItems { .. } => "expected unique items".to_owned(),
        ErrorKind::MinLength { got: n, want } => format!("expected at least {want} characters, got {n}"),
        ErrorKind::MaxLength { got: n, want } => format!("expected at most {want} characters, got {n}"),
        ErrorKind::Pattern { want, .. } => format!("expected a string matching {want}, got {}", got()),
        ErrorKind::Minimum { got: n, want } => format!("expected a number >= {want}, got {n}"),
        ErrorKind::Maximum { got: n, want } => format!("expected a number <= {want}, got {n}"),
        ErrorKind::ExclusiveMinimum { got: n, want } => format!("expected a number > {want}, got {n}"),
        ErrorKind::ExclusiveMaximum { got: n, want } => format!("expected a number < {want}, got {n}"),
        ErrorKind::Not => "matches a schema it must not match".to_owned(),
        other => other.to_string(),
    };
    lines.push(line(&path, &message));
}

/// Whether `error` is the failure of a `{"type": "null"}` alternative.
fn is_null_branch(error: &ValidationError<'_, '_>) -> bool {
    match &error.kind {
        ErrorKind::Type { want, .. } => want.iter().all(|t| t.to_string() == "null"),
        ErrorKind::Group | ErrorKind::Schema { .. } | ErrorKind::Reference { .. } => {
            error.causes.len() == 1 && error.causes.iter().all(is_null_branch)
        }
        _ => false,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn integer_keyed_maps_pass_through_pattern_properties() {
        // What schemars writes for `BTreeMap<usize, String>`.
        let schema = json!({"type": "object", "properties": {"inserts": {"type": "object",
            "patternProperties": {"^\\d+$": {"type": "string"}}, "additionalProperties": false}},
            "required": ["inserts"]});
        assert!(validate_args(&schema, &json!({"inserts": {"2": "x", "10": "y"}})).is_ok());
        assert_eq!(
            validate_args(&schema, &json!({"inserts": {"two": "x"}})).unwrap_err(),
            vec!["inserts.two: unexpected field"]
        );
        assert_eq!(
            validate_args(&schema, &json!({"inserts": {"2": 3}})).unwrap_err(),
            vec!["inserts.2: expected string, got integer 3"]
        );
    }

    #[test]
    fn keywords_beyond_the_old_subset_are_enforced() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}},
            "dependentRequired": {"a": ["b"]}});
        let errors = validate_args(&schema, &json!({"a": "y"})).unwrap_err();
        assert!(errors.iter().any(|e| e.starts_with("a: expected a string matching ^x")), "{errors:?}");
        assert!(validate_args(&schema, &json!({"a": "x1", "b": 1})).is_ok());
        assert!(validate_args(&schema, &json!({"a": "x1"})).is_err());
    }

    #[test]
    fn a_schema_that_is_not_json_schema_is_not_enforced() {
        let broken = json!({"type": "object", "required": "a"});
        assert!(validate_args(&broken, &json!({"anything": 1})).is_ok());
    }
}
