//! `FakeChatModel`: a chat model that answers from a script.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};

use super::script::{FakeReply, Script, TokenSplit};
use crate::chat_model::{CallOptions, ChatModel};
use crate::config::RunnableConfig;
use crate::error::Result;
use crate::messages::{AiMessage, Content, Message, PromptValue, ToolCallChunk};

/// What a [`FakeChatModel`] was asked: the messages and the call options.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeCall {
    /// The messages of the call.
    pub messages: Vec<Message>,
    /// The options of the call (tools, tool choice, stop sequences, ...).
    pub options: CallOptions,
}

/// A chat model that answers each call with the next scripted reply, and records every call.
///
/// Replies are texts, messages (with tool calls, usage, ...) or errors, which fail that call; a call
/// after the last reply fails with an error saying the script ran out. Streaming splits a reply's
/// text into chunks by [`TokenSplit`] (words by default); the last chunk carries the tool calls (as
/// tool-call chunks), usage and metadata, and is not marked `chunk_position: "last"`, so the model's run
/// closes the stream with an empty chunk, as langchain-core does for a model that leaves it open. Clones
/// share the script and the record, so a test can keep one clone to inspect [`calls`](Self::calls) after
/// handing another to a chain.
///
/// ```
/// use weft_runnable_core::fakes::FakeChatModel;
/// use weft_runnable_core::{PromptValue, Runnable, RunnableConfig};
/// # tokio_test::block_on(async {
/// let model = FakeChatModel::new(["Hello there"]);
/// let reply = model.invoke(PromptValue::from("hi"), &RunnableConfig::default()).await.unwrap();
/// assert_eq!(reply.text(), "Hello there");
/// assert_eq!(model.calls()[0].messages[0].text(), "hi");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct FakeChatModel {
    script: Arc<Script<FakeCall>>,
    split: TokenSplit,
    delay: Option<Duration>,
    model_name: String,
    mark_last: bool,
}

impl FakeChatModel {
    /// A model answering with `replies`, in order.
    pub fn new<R: Into<FakeReply>>(replies: impl IntoIterator<Item = R>) -> Self {
        Self {
            script: Arc::new(Script::new("FakeChatModel", replies.into_iter().map(Into::into))),
            split: TokenSplit::default(),
            delay: None,
            model_name: "fake-chat-model".to_owned(),
            mark_last: false,
        }
    }

    /// Marks the last streamed chunk of each reply `chunk_position: "last"` (as langchain-core's
    /// `GenericFakeChatModel` does), so that nothing closes the stream after it.
    pub fn with_last_chunk_marked(mut self, mark: bool) -> Self {
        self.mark_last = mark;
        self
    }

    /// Sets how streamed replies are split into chunks.
    pub fn with_split(mut self, split: TokenSplit) -> Self {
        self.split = split;
        self
    }

    /// Waits this long before each reply (use `tokio::time::pause` in tests). A call takes its reply
    /// from the script when it is made, before waiting, so concurrent calls get the replies in the order
    /// they were made.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Sets the model name reported as `ls_model_name`.
    pub fn with_model_name(mut self, name: impl Into<String>) -> Self {
        self.model_name = name.into();
        self
    }

    /// Adds a reply at the end of the script.
    pub fn push_reply(&self, reply: impl Into<FakeReply>) {
        self.script.push(reply.into());
    }

    /// Every call received so far, in order.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.script.calls()
    }

    /// How many scripted replies are left.
    pub fn remaining(&self) -> usize {
        self.script.remaining()
    }

    async fn reply(&self, messages: Vec<Message>, options: &CallOptions) -> Result<AiMessage> {
        let reply = self.script.next(FakeCall { messages, options: options.clone() });
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        reply
    }
}

/// Splits a reply into streamed chunks that merge back into it (once finished); the last one marked
/// `chunk_position: "last"` when `mark_last`. The chunks are cut as they are asked for, so a long reply
/// costs its first chunk no more than a short one.
fn chunks_of(
    message: AiMessage,
    split: TokenSplit,
    mark_last: bool,
) -> impl Iterator<Item = AiMessage> + Send {
    let AiMessage {
        content,
        id,
        name,
        tool_calls,
        invalid_tool_calls,
        tool_call_chunks: _,
        usage_metadata,
        additional_kwargs,
        response_metadata,
        chunk_position: _,
        is_chunk: _,
    } = message;
    let pieces: Box<dyn Iterator<Item = Content> + Send> = match content {
        Content::Text(text) => Box::new(split.pieces(text).map(Content::Text)),
        blocks => Box::new(std::iter::once(blocks)),
    };
    let mut pieces = pieces.peekable();
    let valid =
        tool_calls.iter().map(|call| (Some(call.name.clone()), Some(call.args.to_string()), call.id.clone()));
    let invalid = invalid_tool_calls.into_iter().map(|call| (call.name, call.args, call.id));
    let fragments: Vec<ToolCallChunk> = valid
        .chain(invalid)
        .enumerate()
        .map(|(index, (name, args, id))| ToolCallChunk { name, args, id, index: u32::try_from(index).ok() })
        .collect();
    // What the last chunk carries besides its text; taken once it is made (a reply without text still
    // streams one chunk).
    let mut rest = Some((name, usage_metadata, additional_kwargs, response_metadata, fragments));
    std::iter::from_fn(move || {
        let content = match pieces.next() {
            Some(content) => content,
            None if rest.is_some() => Content::default(),
            None => return None,
        };
        let chunk = AiMessage { content, id: id.clone(), is_chunk: true, ..AiMessage::default() };
        if pieces.peek().is_some() {
            return Some(chunk);
        }
        let (name, usage_metadata, additional_kwargs, response_metadata, fragments) = rest.take()?;
        let mut last = AiMessage { name, usage_metadata, additional_kwargs, response_metadata, ..chunk }
            .with_tool_call_chunks(fragments);
        if mark_last {
            last.chunk_position = Some("last".to_owned());
        }
        Some(last)
    })
}

#[async_trait]
impl ChatModel for FakeChatModel {
    fn model_name(&self) -> &str {
        &self.model_name
    }

    fn provider(&self) -> &str {
        "fake"
    }

    async fn generate(
        &self,
        messages: Vec<Message>,
        options: &CallOptions,
        _config: &RunnableConfig,
    ) -> Result<AiMessage> {
        self.reply(messages, options).await
    }

    fn stream_chunks<'a>(
        &'a self,
        messages: Vec<Message>,
        options: &CallOptions,
        _config: &RunnableConfig,
    ) -> BoxStream<'a, Result<AiMessage>> {
        let options = options.clone();
        let (split, mark_last) = (self.split, self.mark_last);
        stream::once(async move { self.reply(messages, &options).await })
            .flat_map(move |reply| {
                let items: Box<dyn Iterator<Item = Result<AiMessage>> + Send> = match reply {
                    Ok(message) => Box::new(chunks_of(message, split, mark_last).map(Ok)),
                    Err(err) => Box::new(std::iter::once(Err(err))),
                };
                stream::iter(items)
            })
            .boxed()
    }
}

crate::impl_chat_model_runnable!(FakeChatModel);

impl FakeChatModel {
    /// Streams the reply to `input` as [`Runnable::stream`](crate::Runnable::stream) does, with a stream
    /// that owns a clone of the model, so it may be called on a temporary.
    pub fn stream(
        &self,
        input: impl Into<PromptValue>,
        config: &RunnableConfig,
    ) -> BoxStream<'static, Result<AiMessage>> {
        crate::chat_model::stream_chat_model_owned(self.clone(), input.into(), config)
    }
}

/// langchain-core's `GenericFakeChatModel`: a [`FakeChatModel`] streaming each reply as words and single
/// whitespace characters ([`TokenSplit::WordsAndSpaces`]), the last chunk marked `chunk_position:
/// "last"`. Unlike langchain-core's, a reply's tool calls stream too (in the last chunk), so an agent
/// streamed token by token still gets them.
///
/// ```
/// use futures::StreamExt as _;
/// use weft_runnable_core::fakes::GenericFakeChatModel;
/// use weft_runnable_core::RunnableConfig;
/// # tokio_test::block_on(async {
/// let model = GenericFakeChatModel::new(["hello big world"]);
/// let chunks: Vec<_> = model.stream("hi", &RunnableConfig::default()).collect().await;
/// let texts: Vec<String> = chunks.iter().map(|c| c.as_ref().unwrap().text()).collect();
/// assert_eq!(texts, ["hello", " ", "big", " ", "world"]);
/// assert_eq!(chunks[4].as_ref().unwrap().chunk_position.as_deref(), Some("last"));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct GenericFakeChatModel;

impl GenericFakeChatModel {
    /// A model answering with `replies`, in order (texts, messages, scripted failures).
    #[allow(clippy::new_ret_no_self, reason = "the model is a FakeChatModel set up as LangChain's")]
    pub fn new<R: Into<FakeReply>>(replies: impl IntoIterator<Item = R>) -> FakeChatModel {
        FakeChatModel::new(replies).with_split(TokenSplit::WordsAndSpaces).with_last_chunk_marked(true)
    }
}
