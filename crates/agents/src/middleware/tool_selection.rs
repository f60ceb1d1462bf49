//! [`LlmToolSelector`]: LangChain's `LLMToolSelectorMiddleware`, a model picks the tools relevant to the
//! user's question before the agent's model sees them.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_runnable_core::{
    ChatModel, ChatModelExt, Error, Message, PromptValue, Result, Runnable, RunnableConfig,
    StructuredOutputMethod, Tool,
};

use crate::agent::{Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse};

/// LangChain's default instructions to the selecting model.
pub const DEFAULT_SELECTOR_PROMPT: &str =
    "Your goal is to select the most relevant tools for answering the user's query.";

type FallbackFn = dyn Fn(&Value) -> Vec<String> + Send + Sync;

/// What happens when the selecting model keeps answering malformed selections.
#[derive(Clone, Default)]
pub enum OnParsingFailure {
    /// The model call fails (the default).
    #[default]
    Error,
    /// No tool is offered.
    None,
    /// Every tool is offered.
    All,
    /// These tools are offered.
    Tools(Vec<String>),
    /// The tools the function names from the last answer.
    With(Arc<FallbackFn>),
}

impl fmt::Debug for OnParsingFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Error => f.write_str("Error"),
            Self::None => f.write_str("None"),
            Self::All => f.write_str("All"),
            Self::Tools(t) => f.debug_tuple("Tools").field(t).finish(),
            Self::With(_) => f.write_str("With(..)"),
        }
    }
}

/// Before each model call, asks a model (the agent's, or one of its own) which tools fit the last user
/// message, and offers only those (LangChain's `LLMToolSelectorMiddleware`). The question is a structured
/// output whose schema is built at run time from the tools' names and descriptions.
#[derive(Clone, Default)]
pub struct LlmToolSelector {
    model: Option<Arc<dyn ChatModel>>,
    system_prompt: Option<String>,
    max_tools: Option<usize>,
    always_include: Vec<String>,
    max_retries: usize,
    on_parsing_failure: OnParsingFailure,
}

impl fmt::Debug for LlmToolSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmToolSelector")
            .field("model", &self.model.as_ref().map(|m| m.model_name().to_owned()))
            .field("max_tools", &self.max_tools)
            .field("always_include", &self.always_include)
            .field("max_retries", &self.max_retries)
            .field("on_parsing_failure", &self.on_parsing_failure)
            .finish()
    }
}

impl LlmToolSelector {
    /// Selection by the agent's own model, one retry of a malformed answer.
    pub fn new() -> Self {
        Self { max_retries: 1, ..Self::default() }
    }

    /// Selects with `model` instead of the agent's.
    #[must_use]
    pub fn model<M: ChatModel + 'static>(mut self, model: M) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// Sets the selecting model's instructions.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Offers at most `n` selected tools (the first ones the model lists).
    #[must_use]
    pub fn max_tools(mut self, n: usize) -> Self {
        self.max_tools = Some(n);
        self
    }

    /// Always offers these tools, whatever the selection.
    #[must_use]
    pub fn always_include(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.always_include = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Asks again at most `n` times after a malformed answer.
    #[must_use]
    pub fn max_retries(mut self, n: usize) -> Self {
        self.max_retries = n;
        self
    }

    /// What a malformed last answer leads to.
    #[must_use]
    pub fn on_parsing_failure(mut self, on_failure: OnParsingFailure) -> Self {
        self.on_parsing_failure = on_failure;
        self
    }

    /// The selection's schema: a list of the tools' names, each described (LangChain's
    /// `ToolSelectionResponse`).
    fn schema(tools: &[&dyn Tool]) -> Value {
        let choices: Vec<Value> = tools
            .iter()
            .map(|t| json!({"const": t.name(), "description": t.description(), "type": "string"}))
            .collect();
        json!({
            "properties": {"tools": {"description": "Tools to use. Place the most relevant tools first.",
                "items": {"anyOf": choices}, "title": "Tools", "type": "array"}},
            "required": ["tools"],
            "title": "ToolSelectionResponse",
            "type": "object"
        })
    }

    /// The names to offer after `answer`; malformed answers are `None`.
    fn selected(&self, answer: &Value, valid: &[&str], capped: bool) -> Option<Result<Vec<String>>> {
        let names = answer.get("tools")?.as_array()?;
        let max = if capped { self.max_tools } else { None };
        let mut chosen: Vec<String> = Vec::new();
        let mut invalid: Vec<Value> = Vec::new();
        for name in names {
            match name.as_str().filter(|n| valid.contains(n)) {
                None => invalid.push(name.clone()),
                Some(n) if !chosen.iter().any(|c| c == n) && max.is_none_or(|m| chosen.len() < m) => {
                    chosen.push(n.to_owned());
                }
                Some(_) => {}
            }
        }
        if !invalid.is_empty() {
            return Some(Err(Error::InvalidInput(format!(
                "Model selected invalid tools: {}",
                weft_runnable_core::py::py_repr(&Value::Array(invalid))
            ))));
        }
        Some(Ok(chosen))
    }
}

impl LlmToolSelector {
    /// Asks the selecting model (again after a malformed answer) and returns the names to offer.
    async fn select<C: Send + Sync + 'static>(
        &self,
        request: &ModelRequest<C>,
        schema: Value,
        valid: &[String],
    ) -> Result<Vec<String>> {
        let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
        let mut prompt = self.system_prompt.clone().unwrap_or_else(|| DEFAULT_SELECTOR_PROMPT.to_owned());
        if let Some(max) = self.max_tools {
            prompt.push_str(&format!(
                "\nIMPORTANT: List the tool names in order of relevance, with the most relevant first. If you exceed \
                 the maximum number of tools, only the first {max} will be used."
            ));
        }
        let last_user = request
            .messages
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Human(_)))
            .cloned()
            .ok_or_else(|| Error::InvalidInput("No user message found in request messages".to_owned()))?;
        let model = self.model.clone().unwrap_or_else(|| Arc::clone(&request.model));
        let asker = model.with_structured_output_schema(schema, StructuredOutputMethod::FunctionCalling);
        let input = PromptValue::Messages(vec![Message::system(prompt), last_user]);
        let config =
            RunnableConfig::default().with_metadata("lc_source", "tool_selection").with_tag("nostream");
        let config = request.runtime.config().merge(&config);
        // A reply without the selection tool's call is a malformed answer, as in LangChain; a failure of the
        // model is the run's.
        let ask = || async {
            match asker.invoke(input.clone(), &config).await {
                Err(Error::OutputParser(_)) => Ok(Value::Null),
                other => other,
            }
        };
        let mut answer = ask().await?;
        let mut tries = 0;
        while self.selected(&answer, &valid, true).is_none() && tries < self.max_retries {
            answer = ask().await?;
            tries += 1;
        }
        if let Some(selected) = self.selected(&answer, &valid, true) {
            return selected;
        }
        let fallback = match &self.on_parsing_failure {
            OnParsingFailure::Error => {
                return Err(Error::InvalidInput(format!(
                    "LLMToolSelectorMiddleware: selection model returned a malformed response after {} retries \
                     (expected a dict with a 'tools' list): {}",
                    self.max_retries,
                    weft_runnable_core::py::py_repr(&answer)
                )));
            }
            OnParsingFailure::None => Vec::new(),
            OnParsingFailure::All => valid.iter().map(|v| (*v).to_owned()).collect(),
            OnParsingFailure::Tools(t) => t.clone(),
            OnParsingFailure::With(f) => f(&answer),
        };
        self.selected(&json!({"tools": fallback}), &valid, false).unwrap_or(Ok(Vec::new()))
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for LlmToolSelector {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("LLMToolSelectorMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest<C>,
        next: ModelHandler<'_, C>,
    ) -> Result<ModelResponse> {
        let always = |name: &str| self.always_include.iter().any(|a| a == name);
        let available: Vec<&dyn Tool> =
            request.tools.iter().map(|t| t.as_ref() as &dyn Tool).filter(|t| !always(t.name())).collect();
        if available.is_empty() {
            return next.call(request).await;
        }
        let schema = Self::schema(&available);
        let valid: Vec<String> = available.iter().map(|t| t.name().to_owned()).collect();
        let missing: Vec<&String> = self
            .always_include
            .iter()
            .filter(|a| !request.tools.iter().any(|t| Tool::name(t.as_ref()) == *a))
            .collect();
        if !missing.is_empty() {
            let mut names: Vec<&str> = request.tools.iter().map(|t| Tool::name(t.as_ref())).collect();
            names.sort_unstable();
            return Err(Error::InvalidInput(format!(
                "Tools in always_include not found in request: {missing:?}. Available tools: {names:?}"
            )));
        }
        let names = self.select(&request, schema, &valid).await?;
        let tools = std::mem::take(&mut request.tools);
        let (mut kept, rest): (Vec<_>, Vec<_>) = tools.into_iter().partition(|t| {
            names.iter().any(|n| n == Tool::name(t.as_ref())) && !always(Tool::name(t.as_ref()))
        });
        kept.extend(rest.into_iter().filter(|t| always(Tool::name(t.as_ref()))));
        request.tools = kept;
        next.call(request).await
    }
}
