//! Structured output: asking a chat model for a typed value and parsing its reply.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{BoundChatModel, CallOptions, ChatModel, ToolChoice};
use crate::config::RunnableConfig;
use crate::error::{OutputParserError, Result};
use crate::events::{RunKind, trace_invoke};
use crate::messages::{AiMessage, PromptValue};
use crate::partial_json::parse_json_markdown;
use crate::runnable::{RunValue, Runnable, seq_step_tag};
use crate::tools::ToolSpec;

/// How a chat model is asked for structured output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StructuredOutputMethod {
    /// Bind one tool named after the type (its JSON schema as parameters), force the model to call it
    /// without parallel calls, and parse the call's arguments.
    #[default]
    FunctionCalling,
    /// Set `response_format` to the type's JSON schema and parse the reply's text.
    JsonSchema,
    /// Set `response_format` to JSON mode (`{"type": "json_object"}`) and parse the reply's text; the
    /// prompt must ask for the fields.
    JsonMode,
}

/// Parses a chat model's reply into a `T` according to a [`StructuredOutputMethod`]; a runnable of kind
/// `Parser` from `AiMessage` to `T`.
pub struct StructuredOutputParser<T> {
    method: StructuredOutputMethod,
    spec: ToolSpec,
    _output: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for StructuredOutputParser<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StructuredOutputParser")
            .field("method", &self.method)
            .field("name", &self.spec.name)
            .finish()
    }
}

impl<T> Clone for StructuredOutputParser<T> {
    fn clone(&self) -> Self {
        Self { method: self.method, spec: self.spec.clone(), _output: PhantomData }
    }
}

impl<T: DeserializeOwned + JsonSchema> StructuredOutputParser<T> {
    /// A parser for `T` by `method`.
    pub fn new(method: StructuredOutputMethod) -> Self {
        Self { method, spec: ToolSpec::from_type::<T>(), _output: PhantomData }
    }

    /// The call options the model must be given for this method (the tool, or the response format).
    pub fn call_options(&self) -> CallOptions {
        let spec = &self.spec;
        match self.method {
            StructuredOutputMethod::FunctionCalling => CallOptions {
                tools: vec![spec.clone()],
                tool_choice: Some(ToolChoice::Tool(spec.name.clone())),
                parallel_tool_calls: Some(false),
                ..CallOptions::default()
            },
            StructuredOutputMethod::JsonSchema => {
                let mut format = json!({"name": spec.name, "schema": spec.parameters});
                if !spec.description.is_empty() {
                    format["description"] = Value::String(spec.description.clone());
                }
                CallOptions {
                    response_format: Some(json!({"type": "json_schema", "json_schema": format})),
                    ..CallOptions::default()
                }
            }
            StructuredOutputMethod::JsonMode => CallOptions {
                response_format: Some(json!({"type": "json_object"})),
                ..CallOptions::default()
            },
        }
    }

    /// Parses `message`: the arguments of its call of the type's tool, or its text as JSON (fences and a
    /// cut-off end tolerated).
    pub fn parse(&self, message: &AiMessage) -> Result<T> {
        let name = &self.spec.name;
        match self.method {
            StructuredOutputMethod::FunctionCalling => {
                let Some(call) = message.tool_calls.iter().find(|c| &c.name == name) else {
                    let invalid = message.invalid_tool_calls.iter().find(|c| c.name.as_deref() == Some(name));
                    let error = match invalid {
                        Some(call) => format!(
                            "the model called tool '{name}' with invalid arguments: {}",
                            call.error.as_deref().unwrap_or("unparseable arguments")
                        ),
                        None => format!("the model's reply has no call of tool '{name}'"),
                    };
                    return Err(OutputParserError::new(error).with_llm_output(message.text()).into());
                };
                serde_json::from_value::<T>(call.args.clone()).map_err(|e| {
                    OutputParserError::new(format!(
                        "failed to parse {name} from tool call arguments {}: {e}",
                        call.args
                    ))
                    .with_llm_output(call.args.to_string())
                    .into()
                })
            }
            StructuredOutputMethod::JsonSchema | StructuredOutputMethod::JsonMode => {
                let text = message.text();
                let failed = |reason: String| -> crate::Error {
                    OutputParserError::new(format!("failed to parse {name} from completion {text}: {reason}"))
                        .with_llm_output(text.clone())
                        .into()
                };
                let value = parse_json_markdown(&text).ok_or_else(|| failed("invalid json".to_owned()))?;
                serde_json::from_value::<T>(value).map_err(|e| failed(e.to_string()))
            }
        }
    }
}

impl StructuredOutputParser<Value> {
    /// A parser for a JSON schema built at run time (LangGraph's router with `Literal[*members]`, LangChain's
    /// `with_structured_output(schema_dict)`): the tool (or response format) is named by the schema's
    /// `title` (`response` without one) and described by its `description`; the value is the model's
    /// arguments or JSON text as given, without validation, as in LangChain.
    pub fn from_schema(schema: Value, method: StructuredOutputMethod) -> Self {
        let name = schema.get("title").and_then(Value::as_str).unwrap_or("response").to_owned();
        let description = schema.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
        Self { method, spec: ToolSpec::new(name, description, schema), _output: PhantomData }
    }
}

#[async_trait]
impl<T: DeserializeOwned + JsonSchema + RunValue> Runnable<AiMessage, T> for StructuredOutputParser<T> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("StructuredOutputParser")
    }

    fn kind(&self) -> RunKind {
        RunKind::Parser
    }

    async fn invoke(&self, input: AiMessage, config: &RunnableConfig) -> Result<T> {
        trace_invoke("StructuredOutputParser", RunKind::Parser, input, config, |message, _| async move {
            self.parse(&message)
        })
        .await
    }
}

crate::impl_pipe_operator!([T] StructuredOutputParser<T> => T);

/// A chat model asked for a `T`: a runnable from a prompt to the parsed value (see
/// [`ChatModelExt::with_structured_output`](super::ChatModelExt::with_structured_output)).
///
/// Runs as a chain named `StructuredOutput` with the model (`seq:step:1`) and the parser (`seq:step:2`)
/// as its steps.
#[derive(Debug, Clone)]
pub struct StructuredOutput<M, T> {
    model: BoundChatModel<M>,
    parser: StructuredOutputParser<T>,
}

impl<M: ChatModel, T: DeserializeOwned + JsonSchema + RunValue> StructuredOutput<M, T> {
    /// Binds what `method` needs to `model`.
    pub fn new(model: M, method: StructuredOutputMethod) -> Self {
        let parser = StructuredOutputParser::new(method);
        Self { model: BoundChatModel::new(model, parser.call_options()), parser }
    }

    /// Returns the raw reply too, and a parsing failure as `parsing_error` instead of an error.
    pub fn include_raw(self) -> StructuredOutputWithRaw<M, T> {
        StructuredOutputWithRaw { model: self.model, parser: self.parser }
    }
}

impl<M: ChatModel> StructuredOutput<M, Value> {
    /// Asks `model` for a value of a JSON schema built at run time (see
    /// [`StructuredOutputParser::from_schema`]).
    pub fn from_schema(model: M, schema: Value, method: StructuredOutputMethod) -> Self {
        let parser = StructuredOutputParser::from_schema(schema, method);
        Self { model: BoundChatModel::new(model, parser.call_options()), parser }
    }
}

#[async_trait]
impl<M: ChatModel, T: DeserializeOwned + JsonSchema + RunValue> Runnable<PromptValue, T>
    for StructuredOutput<M, T>
{
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("StructuredOutput")
    }

    async fn invoke(&self, input: PromptValue, config: &RunnableConfig) -> Result<T> {
        trace_invoke("StructuredOutput", RunKind::Chain, input, config, |input, child| async move {
            let raw = self.model.invoke(input, &child.child(Some(seq_step_tag(1)))).await?;
            self.parser.invoke(raw, &child.child(Some(seq_step_tag(2)))).await
        })
        .await
    }
}

crate::impl_pipe_operator!([M, T] StructuredOutput<M, T> => T);

/// The raw reply of a chat model asked for a `T`, with the parsed value or the reason parsing failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParsedWithRaw<T> {
    /// The model's reply.
    pub raw: AiMessage,
    /// The parsed value, when parsing succeeded.
    pub parsed: Option<T>,
    /// Why parsing failed, when it did.
    pub parsing_error: Option<String>,
}

/// Like [`StructuredOutput`], returning [`ParsedWithRaw`]: a parsing failure is reported in the value;
/// a model failure is still an error.
#[derive(Debug, Clone)]
pub struct StructuredOutputWithRaw<M, T> {
    model: BoundChatModel<M>,
    parser: StructuredOutputParser<T>,
}

#[async_trait]
impl<M, T> Runnable<PromptValue, ParsedWithRaw<T>> for StructuredOutputWithRaw<M, T>
where
    M: ChatModel,
    T: DeserializeOwned + JsonSchema + RunValue,
{
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("StructuredOutput")
    }

    async fn invoke(&self, input: PromptValue, config: &RunnableConfig) -> Result<ParsedWithRaw<T>> {
        trace_invoke("StructuredOutput", RunKind::Chain, input, config, |input, child| async move {
            let raw = self.model.invoke(input, &child.child(Some(seq_step_tag(1)))).await?;
            let (parsed, parsing_error) = match self.parser.parse(&raw) {
                Ok(value) => (Some(value), None),
                Err(err) => (None, Some(err.to_string())),
            };
            Ok(ParsedWithRaw { raw, parsed, parsing_error })
        })
        .await
    }
}

crate::impl_pipe_operator!([M, T] StructuredOutputWithRaw<M, T> => ParsedWithRaw<T>);
