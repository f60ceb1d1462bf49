//! `StrOutputParser`: a message's text.

use std::borrow::Cow;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt as _};

use super::AsText;
use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{RunKind, trace_invoke, trace_transform};
use crate::runnable::{ChunkStream, Merge, RunValue, Runnable};

const NAME: &str = "StrOutputParser";

/// Turns a message (or a string) into its text; while streaming, each chunk into its text.
///
/// ```
/// use weft_runnable_core::{AiMessage, Runnable, RunnableConfig, StrOutputParser};
/// # tokio_test::block_on(async {
/// let text = StrOutputParser.invoke(AiMessage::new("hello"), &RunnableConfig::default()).await.unwrap();
/// assert_eq!(text, "hello");
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct StrOutputParser;

#[async_trait]
impl<I: AsText + RunValue> Runnable<I, String> for StrOutputParser {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(NAME)
    }

    fn kind(&self) -> RunKind {
        RunKind::Parser
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<String> {
        trace_invoke(NAME, RunKind::Parser, input, config, |input, _| async move { Ok(input.as_text()) })
            .await
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<String>> {
        trace_transform(
            NAME,
            RunKind::Parser,
            input,
            config,
            |input, _| input.into_parts().0.map(|chunk| chunk.map(|c| c.as_text())).boxed(),
            String::merge,
        )
    }

    fn merge_chunks(&self, acc: String, next: String) -> Result<String> {
        acc.merge(next)
    }
}

crate::impl_pipe_operator!(StrOutputParser => String);
