#![doc = include_str!("../README.md")]

pub use weft_runnable_core as core;
pub use weft_runnable_core::*;

/// The traits and types most programs use: `use weft::prelude::*;`.
///
/// It holds the traits (`Runnable`, `RunnableExt`, `ChatModel`, `ChatModelExt`, `Tool`, `ToolExt`), the
/// building blocks of a chain (prompts, parsers, lambdas, parallel maps, passthrough, branches), messages,
/// run events and the `#[tool]` attribute. It leaves out names that would shadow the standard prelude:
/// write `weft::Result`. The test fakes live in [`weft::fakes`](crate::fakes).
///
/// A tool is both a [`Tool`] and a [`Runnable`], and both traits have a `name` method: write
/// `Tool::name(&tool)`.
pub mod prelude {
    pub use weft_runnable_core::{
        AiMessage, BoxRunnable, CallOptions, ChatModel, ChatModelExt, ChatPromptTemplate, Error, EventFilter,
        ExponentialBackoff, HumanMessage, JsonOutputParser, Merge, Message, MessagesPlaceholder,
        PromptTemplate, PromptValue, RunValue, Runnable, RunnableBranch, RunnableConfig, RunnableExt,
        RunnableGenerator, RunnableLambda, RunnableParallel, RunnablePassthrough, StrOutputParser,
        StreamEvent, StructuredTool, SystemMessage, Tool, ToolCall, ToolChoice, ToolExt, ToolMessage,
        TypedOutputParser, tool,
    };
}

/// The repository's README, whose snippet must compile and run: it is tested as a doc test here.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;
