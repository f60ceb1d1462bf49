//! [`ModelCallLimit`] and [`ToolCallLimit`]: LangChain's `ModelCallLimitMiddleware` and
//! `ToolCallLimitMiddleware`, caps on model and tool calls per thread and per run.

use std::borrow::Cow;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use weft_graph::JsonChannel;
use weft_runnable_core::{AiMessage, Message, Result, ToolCall, ToolMessage, ToolStatus};

use crate::agent::{
    AgentError, AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, JumpTo, Middleware, StateChannel,
};

/// What happens once a limit is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExitBehavior {
    /// Tool calls over the limit are answered with an error message and the others run (tool limits
    /// only; the default there).
    #[default]
    Continue,
    /// The run fails with a limit error.
    Error,
    /// The run ends with an AI message saying why.
    End,
}

fn invalid(middleware: &str, message: &str) -> AgentError {
    AgentError::InvalidMiddleware { middleware: middleware.to_owned(), message: message.to_owned() }
}

/// A limit on model calls was reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", model_limit_text(*.thread_count, *.run_count, *.thread_limit, *.run_limit))]
pub struct ModelCallLimitExceeded {
    /// Model calls on the thread so far.
    pub thread_count: u64,
    /// Model calls in this run so far.
    pub run_count: u64,
    /// The thread's limit.
    pub thread_limit: Option<u64>,
    /// The run's limit.
    pub run_limit: Option<u64>,
}

fn model_limit_text(thread: u64, run: u64, thread_limit: Option<u64>, run_limit: Option<u64>) -> String {
    let mut exceeded = Vec::new();
    if let Some(limit) = thread_limit.filter(|l| thread >= *l) {
        exceeded.push(format!("thread limit ({thread}/{limit})"));
    }
    if let Some(limit) = run_limit.filter(|l| run >= *l) {
        exceeded.push(format!("run limit ({run}/{limit})"));
    }
    format!("Model call limits exceeded: {}", exceeded.join(", "))
}

/// Caps the model calls of a thread and of a run (LangChain's `ModelCallLimitMiddleware`): once a
/// limit is reached the run ends with an AI message saying so, or fails ([`ExitBehavior::Error`]). It
/// counts in the private state keys `thread_model_call_count` (checkpointed) and `run_model_call_count`
/// (not checkpointed, so each run starts from zero).
#[derive(Debug, Clone)]
pub struct ModelCallLimit {
    thread_limit: Option<u64>,
    run_limit: Option<u64>,
    exit: ExitBehavior,
}

impl ModelCallLimit {
    /// Limits per thread and per run (at least one), ending the run when one is reached (`End`) or failing
    /// it (`Error`).
    pub fn new(
        thread_limit: Option<u64>,
        run_limit: Option<u64>,
        exit: ExitBehavior,
    ) -> Result<Self, AgentError> {
        const NAME: &str = "ModelCallLimitMiddleware";
        if thread_limit.is_none() && run_limit.is_none() {
            return Err(invalid(NAME, "At least one limit must be specified (thread_limit or run_limit)"));
        }
        if exit == ExitBehavior::Continue {
            return Err(invalid(NAME, "Invalid exit_behavior: continue. Must be 'end' or 'error'"));
        }
        Ok(Self { thread_limit, run_limit, exit })
    }
}

fn count(state: &AgentState, key: &str) -> u64 {
    state.get(key).and_then(Value::as_u64).unwrap_or(0)
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for ModelCallLimit {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("ModelCallLimitMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().before_model().can_jump_to([JumpTo::End]).after_model()
    }

    fn state_channels(&self) -> Vec<StateChannel> {
        vec![
            StateChannel::private("thread_model_call_count", JsonChannel::LastValue),
            StateChannel::private("run_model_call_count", JsonChannel::Untracked),
        ]
    }

    async fn before_model(&self, state: &AgentState, _runtime: &AgentRuntime<C>) -> HookResult {
        let thread = count(state, "thread_model_call_count");
        let run = count(state, "run_model_call_count");
        let over = self.thread_limit.is_some_and(|l| thread >= l) || self.run_limit.is_some_and(|l| run >= l);
        if !over {
            return Ok(None);
        }
        let error = ModelCallLimitExceeded {
            thread_count: thread,
            run_count: run,
            thread_limit: self.thread_limit,
            run_limit: self.run_limit,
        };
        if self.exit == ExitBehavior::Error {
            return Err(weft_runnable_core::Error::custom(error));
        }
        Ok(Some(AgentUpdate::new().messages(vec![Message::ai(error.to_string())]).jump_to(JumpTo::End)))
    }

    async fn after_model(&self, state: &AgentState, _runtime: &AgentRuntime<C>) -> HookResult {
        Ok(Some(
            AgentUpdate::new()
                .set("thread_model_call_count", json!(count(state, "thread_model_call_count") + 1))
                .set("run_model_call_count", json!(count(state, "run_model_call_count") + 1)),
        ))
    }
}

/// A limit on tool calls was reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", tool_limit_text(*.thread_count, *.run_count, *.thread_limit, *.run_limit, .tool.as_deref()))]
pub struct ToolCallLimitExceeded {
    /// Calls on the thread, the refused ones included.
    pub thread_count: u64,
    /// Calls in this run, the refused ones included.
    pub run_count: u64,
    /// The thread's limit.
    pub thread_limit: Option<u64>,
    /// The run's limit.
    pub run_limit: Option<u64>,
    /// The tool limited, or all of them.
    pub tool: Option<String>,
}

fn tool_limit_text(
    thread: u64,
    run: u64,
    thread_limit: Option<u64>,
    run_limit: Option<u64>,
    tool: Option<&str>,
) -> String {
    let what = tool.map_or_else(|| "Tool".to_owned(), |t| format!("'{t}' tool"));
    let mut exceeded = Vec::new();
    if let Some(limit) = thread_limit.filter(|l| thread > *l) {
        exceeded.push(format!("thread limit exceeded ({thread}/{limit} calls)"));
    }
    if let Some(limit) = run_limit.filter(|l| run > *l) {
        exceeded.push(format!("run limit exceeded ({run}/{limit} calls)"));
    }
    format!("{what} call limit reached: {}.", exceeded.join(" and "))
}

/// Caps the calls of one tool (or of every tool) per thread and per run (LangChain's
/// `ToolCallLimitMiddleware`). Calls over the limit are answered with an error message while the others
/// run ([`ExitBehavior::Continue`]), or the run ends with every pending call answered and an AI message
/// saying why (`End`), or fails (`Error`). It counts per tool in the private keys
/// `thread_tool_call_count` and `run_tool_call_count`.
#[derive(Debug, Clone)]
pub struct ToolCallLimit {
    tool: Option<String>,
    thread_limit: Option<u64>,
    run_limit: Option<u64>,
    exit: ExitBehavior,
}

impl ToolCallLimit {
    /// Limits for `tool` (every tool when `None`), at least one, the run's no higher than the thread's.
    pub fn new(
        tool: Option<String>,
        thread_limit: Option<u64>,
        run_limit: Option<u64>,
        exit: ExitBehavior,
    ) -> Result<Self, AgentError> {
        const NAME: &str = "ToolCallLimitMiddleware";
        if thread_limit.is_none() && run_limit.is_none() {
            return Err(invalid(NAME, "At least one limit must be specified (thread_limit or run_limit)"));
        }
        if let (Some(t), Some(r)) = (thread_limit, run_limit) {
            if r > t {
                return Err(invalid(
                    NAME,
                    &format!(
                        "run_limit ({r}) cannot exceed thread_limit ({t}). The run limit should be less than or equal to the thread limit."
                    ),
                ));
            }
        }
        Ok(Self { tool, thread_limit, run_limit, exit })
    }

    fn would_exceed(&self, thread: u64, run: u64) -> bool {
        self.thread_limit.is_some_and(|l| thread + 1 > l) || self.run_limit.is_some_and(|l| run + 1 > l)
    }

    fn blocked_message(&self, call: &ToolCall, content: String) -> Message {
        Message::Tool(ToolMessage {
            content: content.into(),
            tool_call_id: call.id.clone().unwrap_or_default(),
            name: Some(call.name.clone()),
            status: ToolStatus::Error,
            ..ToolMessage::default()
        })
    }
}

fn counts(state: &AgentState, key: &str) -> Map<String, Value> {
    state.get(key).and_then(Value::as_object).cloned().unwrap_or_default()
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for ToolCallLimit {
    fn name(&self) -> Cow<'_, str> {
        match &self.tool {
            Some(tool) => Cow::Owned(format!("ToolCallLimitMiddleware[{tool}]")),
            None => Cow::Borrowed("ToolCallLimitMiddleware"),
        }
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().after_model().can_jump_to([JumpTo::End])
    }

    fn state_channels(&self) -> Vec<StateChannel> {
        vec![
            StateChannel::private("thread_tool_call_count", JsonChannel::LastValue),
            StateChannel::private("run_tool_call_count", JsonChannel::Untracked),
        ]
    }

    async fn after_model(&self, state: &AgentState, _runtime: &AgentRuntime<C>) -> HookResult {
        let Some(ai) = state.messages().iter().rev().find_map(Message::as_ai) else { return Ok(None) };
        if ai.tool_calls.is_empty() {
            return Ok(None);
        }
        let key = self.tool.clone().unwrap_or_else(|| "__all__".to_owned());
        let mut thread_counts = counts(state, "thread_tool_call_count");
        let mut run_counts = counts(state, "run_tool_call_count");
        let thread_now = thread_counts.get(&key).and_then(Value::as_u64).unwrap_or(0);
        let run_now = run_counts.get(&key).and_then(Value::as_u64).unwrap_or(0);
        let (mut thread, mut run) = (thread_now, run_now);
        let (mut allowed, mut blocked) = (Vec::new(), Vec::new());
        for call in ai.tool_calls.iter().filter(|c| self.tool.as_ref().is_none_or(|t| *t == c.name)) {
            if self.would_exceed(thread, run) {
                blocked.push(call.clone());
            } else {
                allowed.push(call.clone());
                thread += 1;
                run += 1;
            }
        }
        let refused = blocked.len() as u64;
        thread_counts.insert(key.clone(), json!(thread));
        run_counts.insert(key.clone(), json!(run + refused));
        let update = |threads: Map<String, Value>, runs: Map<String, Value>| {
            AgentUpdate::new()
                .set("thread_tool_call_count", Value::Object(threads))
                .set("run_tool_call_count", Value::Object(runs))
        };
        if blocked.is_empty() {
            return Ok((!allowed.is_empty()).then(|| update(thread_counts, run_counts)));
        }
        let error = ToolCallLimitExceeded {
            thread_count: thread + refused,
            run_count: run + refused,
            thread_limit: self.thread_limit,
            run_limit: self.run_limit,
            tool: self.tool.clone(),
        };
        if self.exit == ExitBehavior::Error {
            return Err(weft_runnable_core::Error::custom(error));
        }
        let text = match &self.tool {
            Some(tool) => format!("Tool call limit exceeded. Do not call '{tool}' again."),
            None => "Tool call limit exceeded. Do not make additional tool calls.".to_owned(),
        };
        let mut messages: Vec<Message> =
            blocked.iter().map(|c| self.blocked_message(c, text.clone())).collect();
        if self.exit == ExitBehavior::End {
            let stopped = "Execution stopped before this tool call could run because another tool call in the same \
                           batch exceeded the limit.";
            for call in ai.tool_calls.iter().filter(|c| !blocked.iter().any(|b| b.id == c.id)) {
                messages.push(self.blocked_message(call, stopped.to_owned()));
            }
            messages.push(Message::Ai(AiMessage::new(error.to_string())));
            thread_counts.insert(key, json!(thread_now));
            return Ok(Some(update(thread_counts, run_counts).messages(messages).jump_to(JumpTo::End)));
        }
        Ok(Some(update(thread_counts, run_counts).messages(messages)))
    }
}
