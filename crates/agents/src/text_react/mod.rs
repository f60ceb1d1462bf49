//! The classic text ReAct agent, for models without function calling: the model writes
//! `Thought:` / `Action:` / `Action Input:` lines, the executor runs the tool and writes the
//! `Observation:` back into the prompt, until the model writes `Final Answer:`.
//!
//! - [`create_text_react_agent`] builds the agent (scratchpad, prompt, model bound to the stop sequence
//!   `\nObservation`, [`ReActSingleInputOutputParser`]) from a completion or chat model, tools and a
//!   prompt such as [`react_prompt`].
//! - [`AgentExecutor`] runs it: limits, early stopping, parsing-error handling, unknown tools,
//!   direct-return tools, trimmed steps. It is a `Runnable<Value, Value>`.
//! - [`AgentLoop`] and [`AgentRun`] are the same loop without I/O: a serializable state machine a graph
//!   node can drive and checkpoint.
//!
//! The formats, rules and texts are LangChain's (`langchain_classic.agents`): see `docs/text-react.md`.
//!
//! ```
//! use serde_json::json;
//! use weft_agents::text_react::{AgentExecutor, create_text_react_agent, react_prompt};
//! use weft_runnable_core::fakes::FakeListLlm;
//! use weft_runnable_core::{Runnable, RunnableConfig, StructuredTool, ToolExt};
//! # tokio_test::block_on(async {
//! let shout = StructuredTool::from_fn(
//!     "shout",
//!     "Upper-cases its input.",
//!     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
//!     |args, _| async move { Ok(args["text"].as_str().unwrap_or_default().to_uppercase()) },
//! )
//! .shared();
//! let model = FakeListLlm::new([
//!     " I should shout.\nAction: shout\nAction Input: hello",
//!     " I now know the final answer.\nFinal Answer: HELLO",
//! ]);
//! let tools = vec![shout];
//! let agent = create_text_react_agent(model, &tools, react_prompt().unwrap()).unwrap();
//! let executor = AgentExecutor::new(agent, tools).unwrap();
//! let out = executor.invoke(json!({"input": "say hello loudly"}), &RunnableConfig::default()).await.unwrap();
//! assert_eq!(out, json!({"input": "say hello loudly", "output": "HELLO"}));
//! # });
//! ```

mod action;
mod agent;
mod error;
mod executor;
mod parser;
mod prompt;
mod state;

pub use action::{AgentAction, AgentDecision, AgentFinish, AgentStep};
pub use agent::{
    REQUIRED_PROMPT_VARIABLES, StopSequence, TextReactAgent, TextReactOptions, ToolsRenderer,
    create_text_react_agent, create_text_react_agent_with,
};
pub use error::TextReactError;
pub use executor::AgentExecutor;
pub use parser::{
    FINAL_ANSWER_ACTION, FINAL_ANSWER_AND_PARSABLE_ACTION_ERROR_MESSAGE,
    MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE, MISSING_ACTION_INPUT_AFTER_ACTION_ERROR_MESSAGE,
    ReActSingleInputOutputParser, parse_react_output,
};
pub use prompt::{
    LLM_PREFIX, OBSERVATION_PREFIX, REACT_PROMPT_TEMPLATE, STOP_SEQUENCE, format_log_to_str,
    format_log_to_str_with, react_prompt, render_text_description, render_tool_names,
};
pub use state::{
    AgentLoop, AgentRun, DEFAULT_MAX_ITERATIONS, EXCEPTION_TOOL_NAME, EarlyStopping, GENERATE_FINAL_SUFFIX,
    INVALID_RESPONSE_OBSERVATION, INVALID_TOOL_NAME, Next, ParsingErrorPolicy, STOPPED_OUTPUT, ToolRun,
    TrimSteps, invalid_tool_observation,
};
