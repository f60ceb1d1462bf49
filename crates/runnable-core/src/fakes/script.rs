//! The script of a fake model: its replies, how it splits them into tokens, and what it was asked.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::error::{Error, ModelError, ModelErrorKind, Result};
use crate::messages::{AiMessage, ToolCall};

/// One scripted reply of a fake model: a message, or a failure on cue.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant, reason = "messages are the common case; boxing them buys nothing")]
pub enum FakeReply {
    /// The model answers with this message.
    Message(AiMessage),
    /// The call fails with this error (for example a rate-limited [`ModelError`]).
    Error(Error),
}

impl FakeReply {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Message(AiMessage::new(text.into()))
    }

    /// A reply with no text that calls the given tools.
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Self::Message(AiMessage { tool_calls: calls.into_iter().collect(), ..AiMessage::default() })
    }

    /// A reply with no text that calls one tool.
    pub fn tool_call(name: impl Into<String>, args: Value, id: impl Into<String>) -> Self {
        Self::tool_calls([ToolCall { name: name.into(), args, id: Some(id.into()) }])
    }

    /// The reply of a model asked for a `T` by function calling (what
    /// [`with_structured_output`](crate::ChatModelExt::with_structured_output) asks by default, and
    /// `create_agent`'s tool strategy): one call of the tool named after `T`, with `value` as its
    /// arguments.
    pub fn structured<T: schemars::JsonSchema + serde::Serialize>(value: &T) -> Self {
        let name = crate::ToolSpec::from_type::<T>().name;
        match serde_json::to_value(value) {
            Ok(args) => Self::structured_json(name, args),
            Err(err) => Self::error(Error::msg(format!("cannot script a {name}: {err}"))),
        }
    }

    /// The reply of a model asked by function calling for a value of a schema named `name` (a schema
    /// built at run time: its `title`): one call of that tool with `args`.
    pub fn structured_json(name: impl Into<String>, args: Value) -> Self {
        let name = name.into();
        Self::tool_calls([ToolCall { id: Some(format!("call-{name}")), name, args }])
    }

    /// A text reply holding `value` as JSON: the answer of a model asked for structured output through its
    /// JSON mode or JSON-schema response format (`create_agent`'s provider strategy).
    pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_string(value) {
            Ok(text) => Self::text(text),
            Err(err) => Self::error(Error::msg(format!("cannot script the JSON reply: {err}"))),
        }
    }

    /// A failure.
    pub fn error(err: impl Into<Error>) -> Self {
        Self::Error(err.into())
    }

    /// A rate-limit failure of the `fake` provider.
    pub fn rate_limited() -> Self {
        Self::Error(ModelError::new("fake", ModelErrorKind::RateLimited, "rate limit reached").into())
    }
}

impl From<&str> for FakeReply {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<String> for FakeReply {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<AiMessage> for FakeReply {
    fn from(message: AiMessage) -> Self {
        Self::Message(message)
    }
}

impl From<Error> for FakeReply {
    fn from(err: Error) -> Self {
        Self::Error(err)
    }
}

impl From<ModelError> for FakeReply {
    fn from(err: ModelError) -> Self {
        Self::Error(err.into())
    }
}

/// How a fake model splits a reply's text into streamed chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TokenSplit {
    /// One chunk per word, each word carrying the whitespace before it: `"Hello big world"` streams as
    /// `"Hello"`, `" big"`, `" world"`.
    #[default]
    Words,
    /// One chunk per character.
    Chars,
    /// The whole text in one chunk.
    Whole,
    /// Words and single whitespace characters as chunks of their own, as langchain-core's
    /// `GenericFakeChatModel` splits (`re.split(r"(\s)", text)`): `"Hello  world"` streams as `"Hello"`,
    /// `" "`, `""`, `" "`, `"world"`.
    WordsAndSpaces,
}

impl TokenSplit {
    /// Splits `text`; the pieces concatenate back to `text`. An empty text gives no piece.
    pub fn split(self, text: &str) -> Vec<String> {
        self.pieces(text.to_owned()).collect()
    }

    /// The pieces of `text` one at a time, as [`TokenSplit::split`] gives them: a long reply is cut as it
    /// streams, not all before its first chunk.
    pub fn pieces(self, text: String) -> Pieces {
        let word_next = !text.is_empty();
        Pieces { split: self, text, at: 0, word_next }
    }
}

/// The pieces of a text, cut as they are asked for (see [`TokenSplit::pieces`]).
#[derive(Debug)]
pub struct Pieces {
    split: TokenSplit,
    text: String,
    /// The byte offset of the next piece.
    at: usize,
    /// `WordsAndSpaces` alternates words, possibly empty, and single whitespace characters, from a word
    /// to a word: whether a word comes next.
    word_next: bool,
}

impl Iterator for Pieces {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let rest = self.text.get(self.at..)?;
        let owes_word = self.split == TokenSplit::WordsAndSpaces && self.word_next;
        if rest.is_empty() && !owes_word {
            return None;
        }
        let len = match self.split {
            TokenSplit::Whole => rest.len(),
            TokenSplit::Chars => rest.chars().next().map_or(rest.len(), char::len_utf8),
            TokenSplit::WordsAndSpaces if self.word_next => {
                self.word_next = false;
                rest.find(char::is_whitespace).unwrap_or(rest.len())
            }
            TokenSplit::WordsAndSpaces => {
                self.word_next = true;
                rest.chars().next().map_or(rest.len(), char::len_utf8)
            }
            TokenSplit::Words => {
                // Leading whitespace, then the word (the whitespace before a word goes with it).
                let word = rest.find(|c: char| !c.is_whitespace()).unwrap_or(rest.len());
                word + rest[word..].find(char::is_whitespace).unwrap_or(rest.len() - word)
            }
        };
        self.at += len;
        Some(rest[..len].to_owned())
    }
}

/// The replies left and the requests received, shared by the clones of a fake model.
#[derive(Debug)]
pub(crate) struct Script<C> {
    replies: Mutex<VecDeque<FakeReply>>,
    calls: Mutex<Vec<C>>,
    scripted: AtomicUsize,
    owner: &'static str,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<C: Clone> Script<C> {
    pub(crate) fn new(owner: &'static str, replies: impl IntoIterator<Item = FakeReply>) -> Self {
        let replies: VecDeque<FakeReply> = replies.into_iter().collect();
        let scripted = replies.len();
        Self {
            replies: Mutex::new(replies),
            calls: Mutex::new(Vec::new()),
            scripted: AtomicUsize::new(scripted),
            owner,
        }
    }

    /// Records `call` and takes the next reply; running out of replies is an error.
    pub(crate) fn next(&self, call: C) -> Result<AiMessage> {
        let number = {
            let mut calls = lock(&self.calls);
            calls.push(call);
            calls.len()
        };
        match lock(&self.replies).pop_front() {
            Some(FakeReply::Message(message)) => Ok(message),
            Some(FakeReply::Error(err)) => Err(err),
            None => Err(ModelError::new(
                "fake",
                ModelErrorKind::Other,
                format!(
                    "{} has no scripted reply left for call {number} (it was given {})",
                    self.owner,
                    self.scripted.load(Ordering::Relaxed)
                ),
            )
            .into()),
        }
    }

    pub(crate) fn push(&self, reply: FakeReply) {
        lock(&self.replies).push_back(reply);
        self.scripted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn calls(&self) -> Vec<C> {
        lock(&self.calls).clone()
    }

    pub(crate) fn remaining(&self) -> usize {
        lock(&self.replies).len()
    }
}
