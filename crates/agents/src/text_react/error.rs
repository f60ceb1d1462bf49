//! `TextReactError`: what can go wrong in a text ReAct agent or its executor.

use weft_runnable_core::{Error, OutputParserError};

/// An error of the text ReAct agent or of [`AgentExecutor`](super::AgentExecutor).
///
/// It converts into weft's [`Error`] (as [`Error::Custom`]), which is what runnables return; get it back
/// with [`TextReactError::from_error`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TextReactError {
    /// The model's output could not be parsed and the executor does not handle parsing errors.
    #[error(
        "an output parsing error occurred; to send this error back to the agent and have it try again, \
         set handle_parsing_errors on the AgentExecutor; the error: {0}"
    )]
    OutputParsing(OutputParserError),
    /// The prompt given to `create_text_react_agent` lacks variables the agent fills.
    #[error("prompt missing required variables: {missing:?}")]
    MissingPromptVariables {
        /// The missing variables, sorted.
        missing: Vec<String>,
    },
    /// Two tools given to the executor have the same name.
    #[error("two tools are named '{0}'; tool names must be unique")]
    DuplicateTool(String),
    /// The executor's input is not a JSON object (or a string, taken as `input`).
    #[error("the agent executor takes a JSON object of prompt variables (or a string for 'input'), got {0}")]
    InvalidInput(String),
    /// An event was fed to a run that was waiting for another one (a tool output while the run waits for
    /// the agent, anything after it finished).
    #[error("the agent run waits for {waiting_for}, but received {received}")]
    UnexpectedEvent {
        /// What the run waits for.
        waiting_for: &'static str,
        /// What it received.
        received: &'static str,
    },
}

impl TextReactError {
    /// The text ReAct error inside a weft error, if it is one.
    pub fn from_error(err: &Error) -> Option<&TextReactError> {
        err.downcast_custom::<TextReactError>()
    }
}

impl From<TextReactError> for Error {
    fn from(err: TextReactError) -> Self {
        Error::custom(err)
    }
}
