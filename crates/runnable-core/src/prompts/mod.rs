//! Prompt templates: [`PromptTemplate`] for text prompts, [`ChatPromptTemplate`] for chat prompts, and
//! [`MessagesPlaceholder`] for slots filled with a list of messages.
//!
//! Every template is a `Runnable<serde_json::Value, PromptValue>` traced as a prompt run
//! (`on_prompt_start` / `on_prompt_end`) and pipes into a model with `|`.
//!
//! # Template syntax
//! Templates use Python's f-string syntax, as LangChain does by default: `{name}` inserts the variable
//! `name`, `{{` and `}}` are literal braces, and a lone or unclosed brace is
//! [`Error::InvalidTemplate`](crate::Error::InvalidTemplate). Strings are inserted as they are; any other
//! JSON value (a number, a list, an object) as JSON text.
//!
//! # Input
//! The input is a JSON object of variables; keys the template does not use are ignored, and a missing
//! variable is [`Error::MissingVariables`](crate::Error::MissingVariables), naming what is missing, what was
//! expected and what was received. As in LangChain, an input that is not an object is accepted when the
//! template expects exactly one variable: it becomes that variable's value, so `chain.invoke(json!("cats"))`
//! works for a prompt with a single `{topic}`. `null` stands for an empty object.
//!
//! Variables can be pre-filled with `partial` (a value) or `partial_fn` (a function called at each
//! format); the input still wins over a pre-filled value.

mod chat;
pub(crate) mod fstring;
mod placeholder;
mod prompt;
mod variables;

pub use chat::{ChatPromptPart, ChatPromptTemplate};
pub use placeholder::MessagesPlaceholder;
pub use prompt::PromptTemplate;
