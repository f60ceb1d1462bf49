//! `CallOptions`: per-call settings of a chat model (stop sequences, tools, tool choice, response format).

use serde_json::{Map, Value, json};

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::tools::ToolSpec;

/// Which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides whether to call a tool.
    Auto,
    /// The model must call some tool (LangChain's `"any"`, OpenAI's `"required"`).
    Required,
    /// The model must not call a tool.
    None,
    /// The model must call the tool with this name.
    Tool(String),
}

impl ToolChoice {
    /// Reads LangChain's and OpenAI's forms: `"auto"`, `"any"`/`"required"`, `"none"`, a tool name, or
    /// `{"type": "function", "function": {"name": ...}}`.
    pub fn from_value(value: &Value) -> Result<Self> {
        match value {
            Value::String(s) => Ok(Self::from(s.as_str())),
            Value::Object(o) => o
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("name"))
                .and_then(Value::as_str)
                .map(|name| Self::Tool(name.to_owned()))
                .ok_or_else(|| {
                    Error::InvalidInput(format!("tool_choice object without a tool name: {value}"))
                }),
            other => {
                Err(Error::InvalidInput(format!("tool_choice must be a string or an object, got {other}")))
            }
        }
    }

    /// OpenAI's form: `"auto"`, `"required"`, `"none"` or `{"type": "function", "function": {"name": ...}}`.
    pub fn to_openai(&self) -> Value {
        match self {
            Self::Auto => json!("auto"),
            Self::Required => json!("required"),
            Self::None => json!("none"),
            Self::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        }
    }
}

impl From<&str> for ToolChoice {
    fn from(s: &str) -> Self {
        match s {
            "auto" => Self::Auto,
            "any" | "required" => Self::Required,
            "none" => Self::None,
            name => Self::Tool(name.to_owned()),
        }
    }
}

/// Per-call settings of a chat model. Fields left empty are not sent, so the provider's defaults apply.
///
/// Models receive them in [`ChatModel::generate`](super::ChatModel::generate); `bind_tools`,
/// `with_options` and `with_structured_output` bind them to a model, and options placed in
/// `config.extensions` (see [`CallOptions::from_config`]) apply to one call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallOptions {
    /// Stop sequences.
    pub stop: Option<Vec<String>>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Which tool the model must call.
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools at once.
    pub parallel_tool_calls: Option<bool>,
    /// The response format (OpenAI's `response_format`: `{"type": "json_object"}`, a JSON schema, ...).
    pub response_format: Option<Value>,
    /// Provider-specific settings (temperature, max_tokens, ...), passed through by the provider.
    pub extra: Map<String, Value>,
}

impl CallOptions {
    /// No options set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The options of this call: those stored in `config.extensions`, plus any keyword options bound
    /// around the call with [`RunnableExt::bind`](crate::RunnableExt::bind) (`stop`, `tools`,
    /// `tool_choice`, ...). A bound option of the wrong shape is an error naming it.
    pub fn from_config(config: &RunnableConfig) -> Result<Self> {
        let mut options = config.extensions.get::<CallOptions>().cloned().unwrap_or_default();
        if let Some(bound) = crate::binding::BoundKwargs::from_config(config) {
            options.merge_kwargs(bound.as_map())?;
        }
        Ok(options)
    }

    /// Sets stop sequences.
    pub fn with_stop<S: Into<String>>(mut self, stop: impl IntoIterator<Item = S>) -> Self {
        self.stop = Some(stop.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the tools.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the tool choice.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets a provider-specific setting.
    pub fn with_extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// [`merge`](Self::merge), borrowing `self` when `over` sets nothing (the common call: options bound
    /// once, none given per call), so the bound tools are not copied for every call.
    pub(crate) fn merged(&self, over: &CallOptions) -> std::borrow::Cow<'_, CallOptions> {
        let sets_nothing = over.stop.is_none()
            && over.tools.is_empty()
            && over.tool_choice.is_none()
            && over.parallel_tool_calls.is_none()
            && over.response_format.is_none()
            && over.extra.is_empty();
        if sets_nothing {
            std::borrow::Cow::Borrowed(self)
        } else {
            std::borrow::Cow::Owned(self.merge(over))
        }
    }

    /// `over` laid on `self`: every field `over` sets wins (tools when it has any), `extra` merges key by key.
    pub fn merge(&self, over: &CallOptions) -> CallOptions {
        let mut merged = self.clone();
        if over.stop.is_some() {
            merged.stop.clone_from(&over.stop);
        }
        if !over.tools.is_empty() {
            merged.tools.clone_from(&over.tools);
        }
        if over.tool_choice.is_some() {
            merged.tool_choice.clone_from(&over.tool_choice);
        }
        if over.parallel_tool_calls.is_some() {
            merged.parallel_tool_calls = over.parallel_tool_calls;
        }
        if over.response_format.is_some() {
            merged.response_format.clone_from(&over.response_format);
        }
        for (k, v) in &over.extra {
            merged.extra.insert(k.clone(), v.clone());
        }
        merged
    }

    /// Applies LangChain-style keyword arguments (as `bind(stop=..., tools=...)` gives them): the known
    /// keys `stop`, `tools`, `tool_choice`, `parallel_tool_calls` and `response_format` set their fields,
    /// any other key goes to `extra`. A known key with a value of the wrong shape is an error naming it.
    pub fn merge_kwargs(&mut self, kwargs: &Map<String, Value>) -> Result<()> {
        let invalid = |key: &str, expected: &str, got: &Value| {
            Error::InvalidInput(format!("bound option '{key}' must be {expected}, got {got}"))
        };
        for (key, value) in kwargs {
            match key.as_str() {
                "stop" => {
                    self.stop = match value {
                        Value::Null => None,
                        Value::String(s) => Some(vec![s.clone()]),
                        Value::Array(items) => Some(
                            items
                                .iter()
                                .map(|s| s.as_str().map(str::to_owned))
                                .collect::<Option<Vec<_>>>()
                                .ok_or_else(|| invalid(key, "a string or a list of strings", value))?,
                        ),
                        other => return Err(invalid(key, "a string or a list of strings", other)),
                    }
                }
                "tools" => {
                    let items = value.as_array().ok_or_else(|| invalid(key, "a list of tools", value))?;
                    self.tools = items.iter().map(ToolSpec::from_value).collect::<Result<_>>()?;
                }
                "tool_choice" => {
                    self.tool_choice =
                        if value.is_null() { None } else { Some(ToolChoice::from_value(value)?) }
                }
                "parallel_tool_calls" => {
                    self.parallel_tool_calls = match value {
                        Value::Null => None,
                        Value::Bool(b) => Some(*b),
                        other => return Err(invalid(key, "a boolean", other)),
                    }
                }
                "response_format" => {
                    self.response_format = if value.is_null() { None } else { Some(value.clone()) }
                }
                _ => {
                    self.extra.insert(key.clone(), value.clone());
                }
            }
        }
        Ok(())
    }
}
