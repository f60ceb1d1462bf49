//! Output parsers: turn a model's output (a message, or text) into a string, JSON or a typed value, in
//! one go or chunk by chunk while the model streams.

use futures::stream::{BoxStream, StreamExt as _};

use crate::error::Result;
use crate::messages::{AiMessage, Message};

mod json;
mod string;
mod typed;

pub use json::JsonOutputParser;
pub use string::StrOutputParser;
pub use typed::TypedOutputParser;

/// A value an output parser can read text from: an AI message (chunk), any message, or a string.
pub trait AsText {
    /// The text (for messages, the text of the content).
    fn as_text(&self) -> String;
}

impl AsText for AiMessage {
    fn as_text(&self) -> String {
        self.text()
    }
}

impl AsText for Message {
    fn as_text(&self) -> String {
        self.text()
    }
}

impl AsText for String {
    fn as_text(&self) -> String {
        self.clone()
    }
}

/// Accumulates the text of the input chunks and hands it, after every chunk, to `step` (with `end` false)
/// and once more when the input is exhausted (with `end` true). Whatever `step` returns is yielded; the
/// stream stops after the first error.
fn accumulate_text<'a, I, O>(
    chunks: BoxStream<'a, Result<I>>,
    step: impl FnMut(&str, bool) -> Option<Result<O>> + Send + 'a,
) -> BoxStream<'a, Result<O>>
where
    I: AsText + Send + 'a,
    O: Send + 'a,
{
    let state = (chunks, String::new(), step);
    futures::stream::unfold(Some(state), |state| async move {
        let (mut chunks, mut text, mut step) = state?;
        loop {
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    text.push_str(&chunk.as_text());
                    match step(&text, false) {
                        Some(Ok(out)) => return Some((Ok(out), Some((chunks, text, step)))),
                        Some(Err(err)) => return Some((Err(err), None)),
                        None => {}
                    }
                }
                Some(Err(err)) => return Some((Err(err), None)),
                None => return step(&text, true).map(|out| (out, None)),
            }
        }
    })
    .boxed()
}
