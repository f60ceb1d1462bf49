//! `ToolContext` (what a running tool knows besides its arguments) and injected arguments.

use serde_json::{Map, Value};

use crate::config::RunnableConfig;
use crate::error::{Error, Result};

/// What a tool knows besides its arguments: the id of the call it answers, the config of its run, and
/// values the caller offers for injection (the graph state, named values).
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    tool_call_id: Option<String>,
    config: RunnableConfig,
    state: Option<Value>,
    values: Map<String, Value>,
}

impl ToolContext {
    /// A context for a run under `config`.
    pub fn new(config: RunnableConfig) -> Self {
        Self { config, ..Self::default() }
    }

    /// Sets the id of the tool call being answered.
    pub fn with_tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    /// Offers the caller's state (the graph state, as JSON) for [`Injection::State`] arguments.
    pub fn with_state(mut self, state: Value) -> Self {
        self.state = Some(state);
        self
    }

    /// Offers a named value for [`Injection::Value`] arguments.
    pub fn with_value(mut self, name: impl Into<String>, value: Value) -> Self {
        self.values.insert(name.into(), value);
        self
    }

    /// Replaces the config (the tool's own run hands its children a child config).
    pub fn with_config(mut self, config: RunnableConfig) -> Self {
        self.config = config;
        self
    }

    /// The id of the tool call being answered, when the tool was called by a model.
    pub fn tool_call_id(&self) -> Option<&str> {
        self.tool_call_id.as_deref()
    }

    /// The config of the tool's run; pass it to runnables the tool calls.
    pub fn config(&self) -> &RunnableConfig {
        &self.config
    }

    /// Takes the config out (a default one is left), for a caller that gives the context a new one.
    pub(crate) fn take_config(&mut self) -> RunnableConfig {
        std::mem::take(&mut self.config)
    }

    /// The caller's state, if it offered one.
    pub fn state(&self) -> Option<&Value> {
        self.state.as_ref()
    }

    /// A named value the caller offered.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }
}

/// Where an injected argument's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Injection {
    /// The id of the tool call (LangChain's `InjectedToolCallId`).
    ToolCallId,
    /// The caller's whole state (`InjectedState`).
    State,
    /// One key of the caller's state (`InjectedState("key")`).
    StateKey(String),
    /// A named value offered with [`ToolContext::with_value`].
    Value(String),
}

/// An argument the model does not see: removed from the model's schema and filled from the context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedArg {
    /// The argument's field name.
    pub field: String,
    /// Where its value comes from.
    pub source: Injection,
}

impl InjectedArg {
    /// `field` receives the tool call id.
    pub fn tool_call_id(field: impl Into<String>) -> Self {
        Self { field: field.into(), source: Injection::ToolCallId }
    }

    /// `field` receives the caller's whole state.
    pub fn state(field: impl Into<String>) -> Self {
        Self { field: field.into(), source: Injection::State }
    }

    /// `field` receives the value under `key` in the caller's state.
    pub fn state_key(field: impl Into<String>, key: impl Into<String>) -> Self {
        Self { field: field.into(), source: Injection::StateKey(key.into()) }
    }

    /// `field` receives the context value named `name`.
    pub fn value(field: impl Into<String>, name: impl Into<String>) -> Self {
        Self { field: field.into(), source: Injection::Value(name.into()) }
    }

    /// The value for this argument, or an error naming what the caller did not provide.
    pub fn resolve(&self, tool: &str, ctx: &ToolContext) -> Result<Value> {
        let missing = |what: &str| Error::Tool {
            tool: tool.to_owned(),
            message: format!(
                "injected argument '{}' needs {what}, which the caller did not provide",
                self.field
            ),
        };
        match &self.source {
            Injection::ToolCallId => ctx
                .tool_call_id()
                .map(|id| Value::String(id.to_owned()))
                .ok_or_else(|| missing("the tool call id")),
            Injection::State => ctx.state().cloned().ok_or_else(|| missing("the state")),
            Injection::StateKey(key) => ctx
                .state()
                .and_then(|s| s.get(key))
                .cloned()
                .ok_or_else(|| missing(&format!("the state key '{key}'"))),
            Injection::Value(name) => {
                ctx.value(name).cloned().ok_or_else(|| missing(&format!("the context value '{name}'")))
            }
        }
    }
}

/// Fills every injected argument of `args` (an object) from the context, replacing whatever the model sent.
pub(crate) fn inject_args(
    tool: &str,
    injected: &[InjectedArg],
    args: Value,
    ctx: &ToolContext,
) -> Result<Value> {
    if injected.is_empty() {
        return Ok(args);
    }
    let mut map = match args {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => {
            return Err(Error::ToolArguments {
                tool: tool.to_owned(),
                args: Box::new(other),
                errors: vec!["(root): expected an object".to_owned()],
            });
        }
    };
    for arg in injected {
        map.insert(arg.field.clone(), arg.resolve(tool, ctx)?);
    }
    Ok(Value::Object(map))
}
