//! Chat models: the [`ChatModel`] trait, per-call options, tool binding and structured output.
//!
//! A provider implements [`ChatModel`] (`generate`, and `stream_chunks` when it streams) and calls
//! [`impl_chat_model_runnable!`](crate::impl_chat_model_runnable) once, which makes its type a traced
//! `Runnable<PromptValue, AiMessage>` of kind `ChatModel` with the `|` operator, so that
//! `prompt | model | parser` works. [`ChatModelExt`] adds `bind_tools`, `with_options` and
//! `with_structured_output` to every chat model.
//!
//! ```
//! use serde_json::json;
//! use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
//! use weft_runnable_core::{ChatModelExt, PromptValue, Runnable, RunnableConfig, RunnableLambda, ToolSpec};
//!
//! # tokio_test::block_on(async {
//! let model = FakeChatModel::new([FakeReply::tool_call("lookup", json!({"q": "rust"}), "c1")]);
//! let lookup = ToolSpec::new("lookup", "Looks things up.", json!({"type": "object"}));
//! let chain = RunnableLambda::new(|q: String| PromptValue::from(q))
//!     | model.clone().bind_tools([lookup], None)
//!     | RunnableLambda::new(|reply: weft_runnable_core::AiMessage| reply.tool_calls[0].name.clone());
//! assert_eq!(chain.invoke("what is rust?".to_owned(), &RunnableConfig::default()).await.unwrap(), "lookup");
//! assert_eq!(model.calls()[0].options.tools[0].name, "lookup");
//! # });
//! ```

pub mod bound;
pub mod options;
pub mod run;
pub mod structured;

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::config::RunnableConfig;
use crate::error::Result;
use crate::messages::{AiMessage, Message};
use crate::runnable::{RunValue, short_type_name};
use crate::tools::ToolSpec;

pub use bound::BoundChatModel;
pub use options::{CallOptions, ToolChoice};
pub use run::{invoke_chat_model, stream_chat_model, stream_chat_model_owned};
pub use structured::{
    ParsedWithRaw, StructuredOutput, StructuredOutputMethod, StructuredOutputParser, StructuredOutputWithRaw,
};

/// A model that answers a list of chat messages with an AI message.
///
/// Only [`generate`](ChatModel::generate) is required. A model that streams overrides
/// [`stream_chunks`](ChatModel::stream_chunks); the default yields the whole reply as one chunk.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The name of this model's runs in events (`ChatOpenAI`, `FakeChatModel`, ...).
    fn type_name(&self) -> Cow<'_, str> {
        Cow::Borrowed(short_type_name::<Self>())
    }

    /// The model's name at its provider (`gpt-4o-mini`), reported as `ls_model_name`.
    fn model_name(&self) -> &str;

    /// The provider's name (`openai`), reported as `ls_provider`.
    fn provider(&self) -> &str;

    /// Answers `messages` with one AI message.
    async fn generate(
        &self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> Result<AiMessage>;

    /// Answers `messages` as a stream of AI message chunks, which merge into the whole reply.
    ///
    /// Streamed pieces are chunks ([`AiMessage::chunk`], or `is_chunk` set), as LangChain's `_stream` yields
    /// `AIMessageChunk`s; a model may mark its last chunk `chunk_position: "last"`, and when it does not, its
    /// run closes the stream with an empty chunk so marked. The default (a model that does not stream)
    /// yields the whole reply, a message rather than a chunk, and nothing closes it. The returned stream
    /// must not borrow `options` or `config` (clone what it needs).
    fn stream_chunks<'a>(
        &'a self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<AiMessage>> {
        let options = options.clone();
        let config = config.clone();
        stream::once(async move { self.generate(messages, &options, &config).await }).boxed()
    }
}

#[async_trait]
impl<M: ChatModel + ?Sized> ChatModel for Arc<M> {
    fn type_name(&self) -> Cow<'_, str> {
        (**self).type_name()
    }

    fn model_name(&self) -> &str {
        (**self).model_name()
    }

    fn provider(&self) -> &str {
        (**self).provider()
    }

    async fn generate(
        &self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> Result<AiMessage> {
        (**self).generate(messages, options, config).await
    }

    fn stream_chunks<'a>(
        &'a self,
        messages: Vec<Message>,
        options: &CallOptions,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<AiMessage>> {
        (**self).stream_chunks(messages, options, config)
    }
}

crate::impl_chat_model_runnable!(@runnable [] dyn ChatModel);

/// Methods available on every [`ChatModel`]; blanket-implemented.
pub trait ChatModelExt: ChatModel + Sized {
    /// Binds tools (and optionally a tool choice) to the model: every call sends their specs.
    ///
    /// Takes anything that converts to a [`ToolSpec`]: `&tool` for any [`Tool`](crate::Tool), a
    /// [`SharedTool`](crate::SharedTool) reference, or a spec made from a raw JSON schema.
    fn bind_tools<T: Into<ToolSpec>>(
        self,
        tools: impl IntoIterator<Item = T>,
        tool_choice: Option<ToolChoice>,
    ) -> BoundChatModel<Self> {
        let options = CallOptions {
            tools: tools.into_iter().map(Into::into).collect(),
            tool_choice,
            ..CallOptions::default()
        };
        BoundChatModel::new(self, options)
    }

    /// Binds call options to the model (stop sequences, provider settings, ...).
    fn with_options(self, options: CallOptions) -> BoundChatModel<Self> {
        BoundChatModel::new(self, options)
    }

    /// A runnable that asks the model for a `T` and returns it parsed (see [`StructuredOutputMethod`]).
    /// `None` takes the default method, function calling (langchain-core's default for any chat model):
    /// `model.with_structured_output::<Route>(None)`.
    fn with_structured_output<T>(
        self,
        method: impl Into<Option<StructuredOutputMethod>>,
    ) -> StructuredOutput<Self, T>
    where
        T: DeserializeOwned + JsonSchema + RunValue,
    {
        StructuredOutput::new(self, method.into().unwrap_or_default())
    }

    /// A runnable that asks the model for a value of `schema`, a JSON schema built at run time (LangGraph's
    /// supervisor routing with `Literal[*members]`), and returns it as JSON: the tool is named by the
    /// schema's `title`.
    ///
    /// ```
    /// use serde_json::json;
    /// use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
    /// use weft_runnable_core::{ChatModelExt, PromptValue, Runnable, RunnableConfig, StructuredOutputMethod};
    ///
    /// # tokio_test::block_on(async {
    /// let members = ["researcher", "coder"];
    /// let route = json!({"title": "Route", "type": "object",
    ///     "properties": {"next": {"enum": [members[0], members[1], "FINISH"]}}, "required": ["next"]});
    /// let model = FakeChatModel::new([FakeReply::tool_call("Route", json!({"next": "coder"}), "r1")]);
    /// let router = model.clone().with_structured_output_schema(route, StructuredOutputMethod::FunctionCalling);
    /// let next = router.invoke(PromptValue::from("who next?"), &RunnableConfig::default()).await.unwrap();
    /// assert_eq!(next, json!({"next": "coder"}));
    /// assert_eq!(model.calls()[0].options.tools[0].name, "Route");
    /// # });
    /// ```
    fn with_structured_output_schema(
        self,
        schema: serde_json::Value,
        method: StructuredOutputMethod,
    ) -> StructuredOutput<Self, serde_json::Value> {
        StructuredOutput::from_schema(self, schema, method)
    }
}

impl<M: ChatModel> ChatModelExt for M {}
