//! Helpers shared by the agent tests: tools, calls, messages, captured spans.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

pub mod spans;

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_runnable_core::{
    AiMessage, Error, Message, RunnableConfig, SharedTool, StructuredTool, ToolCall, ToolExt,
};

/// Arguments of `add`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddArgs {
    /// First.
    pub a: i64,
    /// Second.
    pub b: i64,
}

/// `add(a, b)`: returns the sum as JSON.
pub fn add() -> SharedTool {
    StructuredTool::from_typed("add", "Adds two integers.", |args: AddArgs| async move {
        Ok(json!(args.a + args.b))
    })
    .shared()
}

/// `echo(text)`: returns the text; records every call in `log`.
pub fn echo(log: Arc<Mutex<Vec<String>>>) -> SharedTool {
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    StructuredTool::from_fn("echo", "Echoes its text.", schema, move |args: Value, _ctx| {
        let log = Arc::clone(&log);
        async move {
            let text = args["text"].as_str().unwrap_or_default().to_owned();
            log.lock().unwrap().push(text.clone());
            Ok(text)
        }
    })
    .shared()
}

/// `boom()`: always fails with `kaboom`.
pub fn boom() -> SharedTool {
    StructuredTool::from_fn(
        "boom",
        "Fails.",
        json!({"type": "object", "properties": {}}),
        |_args: Value, _ctx| async move { Err::<String, _>(Error::msg("kaboom")) },
    )
    .shared()
}

/// A tool call.
pub fn call(name: &str, args: Value, id: &str) -> ToolCall {
    ToolCall { name: name.into(), args, id: Some(id.into()) }
}

/// An AI message asking for `calls`.
pub fn asks(calls: Vec<ToolCall>) -> AiMessage {
    AiMessage { tool_calls: calls, ..AiMessage::default() }
}

/// The type names of `messages`.
pub fn kinds(messages: &[Message]) -> Vec<&'static str> {
    messages.iter().map(Message::type_name).collect()
}

/// The texts of `messages`.
pub fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::text).collect()
}

/// A config on thread `id`.
pub fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}
