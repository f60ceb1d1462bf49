//! Human approval of tool calls: the agent pauses before chosen tools run, shows the pending calls, and
//! goes on with a decision per call (approve, edit the arguments, or reject with a message for the model).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_graph::{Command, Runtime, State};
use weft_runnable_core::{Error, Message, Result, ToolCall, ToolMessage, ToolStatus};

use crate::tool_node::pending_tool_calls;

/// Which tool calls need a human's approval before they run, and what the reviewer is told.
///
/// Given to [`ReactAgentBuilder::human_approval`](crate::ReactAgentBuilder::human_approval), it adds a
/// node `human_approval` between the model and the tools. When the model asks for tools that need
/// approval, that node calls [`Runtime::interrupt`] with an [`ApprovalRequest`] listing them; the run
/// pauses (the graph's state is saved by its checkpointer, any checkpointer) until it is resumed with
/// [`HumanApproval::resume`]: one [`ApprovalDecision`] per listed call, in order. Approved calls run as
/// asked, edited calls run with the new arguments (the AI message is rewritten, so the history shows
/// what ran), rejected calls do not run and the model gets the reviewer's message as their tool result.
#[derive(Debug, Clone)]
pub struct HumanApproval {
    tools: Option<Vec<String>>,
    description: String,
}

/// The text shown with each call when no description is set.
const DEFAULT_DESCRIPTION: &str = "Tool execution requires approval";

impl HumanApproval {
    /// Every tool call needs approval.
    pub fn all_tools() -> Self {
        Self { tools: None, description: DEFAULT_DESCRIPTION.to_owned() }
    }

    /// Calls of these tools need approval; the others run at once.
    pub fn tools<I: IntoIterator<Item = T>, T: Into<String>>(names: I) -> Self {
        Self {
            tools: Some(names.into_iter().map(Into::into).collect()),
            description: DEFAULT_DESCRIPTION.to_owned(),
        }
    }

    /// Sets the text shown to the reviewer with each call.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// Whether calls of the tool `name` need approval.
    pub fn needs_approval(&self, name: &str) -> bool {
        self.tools.as_ref().is_none_or(|tools| tools.iter().any(|t| t == name))
    }

    /// The input that resumes a paused agent with `decisions` (one per call of the request, in order).
    pub fn resume<S: State>(decisions: impl IntoIterator<Item = ApprovalDecision>) -> Command<S> {
        Command::resume(Value::Array(decisions.into_iter().map(|d| d.to_json()).collect()))
    }

    /// Reviews the pending calls of the last AI message of `messages`: pauses the run for the calls that
    /// need approval, and once resumed returns the messages to write (the AI message rewritten when a
    /// call was edited, a tool message per rejected call). Returns no message when nothing needs approval.
    pub fn review(&self, messages: &[Message], runtime: &Runtime) -> Result<Vec<Message>> {
        let Some((ai, pending)) = pending_tool_calls(messages) else { return Ok(Vec::new()) };
        let asked: Vec<&ToolCall> = pending.iter().filter(|c| self.needs_approval(&c.name)).collect();
        if asked.is_empty() {
            return Ok(Vec::new());
        }
        let request = ApprovalRequest {
            action_requests: asked
                .iter()
                .map(|call| ActionRequest {
                    tool_call_id: call.id.clone().unwrap_or_default(),
                    name: call.name.clone(),
                    args: call.args.clone(),
                    description: self.description.clone(),
                })
                .collect(),
        };
        let decisions: Vec<ApprovalDecision> = runtime.interrupt(&request)?;
        if decisions.len() != asked.len() {
            return Err(Error::custom(ApprovalError::DecisionCount {
                expected: asked.len(),
                got: decisions.len(),
            }));
        }
        let mut revised = ai.clone();
        let mut edited = false;
        let mut rejections = Vec::new();
        for (call, decision) in asked.iter().zip(decisions) {
            match decision {
                ApprovalDecision::Approve => {}
                ApprovalDecision::Edit { args } => {
                    if !args.is_object() {
                        return Err(Error::custom(ApprovalError::EditNotObject {
                            tool: call.name.clone(),
                            args,
                        }));
                    }
                    for target in revised.tool_calls.iter_mut().filter(|c| c.id == call.id) {
                        target.args = args.clone();
                    }
                    edited = true;
                }
                ApprovalDecision::Reject { message } => {
                    let id = call.id.clone().unwrap_or_default();
                    let text = message.unwrap_or_else(|| {
                        format!("The user rejected the call of tool '{}' (id {id}).", call.name)
                    });
                    rejections.push(Message::Tool(ToolMessage {
                        content: text.into(),
                        tool_call_id: id,
                        name: Some(call.name.clone()),
                        status: ToolStatus::Error,
                        ..ToolMessage::default()
                    }));
                }
            }
        }
        let mut out = Vec::with_capacity(rejections.len() + 1);
        if edited {
            out.push(Message::Ai(revised));
        }
        out.extend(rejections);
        Ok(out)
    }
}

/// What the agent shows the reviewer when it pauses: the interrupt's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The calls waiting for a decision, in the order the model asked for them.
    pub action_requests: Vec<ActionRequest>,
}

/// One tool call waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRequest {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool.
    pub name: String,
    /// The arguments the model chose.
    pub args: Value,
    /// What the reviewer is told.
    pub description: String,
}

/// A reviewer's decision on one call: `{"type": "approve"}`, `{"type": "edit", "args": {...}}` or
/// `{"type": "reject", "message": "..."}` as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ApprovalDecision {
    /// Run the call as the model asked.
    Approve,
    /// Run the call with these arguments instead (a JSON object).
    Edit {
        /// The new arguments.
        args: Value,
    },
    /// Do not run the call; the model gets `message` (or a default text) as its result.
    Reject {
        /// What the model is told.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

impl ApprovalDecision {
    /// Rejects with a message for the model.
    pub fn reject(message: impl Into<String>) -> Self {
        Self::Reject { message: Some(message.into()) }
    }

    /// Runs the call with `args` instead.
    pub fn edit(args: Value) -> Self {
        Self::Edit { args }
    }

    /// The decision as JSON (its serialized form).
    pub fn to_json(&self) -> Value {
        match self {
            Self::Approve => json!({"type": "approve"}),
            Self::Edit { args } => json!({"type": "edit", "args": args}),
            Self::Reject { message: Some(message) } => json!({"type": "reject", "message": message}),
            Self::Reject { message: None } => json!({"type": "reject"}),
        }
    }
}

/// A resume that does not fit the pending approval request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The number of decisions differs from the number of calls waiting for one.
    #[error("expected {expected} approval decision(s), one per pending tool call, got {got}")]
    DecisionCount {
        /// Calls waiting.
        expected: usize,
        /// Decisions given.
        got: usize,
    },
    /// An edit's arguments are not a JSON object.
    #[error("the edited arguments of tool '{tool}' must be a JSON object, got {args}")]
    EditNotObject {
        /// The tool.
        tool: String,
        /// What was given.
        args: Value,
    },
}
