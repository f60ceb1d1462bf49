//! Chat models as runnables: traced `invoke` and `stream`, and the macro that wires them to a model type.

use futures::stream::{self, BoxStream, StreamExt as _};
use serde::Serialize;
use serde_json::Value;

use super::{CallOptions, ChatModel};
use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{EventSink, RunKind, event_input, to_event_value, trace_invoke, trace_stream};
use crate::messages::{AiAsMessage, AiMessage, Content, Message, PromptValue};
use crate::runnable::{ChunkStream, Merge, error_stream};

/// The start-event input of a chat model run, `{"messages": [[...]]}` as in LangChain.
#[derive(Serialize)]
struct ChatModelInput<T> {
    messages: [T; 1],
}

/// Runs `model` on `input` as a traced chat model run and returns the whole reply.
///
/// When somebody listens to events (`config.callbacks` is set), the model is streamed so that an
/// `on_chat_model_stream` event fires per chunk (this is how tokens reach `stream_events` from inside
/// chains and graphs), and the merged, finished message is returned. Otherwise
/// [`generate`](ChatModel::generate) is called. Options come from [`CallOptions::from_config`]; a reply
/// without an id gets `lc_run--<run id>`.
pub async fn invoke_chat_model<M: ChatModel + ?Sized>(
    model: &M,
    input: PromptValue,
    config: &RunnableConfig,
) -> Result<AiMessage> {
    let options = CallOptions::from_config(config)?;
    let messages = input.into_messages();
    let name = model.type_name();
    if config.callbacks.is_some() {
        let config = with_model_metadata(model, config, &options);
        let chunks = traced_stream(model, messages, options, &config);
        return ChunkStream::mergeable(chunks).collect(&name).await.map(AiMessage::finish);
    }
    let input = ChatModelInput { messages: [messages] };
    trace_invoke(&name, RunKind::ChatModel, input, config, |input, child| async move {
        let [messages] = input.messages;
        let span = tracing::Span::current();
        crate::trace::record_model(&span, model.model_name(), model.provider());
        let message = model.generate(messages, &options, &child).await?;
        let mut stats = crate::trace::ReplyStats::default();
        stats.add(&message);
        stats.record(&span);
        Ok(with_run_id(message, run_id_of(&child).as_deref()))
    })
    .await
}

/// Streams `model`'s reply to `input` as a traced chat model run: one `on_chat_model_stream` event per
/// chunk, and the merged chunks in the end event. When the model's last chunk ([`AiMessage::is_chunk`]) is not
/// marked `chunk_position: "last"`, an empty chunk so marked closes the stream, as langchain-core closes it.
pub fn stream_chat_model<'a, M: ChatModel + ?Sized>(
    model: &'a M,
    input: PromptValue,
    config: &RunnableConfig,
) -> BoxStream<'a, Result<AiMessage>> {
    let options = match CallOptions::from_config(config) {
        Ok(options) => options,
        Err(err) => return error_stream(err),
    };
    let config = with_model_metadata(model, config, &options);
    traced_stream(model, input.into_messages(), options, &config)
}

/// Like [`stream_chat_model`], but the stream owns `model`, so it may outlive the value it was made from:
/// `ChatOpenAI::builder(..).build()?.stream(..)` on a temporary, or a stream handed to another task.
///
/// The chunks are produced by a future that holds the model and the model's borrowing stream, and are
/// handed over through a channel of one (the model runs at most a chunk ahead of the reader); dropping the
/// stream drops both.
pub fn stream_chat_model_owned<M: ChatModel + 'static>(
    model: M,
    input: PromptValue,
    config: &RunnableConfig,
) -> BoxStream<'static, Result<AiMessage>> {
    let config = config.clone();
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<AiMessage>>(0);
    let produce = async move {
        let mut chunks = stream_chat_model(&model, input, &config);
        while let Some(chunk) = chunks.next().await {
            if futures::SinkExt::send(&mut tx, chunk).await.is_err() {
                break;
            }
        }
    };
    // The producer's end yields nothing; the receiver ends once the producer (its sender) is gone.
    let produced = stream::once(produce).map(|()| None);
    stream::select(rx.map(Some), produced).filter_map(std::future::ready).boxed()
}

fn traced_stream<'a, M: ChatModel + ?Sized>(
    model: &'a M,
    messages: Vec<Message>,
    options: CallOptions,
    config: &RunnableConfig,
) -> BoxStream<'a, Result<AiMessage>> {
    let input = event_input(config, &ChatModelInput { messages: [&messages] });
    trace_stream(
        &model.type_name(),
        RunKind::ChatModel,
        input,
        config,
        move |child| {
            let run_id = run_id_of(&child);
            // Called inside the model's run span: the model, then the usage its chunks report.
            let span = tracing::Span::current();
            crate::trace::record_model(&span, model.model_name(), model.provider());
            let mut stats = crate::trace::ReplyStats::default();
            let sink = child.callbacks.clone();
            run_chunks(model.stream_chunks(messages, &options, &child), run_id, sink)
                .map(move |chunk| {
                    if let Ok(chunk) = &chunk {
                        if !span.is_disabled() {
                            stats.add(chunk);
                            stats.record(&span);
                        }
                    }
                    chunk.map(EventChunk)
                })
                .boxed()
        },
        |acc: EventChunk, next: EventChunk| acc.0.merge(next.0).map(EventChunk),
    )
    .map(|chunk| chunk.map(|EventChunk(message)| message))
    .boxed()
}

/// A model's chunk as its run's events carry it: in [`Message`] form, so that its `type` tells a chunk
/// (`AIMessageChunk`, as LangChain's events show it) from a whole reply (`ai`).
#[derive(Clone)]
struct EventChunk(AiMessage);

impl Serialize for EventChunk {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        AiAsMessage(&self.0).serialize(serializer)
    }
}

/// Where a model's stream stands, for closing it.
enum Progress {
    /// Nothing yet.
    Empty,
    /// The last chunk left the stream open; whether its content was blocks.
    Open { blocks: bool },
    /// The last item was marked `chunk_position: "last"`, or was a whole message.
    Marked,
    /// The stream failed: it is not closed.
    Failed,
    /// The model's stream ended (and was closed when it had to be).
    Done,
}

/// A model's chunks as its run streams them, as langchain-core streams them: each given the run's id when
/// it has none; when the last one is a chunk ([`AiMessage::is_chunk`]) not marked `chunk_position: "last"`,
/// an empty chunk so marked follows (content `""`, or `[]` after block content, and the run's id, whatever
/// id the model's chunks had). A whole message (a model that does not stream), a stream that yielded
/// nothing and one that failed are not closed.
fn run_chunks(
    chunks: BoxStream<'_, Result<AiMessage>>,
    run_id: Option<String>,
    sink: Option<EventSink>,
) -> BoxStream<'_, Result<AiMessage>> {
    let state = (chunks, Progress::Empty, run_id, sink);
    stream::unfold(state, |(mut chunks, progress, run_id, sink)| async move {
        if matches!(progress, Progress::Done) {
            return None;
        }
        // Whoever listens to the run's events may queue its chunks for a reader (a graph's stream does):
        // the next chunk waits until that queue has room, so that a model faster than the reader (a fake,
        // a reply already buffered) is held at the queue's bound instead of filling it.
        if let Some(sink) = &sink {
            sink.ready().await;
        }
        // And a model whose stream never waits yields once a chunk, so that it does not hold its thread
        // for a whole reply: a server fans each chunk out to every listener of the run, and a burst of
        // chunks per poll (up to the bound) starves the server's other tasks and raises its peak memory
        // (500 unread streams of a 50,000-word reply, one sitting on a loaded machine: 365 MB and `/ok`
        // at 434 ms without the yield; 159 MB and 144 ms with it, before the bound).
        tokio::task::yield_now().await;
        match chunks.next().await {
            Some(Ok(chunk)) => {
                let chunk = with_run_id(chunk, run_id.as_deref());
                let marked = chunk.chunk_position.as_deref().is_some_and(|p| !p.is_empty());
                let next = match progress {
                    Progress::Failed => Progress::Failed,
                    _ if marked || !chunk.is_chunk => Progress::Marked,
                    _ => Progress::Open { blocks: matches!(chunk.content, Content::Blocks(_)) },
                };
                Some((Ok(chunk), (chunks, next, run_id, sink)))
            }
            Some(Err(err)) => Some((Err(err), (chunks, Progress::Failed, run_id, sink))),
            None => {
                let Progress::Open { blocks } = progress else { return None };
                let closing = AiMessage {
                    content: if blocks { Content::Blocks(Vec::new()) } else { Content::default() },
                    id: run_id.clone(),
                    chunk_position: Some("last".to_owned()),
                    is_chunk: true,
                    ..AiMessage::default()
                };
                Some((Ok(closing), (chunks, Progress::Done, run_id, sink)))
            }
        }
    })
    .boxed()
}

/// The config of a chat model run, with LangSmith's `ls_*` metadata when somebody listens.
fn with_model_metadata<M: ChatModel + ?Sized>(
    model: &M,
    config: &RunnableConfig,
    options: &CallOptions,
) -> RunnableConfig {
    let mut config = config.clone();
    if config.callbacks.is_some() {
        let metadata = &mut config.metadata;
        metadata.insert("ls_provider".to_owned(), Value::String(model.provider().to_owned()));
        metadata.insert("ls_model_name".to_owned(), Value::String(model.model_name().to_owned()));
        metadata.insert("ls_model_type".to_owned(), Value::String("chat".to_owned()));
        if let Some(stop) = &options.stop {
            metadata.insert("ls_stop".to_owned(), to_event_value(stop));
        }
    }
    config
}

/// The id given to replies without one: `lc_run--<run id>` of the chat model run.
fn run_id_of(child: &RunnableConfig) -> Option<String> {
    child.parent_ids().last().map(|id| format!("lc_run--{id}"))
}

fn with_run_id(mut message: AiMessage, run_id: Option<&str>) -> AiMessage {
    if message.id.is_none() {
        message.id = run_id.map(str::to_owned);
    }
    message
}

/// Makes a [`ChatModel`] type a `Runnable<PromptValue, AiMessage>` of kind `ChatModel` (named by
/// [`ChatModel::type_name`], invoked with [`invoke_chat_model`], streamed with [`stream_chat_model`],
/// chunks merged as AI message chunks) and gives it the `|` operator.
///
/// ```
/// use weft_runnable_core::{AiMessage, CallOptions, ChatModel, Message, Result, Runnable, RunnableConfig};
///
/// /// Answers with the text of the last message.
/// struct Echo;
///
/// #[async_trait::async_trait]
/// impl ChatModel for Echo {
///     fn model_name(&self) -> &str {
///         "echo-1"
///     }
///
///     fn provider(&self) -> &str {
///         "local"
///     }
///
///     async fn generate(&self, messages: Vec<Message>, _: &CallOptions, _: &RunnableConfig) -> Result<AiMessage> {
///         Ok(AiMessage::new(messages.last().map(Message::text).unwrap_or_default()))
///     }
/// }
///
/// weft_runnable_core::impl_chat_model_runnable!(Echo);
/// // A wrapper generic over its model: `impl_chat_model_runnable!([M: ChatModel] MyWrapper<M>);`
///
/// # tokio_test::block_on(async {
/// let reply = Echo.invoke("hello".into(), &RunnableConfig::default()).await?;
/// assert_eq!(reply.text(), "hello");
/// # Ok::<(), weft_runnable_core::Error>(())
/// # }).unwrap();
/// ```
#[macro_export]
macro_rules! impl_chat_model_runnable {
    (@runnable [$($gen:tt)*] $ty:ty) => {
        #[$crate::__private::async_trait]
        impl<$($gen)*> $crate::Runnable<$crate::PromptValue, $crate::AiMessage> for $ty {
            fn name(&self) -> ::std::borrow::Cow<'_, str> {
                $crate::ChatModel::type_name(self)
            }

            fn kind(&self) -> $crate::RunKind {
                $crate::RunKind::ChatModel
            }

            async fn invoke(
                &self,
                input: $crate::PromptValue,
                config: &$crate::RunnableConfig,
            ) -> $crate::Result<$crate::AiMessage> {
                $crate::chat_model::invoke_chat_model(self, input, config).await
            }

            fn stream<'a>(
                &'a self,
                input: $crate::PromptValue,
                config: &$crate::RunnableConfig,
            ) -> $crate::__private::BoxStream<'a, $crate::Result<$crate::AiMessage>> {
                $crate::chat_model::stream_chat_model(self, input, config)
            }

            fn merge_chunks(
                &self,
                acc: $crate::AiMessage,
                next: $crate::AiMessage,
            ) -> $crate::Result<$crate::AiMessage> {
                $crate::Merge::merge(acc, next)
            }
        }
    };
    ([$($gen:tt)*] $ty:ty) => {
        $crate::impl_chat_model_runnable!(@runnable [$($gen)*] $ty);
        $crate::impl_pipe_operator!([$($gen)*] $ty => $crate::AiMessage);
    };
    ($ty:ty) => {
        $crate::impl_chat_model_runnable!([] $ty);
    };
}
