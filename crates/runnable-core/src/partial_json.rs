//! Parsing JSON that a model is still streaming: unterminated strings, objects and arrays are completed the
//! way langchain-core's `parse_partial_json` completes them.

use serde_json::Value;

/// Parses a possibly unfinished JSON document.
///
/// Complete JSON parses as usual (raw control characters inside strings are tolerated, as Python's
/// `json.loads(strict=False)` tolerates them). Otherwise an open string is closed, open objects and arrays
/// are closed in reverse order, and if that still does not parse, characters are dropped from the end
/// until it does: a dangling key without a value or a trailing comma disappears that way. Returns `None`
/// when nothing parses, or when a closing bracket does not match the open one.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::parse_partial_json;
///
/// assert_eq!(parse_partial_json(r#"{"name": "Al"#), Some(json!({"name": "Al"})));
/// assert_eq!(parse_partial_json(r#"{"name": "Alice", "ag"#), Some(json!({"name": "Alice"})));
/// assert_eq!(parse_partial_json(r#"[1, 2, "#), Some(json!([1, 2])));
/// assert_eq!(parse_partial_json("not json"), None);
/// ```
pub fn parse_partial_json(s: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(s) {
        return Some(value);
    }

    let mut chars: Vec<char> = Vec::with_capacity(s.len() + 8);
    let mut closers: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;

    for c in s.chars() {
        if in_string {
            if c == '"' && !escaped {
                in_string = false;
            } else if c == '\\' {
                escaped = !escaped;
            } else {
                if (c as u32) < 0x20 && !escaped {
                    push_escaped_control(&mut chars, c);
                    continue;
                }
                escaped = false;
            }
        } else {
            match c {
                '"' => {
                    in_string = true;
                    escaped = false;
                }
                '{' => closers.push('}'),
                '[' => closers.push(']'),
                '}' | ']' => {
                    if closers.last() == Some(&c) {
                        closers.pop();
                    } else {
                        return None;
                    }
                }
                _ => {}
            }
        }
        chars.push(c);
    }

    if in_string {
        if escaped {
            // A lone backslash at the end cannot start an escape any more.
            chars.pop();
        }
        chars.push('"');
    }
    closers.reverse();

    // Try the text with its brackets closed, dropping one character before the closers after each failure.
    // Editing one buffer in place keeps this linear when parses fail early (text before a code fence).
    let mut prefix_len = chars.iter().map(|c| c.len_utf8()).sum::<usize>();
    let mut candidate: String = chars.into_iter().chain(closers).collect();
    while prefix_len > 0 {
        if let Ok(value) = serde_json::from_str(&candidate) {
            return Some(value);
        }
        let last = candidate[..prefix_len].char_indices().next_back().map_or(0, |(i, _)| i);
        candidate.remove(last);
        prefix_len = last;
    }
    None
}

/// Writes a raw control character found inside a string as its JSON escape.
fn push_escaped_control(chars: &mut Vec<char>, c: char) {
    match c {
        '\n' => chars.extend(['\\', 'n']),
        '\r' => chars.extend(['\\', 'r']),
        '\t' => chars.extend(['\\', 't']),
        other => chars.extend(format!("\\u{:04x}", other as u32).chars()),
    }
}

/// Parses JSON out of a model's answer: the whole text, or else what follows a Markdown code fence
/// (```` ```json ````), with surrounding whitespace and backticks stripped; unfinished JSON is completed
/// with [`parse_partial_json`] (langchain-core's `parse_json_markdown`).
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::parse_json_markdown;
///
/// let text = "Here you are:\n```json\n{\"a\": 1}\n```";
/// assert_eq!(parse_json_markdown(text), Some(json!({"a": 1})));
/// ```
pub fn parse_json_markdown(text: &str) -> Option<Value> {
    if let Some(value) = parse_stripped(text) {
        return Some(value);
    }
    let fenced = text.find("```").map(|start| {
        let rest = &text[start + 3..];
        rest.strip_prefix("json").unwrap_or(rest)
    })?;
    parse_stripped(fenced)
}

fn parse_stripped(text: &str) -> Option<Value> {
    let trimmed = text.trim_matches(|c| matches!(c, ' ' | '\n' | '\r' | '\t' | '`'));
    parse_partial_json(trimmed)
}
