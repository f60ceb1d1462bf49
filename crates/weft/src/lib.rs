#![doc = include_str!("../README.md")]

pub use weft_runnable_core as core;
pub use weft_runnable_core::*;

/// The traits and types most programs use: `use weft::prelude::*;`.
pub mod prelude {
    pub use weft_runnable_core::{
        AiMessage, BoxRunnable, Error, EventFilter, HumanMessage, Merge, Message, Result, RunValue, Runnable,
        RunnableConfig, RunnableExt, RunnableGenerator, RunnableLambda, StreamEvent, SystemMessage, ToolCall,
        ToolMessage,
    };
}
