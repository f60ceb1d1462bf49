//! `BoundChatModel`: a chat model with call options bound to it (tools, tool choice, stop sequences).

use std::borrow::Cow;

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::{CallOptions, ChatModel};
use crate::config::RunnableConfig;
use crate::error::Result;
use crate::messages::{AiMessage, Message};

/// A chat model with bound [`CallOptions`]; itself a chat model and a runnable, named like the model.
///
/// Options given at call time are laid over the bound ones (see [`CallOptions::merge`]), so binding
/// twice lets the later binding win.
#[derive(Debug, Clone)]
pub struct BoundChatModel<M> {
    model: M,
    options: CallOptions,
}

impl<M> BoundChatModel<M> {
    /// Binds `options` to `model`.
    pub fn new(model: M, options: CallOptions) -> Self {
        Self { model, options }
    }

    /// The bound options.
    pub fn options(&self) -> &CallOptions {
        &self.options
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for BoundChatModel<M> {
    fn type_name(&self) -> Cow<'_, str> {
        self.model.type_name()
    }

    fn model_name(&self) -> &str {
        self.model.model_name()
    }

    fn provider(&self) -> &str {
        self.model.provider()
    }

    async fn generate(
        &self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> Result<AiMessage> {
        self.model.generate(messages, &self.options.merged(options), config).await
    }

    fn stream_chunks<'a>(
        &'a self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<AiMessage>> {
        self.model.stream_chunks(messages, &self.options.merged(options), config)
    }
}

crate::impl_chat_model_runnable!([M: ChatModel] BoundChatModel<M>);

impl<M: ChatModel + Clone + 'static> BoundChatModel<M> {
    /// Streams the reply to `input` as [`Runnable::stream`](crate::Runnable::stream) does, with a stream
    /// that owns a clone of the bound model, so it may be called on a temporary
    /// (`model.bind_tools(..).stream(..)`).
    pub fn stream(
        &self,
        input: impl Into<crate::PromptValue>,
        config: &RunnableConfig,
    ) -> BoxStream<'static, Result<AiMessage>> {
        super::stream_chat_model_owned(self.clone(), input.into(), config)
    }
}
