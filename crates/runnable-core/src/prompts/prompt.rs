//! `PromptTemplate`: a string template that formats into a text prompt.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde_json::Value;

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::{RunKind, trace_invoke};
use crate::messages::PromptValue;
use crate::prompts::fstring::FString;
use crate::prompts::variables::{Partials, resolve};
use crate::runnable::Runnable;

/// A string template with `{name}` variables (`{{` and `}}` for literal braces); as a runnable it turns a
/// JSON object of variables into a [`PromptValue::Text`].
///
/// Strings are inserted as they are; other JSON values as JSON text. An input that is not an object is
/// taken as the value of the template's only variable, when it has exactly one.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::{PromptTemplate, PromptValue, Runnable, RunnableConfig};
/// # tokio_test::block_on(async {
/// let prompt = PromptTemplate::from_template("Tell me about {topic}").unwrap();
/// assert_eq!(prompt.input_variables(), ["topic"]);
/// let config = RunnableConfig::default();
/// let text = prompt.invoke(json!({"topic": "cats"}), &config).await.unwrap();
/// assert_eq!(text, PromptValue::Text("Tell me about cats".into()));
/// // One variable: a bare value is enough.
/// assert_eq!(prompt.invoke(json!("cats"), &config).await.unwrap(), text);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct PromptTemplate {
    template: FString,
    /// Every variable of the template, sorted, partials included.
    variables: Vec<String>,
    partials: Partials,
}

impl PromptTemplate {
    /// Parses an f-string template; an unbalanced or empty brace is [`Error::InvalidTemplate`].
    pub fn from_template(template: &str) -> Result<Self> {
        let template = FString::parse(template)?;
        let variables: BTreeSet<&str> = template.variables().collect();
        let variables = variables.into_iter().map(str::to_owned).collect();
        Ok(Self { template, variables, partials: Partials::default() })
    }

    /// The template text as written.
    pub fn template(&self) -> &str {
        self.template.source()
    }

    /// The variables an input must supply, sorted (pre-filled ones are left out).
    pub fn input_variables(&self) -> Vec<String> {
        self.variables.iter().filter(|name| !self.partials.contains(name)).cloned().collect()
    }

    /// The names of the pre-filled variables, sorted.
    pub fn partial_variables(&self) -> Vec<String> {
        self.partials.names()
    }

    /// Pre-fills `name` with `value`; a value in the input still wins.
    pub fn partial(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.partials.set(name.into(), value.into());
        self
    }

    /// Pre-fills `name` with the result of `f`, called at every format (for a date, say).
    pub fn partial_fn(
        mut self,
        name: impl Into<String>,
        f: impl Fn() -> Value + Send + Sync + 'static,
    ) -> Self {
        self.partials.set_fn(name.into(), f);
        self
    }

    /// Formats the template with the variables of `input` (a JSON object, or the bare value of the only
    /// variable).
    ///
    /// A variable without a value is [`Error::MissingVariables`]; variables the template does not use are
    /// ignored.
    pub fn format(&self, input: Value) -> Result<String> {
        let expected = self.input_variables();
        let values = resolve("PromptTemplate", input, &expected, &self.variables, &self.partials)?;
        self.template.render(&values).map_err(|missing| Error::MissingVariables {
            template: "PromptTemplate",
            missing: vec![missing],
            expected,
            received: values.keys().cloned().collect(),
        })
    }
}

#[async_trait]
impl Runnable<Value, PromptValue> for PromptTemplate {
    fn kind(&self) -> RunKind {
        RunKind::Prompt
    }

    async fn invoke(&self, input: Value, config: &RunnableConfig) -> Result<PromptValue> {
        trace_invoke(&self.name(), RunKind::Prompt, input, config, |input, _| async move {
            self.format(input).map(PromptValue::Text)
        })
        .await
    }
}

crate::impl_pipe_operator!(PromptTemplate => PromptValue);
