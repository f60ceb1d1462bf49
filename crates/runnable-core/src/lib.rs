//! # weft-runnable-core
//!
//! The one protocol every weft component speaks. A [`Runnable`] turns an input into an output and can be
//! invoked, batched, streamed and observed as a stream of run events; runnables compose with
//! [`RunnableExt`] (`pipe`, `with_retry`, `with_fallbacks`, `with_config`, ...) and, on weft's own types,
//! with the `|` operator.
//!
//! ```
//! use weft_runnable_core::{Runnable, RunnableConfig, RunnableExt, RunnableLambda};
//! # tokio_test::block_on(async {
//! let chain = RunnableLambda::new(|x: i64| x + 1) | RunnableLambda::new(|x: i64| x * 10);
//! let config = RunnableConfig::default();
//! assert_eq!(chain.invoke(1, &config).await.unwrap(), 20);
//! assert_eq!(chain.batch(vec![1, 2, 3], &config).await.unwrap(), vec![20, 30, 40]);
//! # });
//! ```

pub mod assign;
pub mod binding;
pub mod branch;
pub mod chat_model;
pub mod config;
pub mod configurable;
pub mod embeddings;
pub mod error;
pub mod events;
pub mod ext;
pub mod fakes;
pub mod fallbacks;
pub mod gate;
pub mod history;
mod json;
pub mod lambda;
pub mod messages;
pub mod parallel;
pub mod parsers;
pub mod partial_json;
pub mod passthrough;
pub mod pick;
pub mod prompts;
pub mod py;
pub mod retry;
pub mod runnable;
pub mod sequence;
pub mod tools;
pub mod trace;
pub mod with_config;

pub use assign::RunnableAssign;
pub use binding::{BoundKwargs, RunnableBinding};
pub use branch::{RunnableBranch, RunnableBranchBuilder};
pub use config::{DEFAULT_RECURSION_LIMIT, Extensions, RunnableConfig};
pub use configurable::{Configurable, ConfigurableAlternatives, ConfigurableField};
#[doc(hidden)]
pub mod __private {
    //! Re-exports used by weft's macros. Not a public API.
    pub use async_trait::async_trait;
    pub use futures::stream::BoxStream;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}

pub use chat_model::{
    BoundChatModel, CallOptions, ChatModel, ChatModelExt, ParsedWithRaw, StructuredOutput,
    StructuredOutputMethod, StructuredOutputParser, StructuredOutputWithRaw, ToolChoice,
};
pub use embeddings::Embeddings;
pub use error::{ControlFlow, Error, ModelError, ModelErrorKind, OutputParserError, Result};
pub use events::{
    EventData, EventFilter, EventPhase, EventRecorder, EventSink, RunKind, RunScope, StreamEvent,
    dispatch_custom_event, trace_invoke, trace_invoke_owned, trace_stream, trace_tool_call, trace_transform,
};
pub use ext::{FixedOutput, RunnableExt};
pub use fallbacks::WithFallbacks;
pub use gate::QueueGate;
pub use history::{
    ChatMessageHistory, InMemoryChatMessageHistory, InMemoryHistoryStore, RunnableWithMessageHistory,
    ToHistoryMessages,
};
pub use lambda::{RunnableGenerator, RunnableLambda, SyncLambdaOutput};
pub use messages::text::{ApproximateTokens, buffer_string_xml, count_tokens_approximately};
pub use messages::{
    AiMessage, AiMessageChunk, Content, HumanMessage, InvalidToolCall, Message, MessageLike, PromptValue,
    REMOVE_ALL_MESSAGES, RemoveMessage, SystemMessage, ToolCall, ToolCallChunk, ToolMessage, ToolStatus,
    UsageMetadata, convert_to_messages, messages_from,
};
pub use parallel::RunnableParallel;
pub use parsers::{AsText, JsonOutputParser, StrOutputParser, TypedOutputParser};
pub use partial_json::{parse_json_markdown, parse_partial_json};
pub use passthrough::RunnablePassthrough;
pub use pick::{PickKeys, RunnablePick};
pub use prompts::{ChatPromptPart, ChatPromptTemplate, MessagesPlaceholder, PromptTemplate};
pub use retry::{Backoff, ExponentialBackoff, Jitter, Retry, RetryPolicy};
pub use runnable::{BoxRunnable, ChunkStream, Merge, RunValue, Runnable, seq_step_tag};
pub use sequence::Sequence;
pub use tools::{
    ArgsValidator, CommandPayload, InjectedArg, Injection, SharedTool, StructuredTool, Tool, ToolCallOutput,
    ToolContext, ToolErrorPolicy, ToolExt, ToolOutput, ToolSpec, WithErrorPolicy, invoke_tool, validate_args,
};
pub use weft_macros::tool;
pub use with_config::WithConfig;

/// The crate's README, whose example is tested as a doc test so that it cannot fall out of date.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
