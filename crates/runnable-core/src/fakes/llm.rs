//! `FakeListLlm`: a text completion model that answers from a script.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde::Serialize;

use super::script::{FakeReply, Script, TokenSplit};
use crate::chat_model::CallOptions;
use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{RunKind, event_input, trace_stream};
use crate::messages::PromptValue;
use crate::runnable::{ChunkStream, Merge, Runnable};

/// The start-event input of a completion model run, `{"prompts": [...]}` as in LangChain.
#[derive(Serialize)]
struct LlmInput<'a> {
    prompts: [&'a str; 1],
}

/// A completion model (prompt text in, text out; run kind `Llm`) answering each call with the next
/// scripted reply, for text agents such as ReAct.
///
/// The prompt is the prompt value's text. A reply is cut at the first stop sequence, taken from the
/// call's [`CallOptions`] (see [`CallOptions::from_config`]) or else from
/// [`with_stop`](Self::with_stop). Streaming splits the reply by [`TokenSplit`]. Clones share the script
/// and the record of prompts; running out of replies is an error.
#[derive(Debug, Clone)]
pub struct FakeListLlm {
    script: Arc<Script<String>>,
    stop: Option<Vec<String>>,
    split: TokenSplit,
}

impl FakeListLlm {
    /// A model answering with `replies`, in order.
    pub fn new<R: Into<FakeReply>>(replies: impl IntoIterator<Item = R>) -> Self {
        Self {
            script: Arc::new(Script::new("FakeListLlm", replies.into_iter().map(Into::into))),
            stop: None,
            split: TokenSplit::default(),
        }
    }

    /// Sets the stop sequences used when the call gives none.
    pub fn with_stop<S: Into<String>>(mut self, stop: impl IntoIterator<Item = S>) -> Self {
        self.stop = Some(stop.into_iter().map(Into::into).collect());
        self
    }

    /// Sets how streamed replies are split into chunks.
    pub fn with_split(mut self, split: TokenSplit) -> Self {
        self.split = split;
        self
    }

    /// Every prompt received so far, as text.
    pub fn prompts(&self) -> Vec<String> {
        self.script.calls()
    }

    /// How many scripted replies are left.
    pub fn remaining(&self) -> usize {
        self.script.remaining()
    }

    fn complete(&self, prompt: String, config: &RunnableConfig) -> Result<String> {
        let stop = CallOptions::from_config(config)?.stop.or_else(|| self.stop.clone()).unwrap_or_default();
        let text = self.script.next(prompt)?.text();
        Ok(cut_at_stop(text, &stop))
    }
}

/// Cuts `text` at the earliest occurrence of any stop sequence.
fn cut_at_stop(mut text: String, stop: &[String]) -> String {
    let cut = stop.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str())).min();
    if let Some(at) = cut {
        text.truncate(at);
    }
    text
}

#[async_trait]
impl Runnable<PromptValue, String> for FakeListLlm {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("FakeListLlm")
    }

    fn kind(&self) -> RunKind {
        RunKind::Llm
    }

    /// Streams internally (so `on_llm_stream` events fire) and returns the whole text.
    async fn invoke(&self, input: PromptValue, config: &RunnableConfig) -> Result<String> {
        ChunkStream::mergeable(self.stream(input, config)).collect("FakeListLlm").await
    }

    fn stream<'a>(&'a self, input: PromptValue, config: &RunnableConfig) -> BoxStream<'a, Result<String>> {
        let prompt = input.to_text();
        let input_value = event_input(config, &LlmInput { prompts: [&prompt] });
        let split = self.split;
        trace_stream(
            "FakeListLlm",
            RunKind::Llm,
            input_value,
            config,
            move |child| {
                let pieces: Box<dyn Iterator<Item = Result<String>> + Send> =
                    match self.complete(prompt, &child) {
                        Ok(text) if text.is_empty() => Box::new(std::iter::once(Ok(text))),
                        Ok(text) => Box::new(split.pieces(text).map(Ok)),
                        Err(err) => Box::new(std::iter::once(Err(err))),
                    };
                stream::iter(pieces).boxed()
            },
            String::merge,
        )
    }

    fn merge_chunks(&self, acc: String, next: String) -> Result<String> {
        acc.merge(next)
    }
}

crate::impl_pipe_operator!(FakeListLlm => String);
