//! The chat template handed to llama-server for Qwen2.5-Coder: the model's own template (its GGUF
//! metadata `tokenizer.chat_template`) with tool calls written as a fenced ```json block.
//!
//! Why: the template tells the model to wrap a tool call in `<tool_call></tool_call>` tags, but the 0.5B
//! coder model writes a fenced ```json block instead. llama-server derives the parser (and, for a
//! required tool choice, the grammar) of tool calls from how the template renders them, so with the
//! original template the model's calls come back as plain text. Rewritten, the instructions, the
//! model's habit and the parser agree, and tool calls come back in OpenAI's shape.

/// Each rewrite: the exact text of the original template and what replaces it. Each must occur exactly
/// once, so a different template is refused rather than half rewritten.
const REWRITES: [(&str, &str); 3] = [
    // The instructions of the system prompt when tools are given.
    (
        r#"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"#,
        r#"within a fenced json code block:\n```json\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n```"#,
    ),
    // The start of each tool call of an assistant message in the history.
    (r#"'\n<tool_call>\n{"name": "'"#, r#"'\n```json\n{"name": "'"#),
    // Its end.
    (r#"'}\n</tool_call>'"#, r#"'}\n```'"#),
];

/// The template with its tool calls written as fenced json blocks.
pub(crate) fn rewrite_tool_calls(template: &str) -> Result<String, String> {
    let mut out = template.to_owned();
    for (from, to) in REWRITES {
        match out.matches(from).count() {
            1 => out = out.replacen(from, to, 1),
            count => {
                return Err(format!(
                    "the chat template is not the expected one: `{from}` occurs {count} times instead of once"
                ));
            }
        }
    }
    if out.contains("tool_call>") {
        return Err("the chat template still mentions `tool_call>` tags after the rewrite".to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tool-call parts of Qwen2.5-Coder-0.5B-Instruct's template, as its GGUF carries it.
    const ORIGINAL: &str = r#"{%- if tools %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- endif %}
{%- for message in messages %}
        {%- for tool_call in message.tool_calls %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
{%- endfor %}"#;

    #[test]
    fn the_three_tool_call_places_use_a_json_fence() {
        let rewritten = rewrite_tool_calls(ORIGINAL).unwrap();
        assert!(!rewritten.contains("tool_call>"), "{rewritten}");
        assert!(
            rewritten.contains(r#"within a fenced json code block:\n```json\n{\"name\": <function-name>"#)
        );
        assert!(rewritten.contains(r#"{{- '\n```json\n{"name": "' }}"#), "{rewritten}");
        assert!(rewritten.contains(r#"{{- '}\n```' }}"#), "{rewritten}");
        // Everything else is untouched.
        assert!(rewritten.contains("{{- tool_call.arguments | tojson }}"));
        assert_eq!(rewritten.lines().count(), ORIGINAL.lines().count());
    }

    #[test]
    fn another_template_is_refused() {
        let err = rewrite_tool_calls("{{ messages }}").unwrap_err();
        assert!(err.contains("occurs 0 times instead of once"), "{err}");
        let doubled = format!("{ORIGINAL}{ORIGINAL}");
        assert!(rewrite_tool_calls(&doubled).unwrap_err().contains("occurs 2 times"));
    }

    #[test]
    fn a_leftover_tag_is_refused() {
        let extra = format!("{ORIGINAL}{{{{- '<tool_call>' }}}}");
        let err = rewrite_tool_calls(&extra).unwrap_err();
        assert!(err.contains("still mentions"), "{err}");
    }
}
