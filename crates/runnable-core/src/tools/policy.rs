//! `ToolErrorPolicy`: what to do when a tool's body fails.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{InjectedArg, Tool, ToolContext, ToolOutput, ToolSpec};
use crate::error::{Error, Result};

type ErrorHandler = dyn Fn(&Error) -> String + Send + Sync;

/// What to do when a tool's body returns an error (LangChain's `handle_tool_error`).
///
/// The policy applies to errors of [`Tool::call`] only: arguments that break the schema are always
/// raised (as [`Error::ToolArguments`]), and so is control flow (interrupts, commands for a parent graph).
/// A handled error becomes the content of a tool message whose status is `error`.
#[derive(Clone, Default)]
pub enum ToolErrorPolicy {
    /// Return the error to the caller (the default).
    #[default]
    Raise,
    /// Send the error's own text to the model.
    Message,
    /// Send this fixed text to the model.
    Text(String),
    /// Send the text this function makes of the error to the model.
    Handler(Arc<ErrorHandler>),
}

impl ToolErrorPolicy {
    /// A policy that turns errors into text with `f`.
    pub fn handler(f: impl Fn(&Error) -> String + Send + Sync + 'static) -> Self {
        Self::Handler(Arc::new(f))
    }

    /// A policy that sends `text` to the model on any error.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// The text to send to the model for `err`, or `None` when the error must be raised.
    pub fn handle(&self, err: &Error) -> Option<String> {
        if err.is_control_flow() {
            return None;
        }
        match self {
            Self::Raise => None,
            Self::Message => Some(err.to_string()),
            Self::Text(text) => Some(text.clone()),
            Self::Handler(f) => Some(f(err)),
        }
    }
}

impl fmt::Debug for ToolErrorPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Raise => f.write_str("Raise"),
            Self::Message => f.write_str("Message"),
            Self::Text(text) => f.debug_tuple("Text").field(text).finish(),
            Self::Handler(_) => f.write_str("Handler(..)"),
        }
    }
}

/// A tool with an error policy of its own (see [`ToolExt::with_error_policy`](super::ToolExt)).
#[derive(Debug, Clone)]
pub struct WithErrorPolicy<T> {
    tool: T,
    policy: ToolErrorPolicy,
}

impl<T> WithErrorPolicy<T> {
    /// Applies `policy` to `tool`.
    pub fn new(tool: T, policy: ToolErrorPolicy) -> Self {
        Self { tool, policy }
    }

    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.tool
    }
}

#[async_trait]
impl<T: Tool> Tool for WithErrorPolicy<T> {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn args_schema(&self) -> &Value {
        self.tool.args_schema()
    }

    fn return_direct(&self) -> bool {
        self.tool.return_direct()
    }

    fn injected_args(&self) -> &[InjectedArg] {
        self.tool.injected_args()
    }

    fn error_policy(&self) -> ToolErrorPolicy {
        self.policy.clone()
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput> {
        self.tool.call(args, ctx).await
    }

    fn model_schema(&self) -> Cow<'_, Value> {
        self.tool.model_schema()
    }

    fn args_validator(&self) -> super::ArgsValidator {
        self.tool.args_validator()
    }

    fn spec(&self) -> ToolSpec {
        self.tool.spec()
    }
}

crate::impl_tool_runnable!([T: Tool] WithErrorPolicy<T>);
