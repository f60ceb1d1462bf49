//! f-string templates: `{name}` inserts a variable, `{{` and `}}` are literal braces.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Text(String),
    Var(String),
}

/// A parsed f-string template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FString {
    source: String,
    segments: Vec<Segment>,
}

impl FString {
    /// Parses `source`; an unbalanced or empty brace is [`Error::InvalidTemplate`] naming the template.
    pub(crate) fn parse(source: &str) -> Result<Self> {
        let mut segments = Vec::new();
        let mut text = String::new();
        let mut chars = source.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '{' if chars.next_if(|&(_, next)| next == '{').is_some() => text.push('{'),
                '}' if chars.next_if(|&(_, next)| next == '}').is_some() => text.push('}'),
                '}' => return Err(invalid(source, &format!("single '}}' at byte {at}"))),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            None => return Err(invalid(source, &format!("unclosed '{{' at byte {at}"))),
                            Some((_, '}')) => break,
                            Some((inner, '{')) => {
                                return Err(invalid(
                                    source,
                                    &format!("unexpected '{{' at byte {inner} inside a variable name"),
                                ));
                            }
                            Some((_, ch)) => name.push(ch),
                        }
                    }
                    if name.is_empty() {
                        return Err(invalid(source, &format!("empty variable '{{}}' at byte {at}")));
                    }
                    if !text.is_empty() {
                        segments.push(Segment::Text(std::mem::take(&mut text)));
                    }
                    segments.push(Segment::Var(name));
                }
                _ => text.push(c),
            }
        }
        if !text.is_empty() {
            segments.push(Segment::Text(text));
        }
        Ok(Self { source: source.to_owned(), segments })
    }

    /// The template text as written.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The variables in order of appearance (repeats included).
    pub(crate) fn variables(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Var(name) => Some(name.as_str()),
            Segment::Text(_) => None,
        })
    }

    /// The variable name when the whole template is exactly one variable (`"{history}"`).
    pub(crate) fn single_variable(&self) -> Option<&str> {
        match self.segments.as_slice() {
            [Segment::Var(name)] => Some(name),
            _ => None,
        }
    }

    /// Renders the template; `Err` carries the name of a variable that has no value.
    pub(crate) fn render(&self, values: &Map<String, Value>) -> std::result::Result<String, String> {
        let mut out = String::with_capacity(self.source.len());
        for segment in &self.segments {
            match segment {
                Segment::Text(text) => out.push_str(text),
                Segment::Var(name) => match values.get(name) {
                    Some(value) => out.push_str(&value_text(value)),
                    None => return Err(name.clone()),
                },
            }
        }
        Ok(out)
    }
}

/// A variable's value as text: strings as they are, anything else as JSON.
pub(crate) fn value_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

const EXCERPT_CHARS: usize = 80;

/// A short quotation of `text` for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}...", &text[..cut]),
    }
}

/// A value as JSON text for error messages, cut when long.
pub(crate) fn json_excerpt(value: &Value) -> String {
    let mut text = value.to_string();
    if let Some((cut, _)) = text.char_indices().nth(EXCERPT_CHARS) {
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

fn invalid(source: &str, what: &str) -> Error {
    Error::InvalidTemplate(format!(
        "{what} in template {} (write '{{{{' or '}}}}' for a literal brace)",
        excerpt(source)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_variables_and_escapes() {
        let t = FString::parse("{{a}} {b} and {c}{b}").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["b", "c", "b"]);
        let values = serde_json::json!({"b": "B", "c": 3});
        assert_eq!(t.render(values.as_object().unwrap()).unwrap(), "{a} B and 3B");
    }

    #[test]
    fn single_variable_is_only_a_whole_variable() {
        assert_eq!(FString::parse("{x}").unwrap().single_variable(), Some("x"));
        assert_eq!(FString::parse(" {x}").unwrap().single_variable(), None);
        assert_eq!(FString::parse("{x}{y}").unwrap().single_variable(), None);
    }

    #[test]
    fn excerpt_cuts_long_text() {
        let long = "x".repeat(100);
        assert_eq!(excerpt(&long), format!("{:?}...", "x".repeat(80)));
        assert_eq!(excerpt("short"), "\"short\"");
        assert_eq!(json_excerpt(&Value::String("x".repeat(100))), format!("\"{}...", "x".repeat(79)));
        assert_eq!(json_excerpt(&serde_json::json!([1, "a"])), "[1,\"a\"]");
    }
}
