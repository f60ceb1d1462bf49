//! Structured output of [`create_agent`](crate::create_agent): LangChain's `ToolStrategy`,
//! `ProviderStrategy` and `AutoStrategy`, from a Rust type or a JSON schema built at run time.

use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use weft_runnable_core::{AiMessage, CallOptions, Error, ToolSpec};

type ParseFn = dyn Fn(Value) -> std::result::Result<Value, String> + Send + Sync;
type ErrorHandler = dyn Fn(&StructuredOutputError) -> Option<String> + Send + Sync;

/// One schema a structured response may follow (LangChain's `_SchemaSpec`): its name (the tool's name
/// under the tool strategy), description, JSON schema and, for a Rust type, the check that a value is
/// one.
#[derive(Clone)]
pub struct SchemaSpec {
    name: String,
    description: String,
    schema: Value,
    strict: Option<bool>,
    parse: Option<Arc<ParseFn>>,
}

impl fmt::Debug for SchemaSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaSpec")
            .field("name", &self.name)
            .field("typed", &self.parse.is_some())
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

impl SchemaSpec {
    /// The schema of `T` (named after the type, described by its doc comment); a value must read as a
    /// `T`, and is stored as `T` writes it.
    pub fn of<T: JsonSchema + DeserializeOwned + Serialize>() -> Self {
        let spec = ToolSpec::from_type::<T>();
        let parse = |value: Value| -> std::result::Result<Value, String> {
            let typed: T = serde_json::from_value(value).map_err(|e| e.to_string())?;
            serde_json::to_value(typed).map_err(|e| e.to_string())
        };
        Self {
            name: spec.name,
            description: spec.description,
            schema: spec.parameters,
            strict: None,
            parse: Some(Arc::new(parse)),
        }
    }

    /// A JSON schema built at run time (LangGraph's `Literal[*members]` router, a schema read from a
    /// file): named by its `title` (else `response_format_<4 hex>`), described by its `description`.
    /// As in LangChain, values are taken as the model gives them, without validation.
    pub fn from_json(schema: Value) -> Self {
        let name = match schema.get("title").and_then(Value::as_str) {
            Some(title) => title.to_owned(),
            None => format!("response_format_{}", &uuid_hex()[..4]),
        };
        let description = schema.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
        Self { name, description, schema, strict: None, parse: None }
    }

    /// Sets the name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the description.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Asks the provider to enforce the schema strictly (the provider strategy's `strict`).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = Some(strict);
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JSON schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The tool the tool strategy binds for this schema.
    pub fn tool_spec(&self) -> ToolSpec {
        ToolSpec::new(self.name.clone(), self.description.clone(), self.schema.clone())
    }

    /// `value` as a structured response: checked against the Rust type, if any.
    pub fn parse(&self, value: Value) -> std::result::Result<Value, String> {
        match &self.parse {
            Some(parse) => parse(value).map_err(|e| format!("Failed to parse data to {}: {e}", self.name)),
            None => Ok(value),
        }
    }
}

fn uuid_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// What a structured-output error becomes for the model under the tool strategy (LangChain's
/// `handle_errors`).
#[derive(Clone, Default)]
pub enum StructuredErrors {
    /// `Error: <error>\n Please fix your mistakes.` (LangChain's `True`, the default).
    #[default]
    All,
    /// This text.
    Text(String),
    /// The function decides: `Some(text)` to retry with it, `None` to fail the run.
    Handler(Arc<ErrorHandler>),
    /// No retry: the error fails the run (LangChain's `False`).
    Never,
}

impl fmt::Debug for StructuredErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("All"),
            Self::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Self::Handler(_) => f.write_str("Handler(..)"),
            Self::Never => f.write_str("Never"),
        }
    }
}

impl StructuredErrors {
    /// The tool message content for `error`, or `None` when the run must fail.
    pub(crate) fn message(&self, error: &StructuredOutputError) -> Option<String> {
        match self {
            Self::All => Some(format!("Error: {error}\n Please fix your mistakes.")),
            Self::Text(text) => Some(text.clone()),
            Self::Handler(f) => f(error),
            Self::Never => None,
        }
    }
}

/// Structured output through an artificial tool per schema (LangChain's `ToolStrategy`): the model is
/// made to call a tool, and its arguments become the structured response.
#[derive(Debug, Clone)]
pub struct ToolStrategy {
    pub(crate) specs: Vec<SchemaSpec>,
    pub(crate) tool_message_content: Option<String>,
    pub(crate) handle_errors: StructuredErrors,
}

impl ToolStrategy {
    /// One schema.
    pub fn new(spec: SchemaSpec) -> Self {
        Self::any_of([spec])
    }

    /// A union: the model picks one of the schemas (each is its own tool).
    pub fn any_of(specs: impl IntoIterator<Item = SchemaSpec>) -> Self {
        Self {
            specs: specs.into_iter().collect(),
            tool_message_content: None,
            handle_errors: StructuredErrors::default(),
        }
    }

    /// The schema of `T`.
    pub fn of<T: JsonSchema + DeserializeOwned + Serialize>() -> Self {
        Self::new(SchemaSpec::of::<T>())
    }

    /// A JSON schema built at run time; a schema with `oneOf` is a union of its members.
    pub fn from_json(schema: Value) -> Self {
        match schema.get("oneOf").and_then(Value::as_array) {
            Some(members) => Self::any_of(members.iter().cloned().map(SchemaSpec::from_json)),
            None => Self::new(SchemaSpec::from_json(schema)),
        }
    }

    /// The content of the tool message answering the structured-output call (default: `Returning
    /// structured response: <response>`).
    #[must_use]
    pub fn tool_message_content(mut self, content: impl Into<String>) -> Self {
        self.tool_message_content = Some(content.into());
        self
    }

    /// What errors become for the model.
    #[must_use]
    pub fn handle_errors(mut self, policy: StructuredErrors) -> Self {
        self.handle_errors = policy;
        self
    }

    /// The schemas.
    pub fn specs(&self) -> &[SchemaSpec] {
        &self.specs
    }
}

/// Structured output through the provider's own JSON-schema mode (LangChain's `ProviderStrategy`): the
/// reply's text is the JSON of the response.
#[derive(Debug, Clone)]
pub struct ProviderStrategy {
    pub(crate) spec: SchemaSpec,
}

impl ProviderStrategy {
    /// The provider strategy for `spec`.
    pub fn new(spec: SchemaSpec) -> Self {
        Self { spec }
    }

    /// The schema of `T`.
    pub fn of<T: JsonSchema + DeserializeOwned + Serialize>() -> Self {
        Self::new(SchemaSpec::of::<T>())
    }

    /// A JSON schema built at run time.
    pub fn from_json(schema: Value) -> Self {
        Self::new(SchemaSpec::from_json(schema))
    }

    /// The call options asking for the schema (`response_format` of type `json_schema`).
    pub fn call_options(&self) -> CallOptions {
        let mut format = json!({"name": self.spec.name, "schema": self.spec.schema});
        if self.spec.strict == Some(true) {
            format["strict"] = json!(true);
        }
        CallOptions {
            response_format: Some(json!({"type": "json_schema", "json_schema": format})),
            ..CallOptions::default()
        }
    }

    /// The structured response in `message`'s text.
    pub(crate) fn parse(&self, message: &AiMessage) -> std::result::Result<Value, StructuredOutputError> {
        let text = message.text();
        let failed =
            |reason: String| StructuredOutputError::Validation { tool: self.spec.name.clone(), reason };
        let data: Value = serde_json::from_str(&text).map_err(|e| {
            failed(format!(
                "Native structured output expected valid JSON for {}, but parsing failed: {e}.",
                self.spec.name
            ))
        })?;
        self.spec.parse(data).map_err(failed)
    }
}

/// How the agent produces a structured response (LangChain's `response_format`).
#[derive(Debug, Clone)]
pub enum ResponseFormat {
    /// Through a tool call.
    Tool(ToolStrategy),
    /// Through the provider's JSON-schema mode.
    Provider(ProviderStrategy),
    /// The provider's mode when the model is known to support it, else the tool strategy (LangChain's
    /// `AutoStrategy`, what a bare schema becomes).
    Auto(SchemaSpec),
}

impl ResponseFormat {
    /// `T` with the strategy picked by the model (LangChain's `response_format=T`).
    pub fn of<T: JsonSchema + DeserializeOwned + Serialize>() -> Self {
        Self::Auto(SchemaSpec::of::<T>())
    }

    /// A JSON schema built at run time, with the strategy picked by the model.
    pub fn from_json(schema: Value) -> Self {
        Self::Auto(SchemaSpec::from_json(schema))
    }
}

impl From<ToolStrategy> for ResponseFormat {
    fn from(strategy: ToolStrategy) -> Self {
        Self::Tool(strategy)
    }
}

impl From<ProviderStrategy> for ResponseFormat {
    fn from(strategy: ProviderStrategy) -> Self {
        Self::Provider(strategy)
    }
}

impl From<SchemaSpec> for ResponseFormat {
    fn from(spec: SchemaSpec) -> Self {
        Self::Auto(spec)
    }
}

/// A structured response the model got wrong (LangChain's `StructuredOutputError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StructuredOutputError {
    /// The model called several structured-output tools in one reply.
    #[error(
        "Model incorrectly returned multiple structured responses ({}) when only one is expected.",
        .tools.join(", ")
    )]
    Multiple {
        /// The tools it called.
        tools: Vec<String>,
    },
    /// The arguments (or the text) did not read as the schema.
    #[error("Failed to parse structured output for tool '{tool}': {reason}.")]
    Validation {
        /// The schema's name.
        tool: String,
        /// What was wrong.
        reason: String,
    },
}

impl From<StructuredOutputError> for Error {
    fn from(err: StructuredOutputError) -> Self {
        Error::custom(err)
    }
}

/// Model names LangChain assumes support the provider strategy when the model has no profile.
const PROVIDER_STRATEGY_MODELS: &[&str] = &[
    r"(^|[/:.])gpt-4\.1($|[-/:])",
    r"(^|[/:.])gpt-4o($|[-/:])",
    r"(^|[/:.])gpt-5($|[-/:])",
    r"(^|[/:.])gpt-5\.1($|[-/:])",
    r"(^|[/:.])gpt-5\.2(-\d{4}-\d{2}-\d{2})?($|[/:])",
    r"(^|[/:.])gpt-5\.2-(chat|codex)($|[-/:])",
    r"(^|[/:.])gpt-5\.3($|[-/:])",
    r"(^|[/:.])gpt-5\.4(-\d{4}-\d{2}-\d{2})?($|[/:])",
    r"(^|[/:.])gpt-5\.4-(mini|nano)($|[-/:])",
    r"(^|[/:.])gpt-5\.5($|[-/:])",
    r"(^|[/:.])gpt-6-(astra|luna|sol)($|[-/:])",
    r"(^|[/:.])claude-(fable|mythos)-5(?:-\d{8})?(?:-v\d(?::\d)?)?($|[/:])",
    r"(^|[/:.])claude-haiku-4-5(?:-\d{8})?(?:-v\d(?::\d)?)?($|[/:])",
    r"(^|[/:.])claude-opus-4-(5|6|7|8)(?:-\d{8})?(?:-v\d(?::\d)?)?($|[/:])",
    r"(^|[/:.])claude-sonnet-4-(5|6)(?:-\d{8})?(?:-v\d(?::\d)?)?($|[/:])",
    r"(^|[/:.])grok-4($|[-.:/])",
    r"(^|[/:.])grok-build($|[-/:])",
];

/// Whether a model named `name` is taken to support the provider strategy (LangChain's fallback list).
pub fn supports_provider_strategy(name: &str) -> bool {
    static PATTERNS: std::sync::OnceLock<Vec<regex::Regex>> = std::sync::OnceLock::new();
    let patterns = PATTERNS
        .get_or_init(|| PROVIDER_STRATEGY_MODELS.iter().filter_map(|p| regex::Regex::new(p).ok()).collect());
    let lower = name.to_lowercase();
    patterns.iter().any(|p| p.is_match(&lower))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Serialize, JsonSchema)]
    /// The weather.
    struct Weather {
        city: String,
        temp: i64,
    }

    #[test]
    fn a_typed_schema_checks_values_and_a_json_schema_takes_them_as_given() {
        let typed = SchemaSpec::of::<Weather>();
        assert_eq!(typed.name(), "Weather");
        assert!(typed.parse(json!({"city": "Paris", "temp": 21})).is_ok());
        let err = typed.parse(json!({"city": "Paris"})).unwrap_err();
        assert!(err.starts_with("Failed to parse data to Weather:"), "{err}");
        let raw = SchemaSpec::from_json(json!({"title": "Route", "type": "object"}));
        assert_eq!(raw.name(), "Route");
        assert_eq!(raw.parse(json!({"next": 3})).unwrap(), json!({"next": 3}));
    }

    #[test]
    fn a_one_of_schema_is_a_union_of_tools() {
        let s = ToolStrategy::from_json(json!({"oneOf": [{"title": "A"}, {"title": "B"}]}));
        let names: Vec<&str> = s.specs().iter().map(SchemaSpec::name).collect();
        assert_eq!(names, ["A", "B"]);
    }

    #[test]
    fn known_models_take_the_provider_strategy() {
        assert!(supports_provider_strategy("gpt-4o-mini"));
        assert!(supports_provider_strategy("openai:gpt-5"));
        assert!(!supports_provider_strategy("fake-chat-model"));
        assert!(!supports_provider_strategy("gpt-4"));
    }

    #[test]
    fn the_provider_strategy_parses_the_reply_text() {
        let p = ProviderStrategy::of::<Weather>();
        let ok = p.parse(&AiMessage::new(r#"{"city":"Oslo","temp":3}"#)).unwrap();
        assert_eq!(ok, json!({"city": "Oslo", "temp": 3}));
        let err = p.parse(&AiMessage::new("not json")).unwrap_err();
        assert!(err.to_string().contains("expected valid JSON for Weather"), "{err}");
    }
}
