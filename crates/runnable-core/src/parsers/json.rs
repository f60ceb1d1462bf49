//! `JsonOutputParser`: JSON out of a model's text, completed progressively while it streams.

use std::borrow::Cow;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;

use super::{AsText, accumulate_text};
use crate::config::RunnableConfig;
use crate::error::{Error, OutputParserError, Result};
use crate::events::{RunKind, trace_invoke, trace_transform};
use crate::partial_json::parse_json_markdown;
use crate::runnable::{ChunkStream, RunValue, Runnable};

const NAME: &str = "JsonOutputParser";

/// Parses a model's text as JSON: Markdown fences (```` ```json ````) are stripped and, as in LangChain,
/// JSON the model left unfinished is completed. Text with no JSON in it is an
/// [`OutputParserError`] ("invalid json output: ...").
///
/// Streaming yields the JSON parsed so far after each input chunk, skipping chunks that change nothing:
/// `{"na`, `me": "Al`, `ice"}` gives `{}`, `{"name": "Al"}`, `{"name": "Alice"}`. The last chunk is the
/// whole value. A stream that never contained JSON ends with the same error as `invoke`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonOutputParser;

impl JsonOutputParser {
    /// Parses one complete text.
    pub fn parse(&self, text: &str) -> Result<Value> {
        parse_json_text(text)
    }
}

/// Parses `text` as JSON (fences stripped, unfinished JSON completed), or fails naming the text.
pub(super) fn parse_json_text(text: &str) -> Result<Value> {
    let text = text.trim();
    parse_json_markdown(text).ok_or_else(|| invalid_json(text))
}

/// The error for text that holds no JSON.
pub(super) fn invalid_json(text: &str) -> Error {
    OutputParserError::new(format!("invalid json output: {text}")).with_llm_output(text).into()
}

#[async_trait]
impl<I: AsText + RunValue> Runnable<I, Value> for JsonOutputParser {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(NAME)
    }

    fn kind(&self) -> RunKind {
        RunKind::Parser
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<Value> {
        trace_invoke(NAME, RunKind::Parser, input, config, |input, _| async move {
            parse_json_text(&input.as_text())
        })
        .await
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<Value>> {
        trace_transform(
            NAME,
            RunKind::Parser,
            input,
            config,
            |input, _| {
                let mut previous: Option<Value> = None;
                accumulate_text(input.into_parts().0, move |text, end| {
                    if end {
                        return previous.is_none().then(|| Err(invalid_json(text.trim())));
                    }
                    let parsed = parse_json_markdown(text.trim())?;
                    if previous.as_ref() == Some(&parsed) {
                        return None;
                    }
                    previous = Some(parsed.clone());
                    Some(Ok(parsed))
                })
            },
            latest,
        )
    }

    fn merge_chunks(&self, acc: Value, next: Value) -> Result<Value> {
        latest(acc, next)
    }
}

/// Each streamed chunk of a cumulative parser is the whole value so far: the latest one wins.
pub(super) fn latest<T>(_acc: T, next: T) -> Result<T> {
    Ok(next)
}

crate::impl_pipe_operator!(JsonOutputParser => Value);
