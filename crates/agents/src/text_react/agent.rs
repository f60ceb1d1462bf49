//! `create_text_react_agent`: prompt, model and parser as one runnable that decides the next step.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use weft_runnable_core::parsers::AsText;
use weft_runnable_core::{
    BoxRunnable, Error, PromptTemplate, PromptValue, RunValue, Runnable, RunnableExt, RunnableLambda,
    RunnableParallel, RunnablePassthrough, SharedTool,
};

use super::action::{AgentDecision, AgentStep};
use super::error::TextReactError;
use super::parser::ReActSingleInputOutputParser;
use super::prompt::{STOP_SEQUENCE, format_log_to_str, render_text_description, render_tool_names};

/// The variables a ReAct prompt must have (as input or pre-filled variables).
pub const REQUIRED_PROMPT_VARIABLES: [&str; 3] = ["agent_scratchpad", "tool_names", "tools"];

/// How tools are described in the prompt's `tools` variable.
pub type ToolsRenderer = Arc<dyn Fn(&[SharedTool]) -> String + Send + Sync>;

/// Which stop sequences are bound to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StopSequence {
    /// `["\nObservation"]`, so that the model stops before writing an observation itself.
    #[default]
    Observation,
    /// These sequences.
    Custom(Vec<String>),
    /// None: for models that do not support stop sequences.
    Disabled,
}

/// Options of [`create_text_react_agent_with`].
#[derive(Clone, Default)]
pub struct TextReactOptions {
    /// The stop sequences bound to the model.
    pub stop_sequence: StopSequence,
    /// How tools are described; [`render_text_description`] when `None`.
    pub tools_renderer: Option<ToolsRenderer>,
}

impl std::fmt::Debug for TextReactOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextReactOptions")
            .field("stop_sequence", &self.stop_sequence)
            .field("tools_renderer", &self.tools_renderer.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

/// A text ReAct agent: a runnable from the executor's input (the user's variables plus
/// `intermediate_steps`) to the next [`AgentDecision`]. See [`create_text_react_agent`].
pub type TextReactAgent = BoxRunnable<Value, AgentDecision>;

/// Builds the ReAct agent for a model without function calling (LangChain's `create_react_agent` of
/// `langchain_classic.agents`), with the default options: stop sequence `\nObservation` and tools
/// described by [`render_text_description`].
///
/// The agent is the sequence
/// `assign(agent_scratchpad) | prompt | model.bind(stop) | ReActSingleInputOutputParser`: the scratchpad
/// is [`format_log_to_str`] of the input's `intermediate_steps` (a JSON list of [`AgentStep`]s; an input
/// that already carries a string `agent_scratchpad` keeps it), and the prompt is pre-filled with `tools`
/// and `tool_names` (the names, comma-separated). The model is a completion model
/// (`Runnable<PromptValue, String>`) or a chat model (`Runnable<PromptValue, AiMessage>`, which sees the
/// prompt as one human message).
///
/// A prompt lacking any of `tools`, `tool_names` and `agent_scratchpad` is
/// [`TextReactError::MissingPromptVariables`].
pub fn create_text_react_agent<M, O>(
    model: M,
    tools: &[SharedTool],
    prompt: PromptTemplate,
) -> Result<TextReactAgent, TextReactError>
where
    M: Runnable<PromptValue, O> + 'static,
    O: AsText + RunValue,
{
    create_text_react_agent_with(model, tools, prompt, TextReactOptions::default())
}

/// [`create_text_react_agent`] with other stop sequences or another way to describe tools.
pub fn create_text_react_agent_with<M, O>(
    model: M,
    tools: &[SharedTool],
    prompt: PromptTemplate,
    options: TextReactOptions,
) -> Result<TextReactAgent, TextReactError>
where
    M: Runnable<PromptValue, O> + 'static,
    O: AsText + RunValue,
{
    let mut known = prompt.input_variables();
    known.extend(prompt.partial_variables());
    let missing: Vec<String> = REQUIRED_PROMPT_VARIABLES
        .iter()
        .filter(|name| !known.iter().any(|k| k == *name))
        .map(|name| (*name).to_owned())
        .collect();
    if !missing.is_empty() {
        return Err(TextReactError::MissingPromptVariables { missing });
    }
    let rendered = match &options.tools_renderer {
        Some(render) => render(tools),
        None => render_text_description(tools),
    };
    let prompt = prompt.partial("tools", rendered).partial("tool_names", render_tool_names(tools));
    let scratchpad = RunnablePassthrough::assign(
        RunnableParallel::new().with("agent_scratchpad", RunnableLambda::try_new(scratchpad_of)),
    );
    let stop = match options.stop_sequence {
        StopSequence::Observation => Some(vec![STOP_SEQUENCE.to_owned()]),
        StopSequence::Custom(stop) => Some(stop),
        StopSequence::Disabled => None,
    };
    let agent = match stop {
        Some(stop) => {
            let mut kwargs = Map::new();
            kwargs.insert("stop".to_owned(), json!(stop));
            scratchpad.pipe(prompt).pipe(model.bind(kwargs)).pipe(ReActSingleInputOutputParser).boxed()
        }
        None => scratchpad.pipe(prompt).pipe(model).pipe(ReActSingleInputOutputParser).boxed(),
    };
    Ok(agent)
}

/// The scratchpad for an agent input: its own `agent_scratchpad` string if it has one, else
/// [`format_log_to_str`] of its `intermediate_steps`.
fn scratchpad_of(input: Value) -> weft_runnable_core::Result<String> {
    if let Some(Value::String(scratchpad)) = input.get("agent_scratchpad") {
        return Ok(scratchpad.clone());
    }
    let steps: Vec<AgentStep> = match input.get("intermediate_steps") {
        None | Some(Value::Null) => Vec::new(),
        Some(steps) => serde_json::from_value(steps.clone()).map_err(|e| {
            Error::InvalidInput(format!("intermediate_steps must be a list of agent steps: {e}"))
        })?,
    };
    Ok(format_log_to_str(&steps))
}
