//! LangChain 1.5's built-in middleware for [`create_agent`](crate::create_agent).
//!
//! Each is a [`Middleware`](crate::Middleware) with LangChain's name (its nodes are named
//! `HumanInTheLoopMiddleware.after_model`, ...), behaviour and payloads. The default prompts and
//! descriptions are LangChain's own text (MIT licensed), word for word, so that a model reads what it reads
//! under LangChain.

mod context_editing;
mod fallback;
mod hitl;
mod limits;
mod pii;
mod retry;
mod summarization;
mod todo;
mod tool_error;
mod tool_selection;

pub use context_editing::{ClearToolUses, ContextEditing};
pub use fallback::ModelFallback;
pub use hitl::{
    Action, Decision, DecisionType, EDIT_NOTICE, HitlResponse, HumanInTheLoop, InterruptMode, InterruptOn,
};
pub use limits::{
    ExitBehavior, ModelCallLimit, ModelCallLimitExceeded, ToolCallLimit, ToolCallLimitExceeded,
};
pub use pii::{Detector, Pii, PiiDetected, PiiMatch, Strategy, apply_strategy};
pub use retry::{ModelRetry, OnFailure, RetrySettings, ToolRetry, error_parts};
pub use summarization::{ContextSize, DEFAULT_SUMMARY_PROMPT, Summarization};
pub use todo::{TodoList, WRITE_TODOS_SYSTEM_PROMPT, WRITE_TODOS_TOOL_DESCRIPTION};
pub use tool_error::ToolErrorHandler;
pub use tool_selection::{DEFAULT_SELECTOR_PROMPT, LlmToolSelector, OnParsingFailure};
