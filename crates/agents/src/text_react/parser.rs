//! The ReAct output parser: `Action:` / `Action Input:` or `Final Answer:`.
//!
//! The rules are LangChain's `ReActSingleInputOutputParser`, which reads the model output with the
//! regular expression `Action\s*\d*\s*:[\s]*(.*?)[\s]*Action\s*\d*\s*Input\s*\d*\s*:[\s]*(.*)` (dot
//! matching newlines). The pattern is matched here by hand, with the same leftmost, lazy-then-greedy
//! semantics, so that no regular expression engine is needed.

use std::borrow::Cow;

use async_trait::async_trait;
use serde_json::Value;
use weft_runnable_core::parsers::AsText;
use weft_runnable_core::{
    OutputParserError, Result, RunKind, RunValue, Runnable, RunnableConfig, trace_invoke,
};

use super::action::{AgentAction, AgentDecision, AgentFinish};

/// The marker of a final answer.
pub const FINAL_ANSWER_ACTION: &str = "Final Answer:";

/// The observation sent back to the model when its output has no `Action:`.
pub const MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE: &str =
    "Invalid Format: Missing 'Action:' after 'Thought:'";

/// The observation sent back to the model when its output has an `Action:` but no `Action Input:`.
pub const MISSING_ACTION_INPUT_AFTER_ACTION_ERROR_MESSAGE: &str =
    "Invalid Format: Missing 'Action Input:' after 'Action:'";

/// The start of the error raised when an output holds both a final answer and an action.
pub const FINAL_ANSWER_AND_PARSABLE_ACTION_ERROR_MESSAGE: &str =
    "Parsing LLM output produced both a final answer and a parse-able action:";

/// Parses one ReAct model output into an action or a final answer.
///
/// In order:
/// 1. An `Action:` followed (anywhere later) by an `Action Input:` is an action; the words may carry a
///    number (`Action 1:`, `Action 1 Input 1:`). The tool is the text between the two, trimmed; the input
///    is everything after `Action Input:`, stripped of spaces and then of double quotes at both ends.
///    If the output also contains `Final Answer:`, that is an error (`Parsing LLM output produced both a
///    final answer and a parse-able action:: <text>`), not sent back to the model.
/// 2. Otherwise, `Final Answer:` finishes with the text after its last occurrence, trimmed.
/// 3. Otherwise the output is an error, ``Could not parse LLM output: `<text>` ``: with the observation
///    [`MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE`] when there is no `Action:`, or
///    [`MISSING_ACTION_INPUT_AFTER_ACTION_ERROR_MESSAGE`] when there is no `Action Input:`, both marked to
///    be sent back to the model; any other shape is an error without an observation.
///
/// ```
/// use weft_agents::text_react::{AgentDecision, parse_react_output};
///
/// let decision = parse_react_output("Thought: look it up\nAction: search\nAction Input: \"weft\"").unwrap();
/// let AgentDecision::Action(action) = decision else { panic!("expected an action") };
/// assert_eq!((action.tool.as_str(), action.input_text().as_str()), ("search", "weft"));
///
/// let err = parse_react_output("I am not sure").unwrap_err();
/// assert_eq!(err.observation.as_deref(), Some("Invalid Format: Missing 'Action:' after 'Thought:'"));
/// ```
pub fn parse_react_output(text: &str) -> std::result::Result<AgentDecision, OutputParserError> {
    let includes_answer = text.contains(FINAL_ANSWER_ACTION);
    if let Some((tool, input)) = match_action(text) {
        if includes_answer {
            return Err(OutputParserError::new(format!(
                "{FINAL_ANSWER_AND_PARSABLE_ACTION_ERROR_MESSAGE}: {text}"
            )));
        }
        let tool_input = input.trim_matches(' ').trim_matches('"');
        return Ok(AgentDecision::Action(AgentAction {
            tool: tool.trim_matches(is_space).to_owned(),
            tool_input: Value::String(tool_input.to_owned()),
            log: text.to_owned(),
        }));
    }
    if includes_answer {
        let answer = text.rsplit(FINAL_ANSWER_ACTION).next().unwrap_or_default();
        return Ok(AgentDecision::Finish(AgentFinish::new(answer.trim_matches(is_space), text)));
    }
    let message = format!("Could not parse LLM output: `{text}`");
    if !text.match_indices("Action").any(|(at, _)| action_header(text, at).is_some()) {
        return Err(OutputParserError::new(message)
            .with_llm_output(text)
            .send_to_llm(MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE));
    }
    if !text.match_indices("Action").any(|(at, _)| action_input_header(text, at).is_some()) {
        return Err(OutputParserError::new(message)
            .with_llm_output(text)
            .send_to_llm(MISSING_ACTION_INPUT_AFTER_ACTION_ERROR_MESSAGE));
    }
    Err(OutputParserError::new(message))
}

/// Whitespace as Python's regular expressions and `str.strip` see it (Unicode white space plus the
/// four ASCII separators U+001C..U+001F).
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The first byte offset at or after `at` whose character does not satisfy `pred`.
fn skip(text: &str, at: usize, pred: fn(char) -> bool) -> usize {
    text[at..].char_indices().find(|&(_, c)| !pred(c)).map_or(text.len(), |(off, _)| at + off)
}

/// `\s*\d*\s*` from `at`.
fn skip_number(text: &str, at: usize) -> usize {
    let at = skip(text, at, is_space);
    let at = skip(text, at, |c| c.is_ascii_digit());
    skip(text, at, is_space)
}

/// Matches `Action\s*\d*\s*:` at byte `at`; the end of the match.
fn action_header(text: &str, at: usize) -> Option<usize> {
    let rest = text.get(at..)?.strip_prefix("Action")?;
    let after = skip_number(text, text.len() - rest.len());
    text[after..].starts_with(':').then_some(after + 1)
}

/// Matches `Action\s*\d*\s*Input\s*\d*\s*:` at byte `at`; the end of the match.
fn action_input_header(text: &str, at: usize) -> Option<usize> {
    let rest = text.get(at..)?.strip_prefix("Action")?;
    let after = skip_number(text, text.len() - rest.len());
    let rest = text[after..].strip_prefix("Input")?;
    let after = skip_number(text, text.len() - rest.len());
    text[after..].starts_with(':').then_some(after + 1)
}

/// The tool text and the raw input text of the leftmost action in `text`, if any.
///
/// For each `Action` (leftmost first) that opens an `Action:` header, the tool text is the shortest
/// stretch after the header's trailing whitespace that is followed by optional whitespace and an
/// `Action Input:` header; the input is everything after that header and its trailing whitespace.
fn match_action(text: &str) -> Option<(&str, &str)> {
    for (start, _) in text.match_indices("Action") {
        let Some(header_end) = action_header(text, start) else { continue };
        let tool_start = skip(text, header_end, is_space);
        let mut tool_end = tool_start;
        loop {
            let keyword = skip(text, tool_end, is_space);
            if let Some(input_header_end) = action_input_header(text, keyword) {
                let input_start = skip(text, input_header_end, is_space);
                return Some((&text[tool_start..tool_end], &text[input_start..]));
            }
            match text[tool_end..].chars().next() {
                Some(c) => tool_end += c.len_utf8(),
                None => break,
            }
        }
        // Every later `Action:` header starts further right, so it would search a subset of the same
        // positions for `Action Input:`: none can match.
        return None;
    }
    None
}

/// LangChain's `ReActSingleInputOutputParser` as a runnable: model text (or an AI message) in, an
/// [`AgentDecision`] out, traced as a parser run. Parse errors are
/// [`Error::OutputParser`](weft_runnable_core::Error::OutputParser) with the rules of
/// [`parse_react_output`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ReActSingleInputOutputParser;

const PARSER_NAME: &str = "ReActSingleInputOutputParser";

#[async_trait]
impl<I: AsText + RunValue> Runnable<I, AgentDecision> for ReActSingleInputOutputParser {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(PARSER_NAME)
    }

    fn kind(&self) -> RunKind {
        RunKind::Parser
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<AgentDecision> {
        trace_invoke(PARSER_NAME, RunKind::Parser, input, config, |input, _| async move {
            parse_react_output(&input.as_text()).map_err(Into::into)
        })
        .await
    }
}
