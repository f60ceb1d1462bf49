//! `ChatPromptTemplate`: a list of message templates, placeholders and fixed messages.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::{RunKind, trace_invoke};
use crate::messages::{Message, PromptValue};
use crate::prompts::fstring::{FString, excerpt};
use crate::prompts::placeholder::MessagesPlaceholder;
use crate::prompts::variables::{Partials, resolve};
use crate::runnable::Runnable;

/// One entry given to [`ChatPromptTemplate::from_messages`].
///
/// Converts from a `(role, template)` pair, a [`MessagesPlaceholder`] or a fixed [`Message`]; to mix
/// them in one array, call `.into()` on each.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatPromptPart {
    /// A message template: role (`system`, `human`/`user`, `ai`/`assistant`, or `placeholder`) and
    /// f-string text. `("placeholder", "{name}")` is an optional [`MessagesPlaceholder`].
    Role(String, String),
    /// A slot filled with a list of messages.
    Placeholder(MessagesPlaceholder),
    /// A message used as it is, without templating.
    Message(Box<Message>),
}

impl<R: Into<String>, T: Into<String>> From<(R, T)> for ChatPromptPart {
    fn from((role, template): (R, T)) -> Self {
        ChatPromptPart::Role(role.into(), template.into())
    }
}

impl From<MessagesPlaceholder> for ChatPromptPart {
    fn from(placeholder: MessagesPlaceholder) -> Self {
        ChatPromptPart::Placeholder(placeholder)
    }
}

impl From<Message> for ChatPromptPart {
    fn from(message: Message) -> Self {
        ChatPromptPart::Message(Box::new(message))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    System,
    Human,
    Ai,
}

#[derive(Debug, Clone)]
enum Part {
    Template(Role, FString),
    Placeholder(MessagesPlaceholder),
    Message(Box<Message>),
}

impl Part {
    fn parse(part: ChatPromptPart) -> Result<Self> {
        let (role, text) = match part {
            ChatPromptPart::Role(role, text) => (role, text),
            ChatPromptPart::Placeholder(placeholder) => return Ok(Part::Placeholder(placeholder)),
            ChatPromptPart::Message(message) => return Ok(Part::Message(message)),
        };
        let template = FString::parse(&text)?;
        let role = match role.as_str() {
            "system" => Role::System,
            "human" | "user" => Role::Human,
            "ai" | "assistant" => Role::Ai,
            "placeholder" => {
                return match template.single_variable() {
                    Some(name) => Ok(Part::Placeholder(MessagesPlaceholder::optional(name))),
                    None => Err(Error::InvalidTemplate(format!(
                        "a placeholder takes one variable in braces, like \"{{history}}\", got {}",
                        excerpt(&text)
                    ))),
                };
            }
            _ => {
                return Err(Error::InvalidTemplate(format!(
                    "unknown message role {role:?} in ChatPromptTemplate; use one of system, human, user, ai, \
                     assistant, placeholder"
                )));
            }
        };
        Ok(Part::Template(role, template))
    }

    /// Appends this part's messages; `expected` only feeds the error of a variable without a value.
    fn format(&self, values: &Map<String, Value>, expected: &[String], out: &mut Vec<Message>) -> Result<()> {
        match self {
            Part::Template(role, template) => {
                let text = template.render(values).map_err(|missing| Error::MissingVariables {
                    template: "ChatPromptTemplate",
                    missing: vec![missing],
                    expected: expected.to_vec(),
                    received: values.keys().cloned().collect(),
                })?;
                out.push(match role {
                    Role::System => Message::system(text),
                    Role::Human => Message::human(text),
                    Role::Ai => Message::ai(text),
                });
            }
            Part::Placeholder(placeholder) => out.extend(placeholder.format(values)?),
            Part::Message(message) => out.push((**message).clone()),
        }
        Ok(())
    }
}

/// A chat prompt: message templates, message placeholders and fixed messages; as a runnable it turns a
/// JSON object of variables into a [`PromptValue::Messages`].
///
/// Templates use f-string syntax (`{name}`, with `{{` and `}}` for literal braces). An input that is not
/// an object is taken as the value of the template's only required variable, when it has exactly one.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::{ChatPromptTemplate, Message, Runnable, RunnableConfig};
/// # tokio_test::block_on(async {
/// let prompt = ChatPromptTemplate::from_messages([
///     ("system", "You are {role}"),
///     ("placeholder", "{history}"),
///     ("human", "{q}"),
/// ])
/// .unwrap();
/// assert_eq!(prompt.input_variables(), ["q", "role"]);
/// assert_eq!(prompt.optional_variables(), ["history"]);
/// let input = json!({"role": "a pirate", "q": "Hi!", "history": [["human", "Ahoy"], ["ai", "Arr"]]});
/// let messages = prompt.invoke(input, &RunnableConfig::default()).await.unwrap().into_messages();
/// assert_eq!(
///     messages,
///     [
///         Message::system("You are a pirate"),
///         Message::human("Ahoy"),
///         Message::ai("Arr"),
///         Message::human("Hi!"),
///     ]
/// );
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct ChatPromptTemplate {
    parts: Vec<Part>,
    /// Variables that must have a value, sorted, partials included.
    required: Vec<String>,
    /// Variables of optional placeholders that no template needs, sorted, partials included.
    optional: Vec<String>,
    partials: Partials,
}

impl ChatPromptTemplate {
    /// Builds a chat prompt from `(role, template)` pairs, [`MessagesPlaceholder`]s and fixed messages.
    ///
    /// An unknown role or a template with unbalanced braces is [`Error::InvalidTemplate`].
    pub fn from_messages<P: Into<ChatPromptPart>>(parts: impl IntoIterator<Item = P>) -> Result<Self> {
        let parts = parts.into_iter().map(|p| Part::parse(p.into())).collect::<Result<Vec<_>>>()?;
        let mut required = BTreeSet::new();
        let mut optional = BTreeSet::new();
        for part in &parts {
            match part {
                Part::Template(_, template) => required.extend(template.variables().map(str::to_owned)),
                Part::Placeholder(p) if p.is_optional() => {
                    optional.insert(p.variable_name().to_owned());
                }
                Part::Placeholder(p) => {
                    required.insert(p.variable_name().to_owned());
                }
                Part::Message(_) => {}
            }
        }
        let optional = optional.into_iter().filter(|name| !required.contains(name)).collect();
        Ok(Self { parts, required: required.into_iter().collect(), optional, partials: Partials::default() })
    }

    /// A prompt of one human message made from `template` (LangChain's `ChatPromptTemplate.from_template`).
    ///
    /// ```
    /// use weft_runnable_core::{ChatPromptTemplate, Runnable, RunnableConfig};
    /// let prompt = ChatPromptTemplate::from_template("Tell me a joke about {topic}")?;
    /// assert_eq!(prompt.input_variables(), ["topic"]);
    /// # tokio_test::block_on(async {
    /// let value = prompt.invoke(serde_json::json!({"topic": "crabs"}), &RunnableConfig::default()).await?;
    /// assert_eq!(value.into_messages(), [weft_runnable_core::Message::human("Tell me a joke about crabs")]);
    /// # Ok::<(), weft_runnable_core::Error>(())
    /// # }).unwrap();
    /// # Ok::<(), weft_runnable_core::Error>(())
    /// ```
    pub fn from_template(template: &str) -> Result<Self> {
        Self::from_messages([("human", template)])
    }

    /// The variables an input must supply, sorted (pre-filled ones are left out).
    pub fn input_variables(&self) -> Vec<String> {
        self.required.iter().filter(|name| !self.partials.contains(name)).cloned().collect()
    }

    /// The variables of optional placeholders, sorted (pre-filled ones are left out).
    pub fn optional_variables(&self) -> Vec<String> {
        self.optional.iter().filter(|name| !self.partials.contains(name)).cloned().collect()
    }

    /// The names of the pre-filled variables, sorted.
    pub fn partial_variables(&self) -> Vec<String> {
        self.partials.names()
    }

    /// Pre-fills `name` with `value` (text, or a list of messages for a placeholder); a value in the
    /// input still wins.
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

    /// Formats every part with the variables of `input` (a JSON object, or the bare value of the only
    /// required variable).
    ///
    /// A required variable without a value is [`Error::MissingVariables`]; a placeholder given something
    /// other than a list of message-likes is [`Error::InvalidInput`].
    pub fn format_messages(&self, input: Value) -> Result<Vec<Message>> {
        let expected = self.input_variables();
        let values = resolve("ChatPromptTemplate", input, &expected, &self.required, &self.partials)?;
        let mut messages = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            part.format(&values, &expected, &mut messages)?;
        }
        Ok(messages)
    }
}

#[async_trait]
impl Runnable<Value, PromptValue> for ChatPromptTemplate {
    fn kind(&self) -> RunKind {
        RunKind::Prompt
    }

    async fn invoke(&self, input: Value, config: &RunnableConfig) -> Result<PromptValue> {
        trace_invoke(&self.name(), RunKind::Prompt, input, config, |input, _| async move {
            self.format_messages(input).map(PromptValue::Messages)
        })
        .await
    }
}

crate::impl_pipe_operator!(ChatPromptTemplate => PromptValue);
