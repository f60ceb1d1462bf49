//! Python's `repr()` and `str()` of JSON values: LangChain and LangGraph write values into text with
//! f-strings (`f"Updated todo list to {todos}"`, metadata in drawings), and weft writes the same text.
//!
//! Floats print as serde_json prints them, which differs from Python for exponents (`1e20`).

use serde_json::Value;

/// `value` as Python's `str()` prints it: a string bare, anything else as [`py_repr`].
pub fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// `value` as Python's `repr()` prints the equivalent Python value (`None`, `True`, `'text'`,
/// `{'key': [1, 2]}`).
pub fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

fn write_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => match (n.is_f64(), n.as_f64()) {
            (true, Some(f)) => out.push_str(&py_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(k, out);
                out.push_str(": ");
                write_repr(v, out);
            }
            out.push('}');
        }
    }
}

/// A float as Python's `repr` writes it: the shortest digits, `.0` on whole numbers, an exponent past 1e16
/// or under 1e-4 (with its sign and at least two digits).
fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let magnitude = f.abs();
    if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = exponent.strip_prefix('-').map_or(("+", exponent), |d| ("-", d));
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    let text = format!("{f}");
    if text.contains('.') { text } else { format!("{text}.0") }
}

fn write_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// `value` as Python's `json.dumps` writes it: `", "` and `": "` between items, non-ASCII characters
/// escaped (`\u00e9`).
pub fn py_json(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_json_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_str(k, out);
                out.push_str(": ");
                write_json(v, out);
            }
            out.push('}');
        }
    }
}

fn write_json_str(s: &str, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_print_as_python_prints_them() {
        assert_eq!(py_str(&Value::from("x")), "x");
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!({"k": ["a", 1, false]})), "{'k': ['a', 1, False]}");
        assert_eq!(py_repr(&Value::from("it's")), "\"it's\"");
        assert_eq!(py_repr(&Value::from("a'b\"c")), "'a\\'b\"c'");
        assert_eq!(py_repr(&Value::from("tab\tnew\nbell\u{7}")), "'tab\\tnew\\nbell\\x07'");
        let value = json!({"a": [1, 2.5, true, null], "it's": "say \"hi\"\n", "q": "it's", "n": 1.0});
        assert_eq!(
            py_repr(&value),
            r#"{'a': [1, 2.5, True, None], "it's": 'say "hi"\n', 'q': "it's", 'n': 1.0}"#
        );
        assert_eq!(py_repr(&json!(1e20)), "1e+20");
        assert_eq!(py_repr(&json!(1.5e-7)), "1.5e-07");
        assert_eq!(py_repr(&json!(-0.0001)), "-0.0001");
        assert_eq!(py_repr(&json!("a\\b\u{1}\u{85}")), r"'a\\b\x01\x85'");
        assert_eq!(py_repr(&json!({})), "{}");
    }

    #[test]
    fn json_dumps_spacing_and_escapes() {
        let value = json!({"a": "\u{e9}\u{1f600}", "b": [1, 2.5, null, true]});
        assert_eq!(py_json(&value), r#"{"a": "\u00e9\ud83d\ude00", "b": [1, 2.5, null, true]}"#);
    }
}
