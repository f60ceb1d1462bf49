//! `MessagesPlaceholder`: a slot in a chat prompt filled with a list of messages (a conversation history).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::messages::Message;
use crate::prompts::fstring::json_excerpt;

/// A slot in a [`ChatPromptTemplate`](crate::ChatPromptTemplate) that the variable of the same name fills
/// with a list of messages.
///
/// The value must be a JSON list of message-likes: message objects (`{"type": "human", "content": ..}` or
/// `{"role": "user", "content": ..}`), `[role, content]` pairs, or strings (human messages). A required
/// placeholder must be given; an optional one (also written `("placeholder", "{name}")`) renders nothing
/// when its variable is absent or `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagesPlaceholder {
    variable_name: String,
    optional: bool,
    n_messages: Option<usize>,
}

impl MessagesPlaceholder {
    /// A required placeholder for the variable `variable_name`.
    pub fn new(variable_name: impl Into<String>) -> Self {
        Self { variable_name: variable_name.into(), optional: false, n_messages: None }
    }

    /// An optional placeholder: an absent variable renders no messages.
    pub fn optional(variable_name: impl Into<String>) -> Self {
        Self { optional: true, ..Self::new(variable_name) }
    }

    /// Keeps only the last `n` messages of the value.
    pub fn with_n_messages(mut self, n: usize) -> Self {
        self.n_messages = Some(n);
        self
    }

    /// The name of the variable that fills the placeholder.
    pub fn variable_name(&self) -> &str {
        &self.variable_name
    }

    /// Whether the variable may be left out.
    pub fn is_optional(&self) -> bool {
        self.optional
    }

    /// The messages for this placeholder from the template's variables.
    pub(crate) fn format(&self, values: &Map<String, Value>) -> Result<Vec<Message>> {
        let items = match values.get(&self.variable_name) {
            Some(Value::Array(items)) => items,
            None | Some(Value::Null) if self.optional => return Ok(Vec::new()),
            Some(other) => {
                return Err(Error::InvalidInput(format!(
                    "variable {} should be a list of messages, got {}",
                    self.variable_name,
                    json_excerpt(other)
                )));
            }
            // Required variables are checked before formatting; this keeps the message in one place.
            None => {
                return Err(Error::InvalidInput(format!(
                    "variable {} should be a list of messages, got nothing",
                    self.variable_name
                )));
            }
        };
        let skip = self.n_messages.map_or(0, |n| items.len().saturating_sub(n));
        items
            .iter()
            .skip(skip)
            .map(|item| {
                Message::from_like(item.clone()).map_err(|err| match err {
                    Error::InvalidInput(why) => {
                        Error::InvalidInput(format!("variable {}: {why}", self.variable_name))
                    }
                    other => other,
                })
            })
            .collect()
    }
}
