//! JSON values written as Python's `repr` writes the objects they parse to: the text LangGraph's MCP
//! endpoint answers a tool call with.

use serde_json::Value;

/// `repr()` of the Python object `value` parses to (`dict`, `list`, `str`, `int`, `float`, `bool`, `None`).
pub(super) fn repr(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => match (n.is_f64(), n.as_f64()) {
            (true, Some(f)) => out.push_str(&float(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string(key, out);
                out.push_str(": ");
                write(item, out);
            }
            out.push('}');
        }
    }
}

/// A float as Python writes it: the shortest digits, `.0` on whole numbers, an exponent past 1e16 or
/// under 1e-4 (with its sign and at least two digits).
fn float(f: f64) -> String {
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

/// A string in quotes as Python picks them: single, or double when it holds a single quote and no double.
fn string(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::repr;

    #[test]
    fn values_read_as_python_writes_them() {
        let value = json!({"a": [1, 2.5, true, null], "it's": "say \"hi\"\n", "q": "it's", "n": 1.0});
        assert_eq!(
            repr(&value),
            r#"{'a': [1, 2.5, True, None], "it's": 'say "hi"\n', 'q': "it's", 'n': 1.0}"#
        );
        assert_eq!(repr(&json!(1e20)), "1e+20");
        assert_eq!(repr(&json!(1.5e-7)), "1.5e-07");
        assert_eq!(repr(&json!("a\\b\u{1}")), r"'a\\b\x01'");
        assert_eq!(repr(&json!({})), "{}");
    }
}
