//! The texts a vector index embeds: values found at a JSON path of an item, as LangGraph reads them.
//!
//! Paths: `"$"` (the whole value), `"a.b"` (fields), `"a[0]"`, `"a[-1]"`, `"a[*]"` (list elements),
//! `"*"` (every field or element), `"{a,b.c}"` (several fields). Strings are taken as they are, numbers
//! and booleans as text, lists and maps as JSON with sorted keys; nulls and missing paths give nothing.

use serde_json::Value;

/// The texts at `path` in `value`.
pub fn texts_at_path(value: &Value, path: &str) -> Vec<String> {
    if path.is_empty() || path == "$" {
        return vec![canonical_json(value)];
    }
    let mut out = Vec::new();
    extract(value, &tokenize(path), &mut out);
    out
}

fn extract(value: &Value, tokens: &[String], out: &mut Vec<String>) {
    let Some((token, rest)) = tokens.split_first() else {
        if let Some(text) = as_text(value) {
            out.push(text);
        }
        return;
    };
    if let Some(index) = token.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let Value::Array(items) = value else { return };
        if index == "*" {
            items.iter().for_each(|item| extract(item, rest, out));
        } else if let Ok(i) = index.trim().parse::<i64>() {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if i < 0 { len + i } else { i };
            if let Some(item) = usize::try_from(at).ok().and_then(|at| items.get(at)) {
                extract(item, rest, out);
            }
        }
    } else if let Some(fields) = token.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        if !value.is_object() {
            return;
        }
        for field in fields.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let found = tokenize(field).iter().try_fold(value, |v, key| v.get(key.as_str()));
            if let Some(text) = found.and_then(as_text) {
                out.push(text);
            }
        }
    } else if token == "*" {
        match value {
            Value::Object(map) => map.values().for_each(|v| extract(v, rest, out)),
            Value::Array(items) => items.iter().for_each(|v| extract(v, rest, out)),
            _ => {}
        }
    } else if let Some(next) = value.as_object().and_then(|m| m.get(token)) {
        extract(next, rest, out);
    }
}

fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(_) | Value::Number(_) => Some(value.to_string()),
        Value::Array(_) | Value::Object(_) => Some(canonical_json(value)),
    }
}

/// JSON with object keys sorted at every level.
fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// Splits `a.b[0]{c,d}` into `a`, `b`, `[0]`, `{c,d}`.
fn tokenize(path: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' | '{' => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
                let close = if c == '[' { ']' } else { '}' };
                let mut group = String::from(c);
                let mut depth = 1;
                for n in chars.by_ref() {
                    group.push(n);
                    if n == c {
                        depth += 1;
                    } else if n == close {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                }
                tokens.push(group);
            }
            '.' => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn whole_value_is_json_with_sorted_keys() {
        assert_eq!(
            texts_at_path(&json!({"b": 1, "a": {"d": 2, "c": 3}}), "$"),
            vec![r#"{"a":{"c":3,"d":2},"b":1}"#]
        );
    }

    #[test]
    fn fields_indexes_and_wildcards() {
        let v =
            json!({"text": "hi", "tags": ["x", "y"], "n": 3, "nested": {"a": {"b": "deep"}}, "none": null});
        assert_eq!(texts_at_path(&v, "text"), vec!["hi"]);
        assert_eq!(texts_at_path(&v, "tags[*]"), vec!["x", "y"]);
        assert_eq!(texts_at_path(&v, "tags[-1]"), vec!["y"]);
        assert_eq!(texts_at_path(&v, "tags[5]"), Vec::<String>::new());
        assert_eq!(texts_at_path(&v, "n"), vec!["3"]);
        assert_eq!(texts_at_path(&v, "nested.a.b"), vec!["deep"]);
        assert_eq!(texts_at_path(&v, "nested.*.b"), vec!["deep"]);
        assert_eq!(texts_at_path(&v, "{text,nested.a.b}"), vec!["hi", "deep"]);
        assert_eq!(texts_at_path(&v, "none"), Vec::<String>::new());
        assert_eq!(texts_at_path(&v, "missing.x"), Vec::<String>::new());
        assert_eq!(texts_at_path(&v, "tags"), vec![r#"["x","y"]"#]);
    }
}
