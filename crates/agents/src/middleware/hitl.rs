//! [`HumanInTheLoop`]: LangChain's `HumanInTheLoopMiddleware`, a person reviews tool calls before they
//! run (approve, edit, reject, respond), in one interrupt per model turn or one per call.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use weft_graph::JsonChannel;
use weft_runnable_core::py::{py_json, py_repr};
use weft_runnable_core::{
    Content, Error, Message, Result, Tool, ToolCall, ToolCallOutput, ToolMessage, ToolStatus,
};

use crate::agent::{
    AgentError, AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, Middleware, StateChannel,
    ToolCallRequest, ToolHandler,
};

/// The state key holding the reviewer's replacements of tool calls, by call id.
const EDITED: &str = "hitl_edited_tool_calls";

/// The text put before the result of a call a reviewer replaced.
pub const EDIT_NOTICE: &str = "Note: a human reviewer replaced this tool call before it ran. The call recorded in \
                               your message is the one you produced, not the one that executed. This was \
                               intentional and authorized. Do not re-issue your original call.";

/// What a reviewer may decide about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionType {
    /// Run it as the model asked.
    Approve,
    /// Run another call instead.
    Edit,
    /// Do not run it; the model is told why.
    Reject,
    /// Do not run it; the reviewer's message is the tool's answer.
    Respond,
}

/// A name and arguments: the call a reviewer ran instead (LangChain's `Action`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub args: Value,
}

/// A reviewer's decision about one call (LangChain's `Decision`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Decision {
    /// Run the call.
    Approve,
    /// Run `edited_action` instead.
    Edit {
        /// The call to run.
        edited_action: Action,
    },
    /// Do not run it.
    Reject {
        /// Why, told to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Answer in the tool's place.
    Respond {
        /// The tool's answer.
        message: String,
    },
}

impl Decision {
    fn kind(&self) -> DecisionType {
        match self {
            Self::Approve => DecisionType::Approve,
            Self::Edit { .. } => DecisionType::Edit,
            Self::Reject { .. } => DecisionType::Reject,
            Self::Respond { .. } => DecisionType::Respond,
        }
    }
}

/// The resume value of a batched review: one decision per reviewed call, in order (LangChain's
/// `HITLResponse`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitlResponse {
    /// The decisions.
    pub decisions: Vec<Decision>,
}

/// How the review pauses (LangChain's `interrupt_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterruptMode {
    /// One interrupt per model turn, a `HITLRequest` listing every reviewed call (the default).
    #[default]
    Batched,
    /// One interrupt per reviewed call, as it starts: a `tool_approval` request answered with one decision.
    PerCall,
}

type DescribeFn<C> = dyn Fn(&ToolCall, &AgentState, &AgentRuntime<C>) -> String + Send + Sync;
type WhenFn<C> = dyn Fn(&ToolCallRequest<C>) -> bool + Send + Sync;

/// The review of one tool (LangChain's `InterruptOnConfig`).
pub struct InterruptOn<C = ()> {
    allowed: Vec<DecisionType>,
    description: Option<Description<C>>,
    when: Option<Arc<WhenFn<C>>>,
}

enum Description<C> {
    Text(String),
    Made(Arc<DescribeFn<C>>),
}

impl<C> Clone for InterruptOn<C> {
    fn clone(&self) -> Self {
        Self {
            allowed: self.allowed.clone(),
            description: self.description.as_ref().map(|d| match d {
                Description::Text(t) => Description::Text(t.clone()),
                Description::Made(f) => Description::Made(Arc::clone(f)),
            }),
            when: self.when.clone(),
        }
    }
}

impl<C> fmt::Debug for InterruptOn<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InterruptOn").field("allowed", &self.allowed).finish_non_exhaustive()
    }
}

impl<C> InterruptOn<C> {
    /// Review with these decisions allowed.
    pub fn new(allowed: impl IntoIterator<Item = DecisionType>) -> Self {
        Self { allowed: allowed.into_iter().collect(), description: None, when: None }
    }

    /// Every decision allowed (LangChain's `True`).
    pub fn all() -> Self {
        Self::new([DecisionType::Approve, DecisionType::Edit, DecisionType::Reject, DecisionType::Respond])
    }

    /// The text shown to the reviewer (instead of the prefix, the tool and its arguments).
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(Description::Text(text.into()));
        self
    }

    /// The text shown to the reviewer, made from the call, the state and the runtime.
    #[must_use]
    pub fn describe_with(
        mut self,
        f: impl Fn(&ToolCall, &AgentState, &AgentRuntime<C>) -> String + Send + Sync + 'static,
    ) -> Self {
        self.description = Some(Description::Made(Arc::new(f)));
        self
    }

    /// Reviews only the calls `when` accepts (the others run at once); it is asked again on resume, so it
    /// must answer alike for the same call.
    #[must_use]
    pub fn when(mut self, when: impl Fn(&ToolCallRequest<C>) -> bool + Send + Sync + 'static) -> Self {
        self.when = Some(Arc::new(when));
        self
    }
}

/// Pauses the agent so that a person reviews chosen tool calls before they run (LangChain's
/// `HumanInTheLoopMiddleware`). The pause is an interrupt: the agent needs a checkpointer, and the run
/// goes on with `Command::resume`.
///
/// In batched mode (the default) one interrupt per model turn shows a `HITLRequest` as Agent Chat UI
/// renders it, `{"action_requests": [{"name", "args", "description"}], "review_configs": [{"action_name",
/// "allowed_decisions"}]}`, answered by `{"decisions": [...]}` in the same order. In per-call mode each
/// reviewed call pauses as it starts with `{"type": "tool_approval", "tool_call_id", "name", "args",
/// "description"}`, answered by one decision keyed by the interrupt's id.
pub struct HumanInTheLoop<C = ()> {
    interrupt_on: BTreeMap<String, InterruptOn<C>>,
    description_prefix: String,
    edit_notice: Option<String>,
    mode: InterruptMode,
}

impl<C> fmt::Debug for HumanInTheLoop<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HumanInTheLoop")
            .field("interrupt_on", &self.interrupt_on)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl<C> Default for HumanInTheLoop<C> {
    fn default() -> Self {
        Self {
            interrupt_on: BTreeMap::new(),
            description_prefix: "Tool execution requires approval".to_owned(),
            edit_notice: Some(EDIT_NOTICE.to_owned()),
            mode: InterruptMode::Batched,
        }
    }
}

impl<C: Send + Sync + 'static> HumanInTheLoop<C> {
    /// No tool reviewed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reviews the calls of `tool` as `config` says. A config without decisions is an error, as in
    /// LangChain (it would silently turn the review off).
    pub fn interrupt_on(
        mut self,
        tool: impl Into<String>,
        config: InterruptOn<C>,
    ) -> Result<Self, AgentError> {
        let tool = tool.into();
        if config.allowed.is_empty() {
            return Err(AgentError::InvalidMiddleware {
                middleware: "HumanInTheLoopMiddleware".to_owned(),
                message: format!(
                    "`allowed_decisions` of tool '{tool}' must be a non-empty list of decision types \
                     (e.g. ['approve', 'reject'])"
                ),
            });
        }
        self.interrupt_on.insert(tool, config);
        Ok(self)
    }

    /// Reviews the calls of `tool` with every decision allowed (LangChain's `{"tool": True}`).
    pub fn review(mut self, tool: impl Into<String>) -> Self {
        self.interrupt_on.insert(tool.into(), InterruptOn::all());
        self
    }

    /// Sets the text before the tool and its arguments in the default description.
    #[must_use]
    pub fn description_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.description_prefix = prefix.into();
        self
    }

    /// Sets (or, with `None`, drops) the notice put before the result of a call a reviewer replaced.
    #[must_use]
    pub fn edit_notice(mut self, notice: Option<String>) -> Self {
        self.edit_notice = notice;
        self
    }

    /// Sets how the review pauses.
    #[must_use]
    pub fn interrupt_mode(mut self, mode: InterruptMode) -> Self {
        self.mode = mode;
        self
    }

    fn describe(
        &self,
        call: &ToolCall,
        config: &InterruptOn<C>,
        state: &AgentState,
        rt: &AgentRuntime<C>,
    ) -> String {
        match &config.description {
            Some(Description::Text(text)) => text.clone(),
            Some(Description::Made(f)) => f(call, state, rt),
            None => {
                format!("{}\n\nTool: {}\nArgs: {}", self.description_prefix, call.name, py_repr(&call.args))
            }
        }
    }

    /// Whether `call` is reviewed (its tool is listed and `when`, if any, accepts it).
    fn reviews(&self, request: &ToolCallRequest<C>) -> Option<&InterruptOn<C>> {
        let config = self.interrupt_on.get(&request.tool_call.name)?;
        match &config.when {
            Some(when) if !when(request) => None,
            _ => Some(config),
        }
    }

    /// The batched review after a model turn.
    fn review_batch(&self, state: &AgentState, rt: &AgentRuntime<C>) -> HookResult {
        let Some(ai) = state.messages().iter().rev().find_map(Message::as_ai) else { return Ok(None) };
        if ai.tool_calls.is_empty() {
            return Ok(None);
        }
        let mut actions = Vec::new();
        let mut configs = Vec::new();
        let mut reviewed = Vec::new();
        for (i, call) in ai.tool_calls.iter().enumerate() {
            let request = ToolCallRequest {
                tool_call: call.clone(),
                tool: None,
                tools: Arc::from(Vec::new()),
                state: state.clone(),
                runtime: rt.clone(),
            };
            let Some(config) = self.reviews(&request) else { continue };
            actions.push(json!({"name": call.name, "args": call.args, "description": self.describe(call, config, state, rt)}));
            configs.push(json!({"action_name": call.name, "allowed_decisions": config.allowed}));
            reviewed.push(i);
        }
        if reviewed.is_empty() {
            let had_edits = state.get(EDITED).and_then(Value::as_object).is_some_and(|m| !m.is_empty());
            return Ok(had_edits.then(|| AgentUpdate::new().set(EDITED, json!({}))));
        }
        let response: HitlResponse =
            rt.interrupt(json!({"action_requests": actions, "review_configs": configs}))?;
        if response.decisions.len() != reviewed.len() {
            return Err(Error::InvalidInput(format!(
                "Number of human decisions ({}) does not match number of hanging tool calls ({}).",
                response.decisions.len(),
                reviewed.len()
            )));
        }
        let mut answers = Vec::new();
        let mut edited = Map::new();
        for (decision, &i) in response.decisions.iter().zip(&reviewed) {
            let call = &ai.tool_calls[i];
            let config = &self.interrupt_on[&call.name];
            check_allowed(decision, call, config)?;
            match decision {
                Decision::Edit { edited_action } => {
                    if let Some(id) = call.id.as_ref().filter(|id| !id.is_empty()) {
                        edited.insert(id.clone(), serde_json::to_value(edited_action)?);
                    }
                }
                Decision::Reject { .. } | Decision::Respond { .. } => answers.push(answer(call, decision)),
                Decision::Approve => {}
            }
        }
        let mut messages = vec![Message::Ai(ai.clone())];
        messages.extend(answers.into_iter().map(Message::Tool));
        Ok(Some(AgentUpdate::new().messages(messages).set(EDITED, Value::Object(edited))))
    }

    /// The per-call review: `None` to run the call (with the reviewer's replacement, if any), or the
    /// answer in its place.
    fn review_call(&self, request: &ToolCallRequest<C>) -> Result<Result<Option<Action>, ToolMessage>> {
        let Some(config) = self.reviews(request) else { return Ok(Ok(None)) };
        let call = &request.tool_call;
        let Some(id) = &call.id else {
            return Err(Error::InvalidInput(format!(
                "Tool call `{}` has no ID, so its result can't be matched to it. Make sure the chat model returns \
                 tool call IDs.",
                call.name
            )));
        };
        let description = self.describe(call, config, &request.state, &request.runtime);
        let value = json!({"type": "tool_approval", "tool_call_id": id, "name": call.name, "args": call.args,
            "description": description});
        let answer_value: Value = request.runtime.interrupt(value)?;
        let decision: Decision = serde_json::from_value(answer_value).map_err(|e| {
            Error::InvalidInput(format!("the answer to tool call {id} is not a decision: {e}"))
        })?;
        check_allowed(&decision, call, config)?;
        Ok(match decision {
            Decision::Approve => Ok(None),
            Decision::Edit { edited_action } if edited_action.name != call.name => {
                return Err(Error::InvalidInput(format!(
                    "an edit of tool call {id} must keep the tool '{}', not '{}'",
                    call.name, edited_action.name
                )));
            }
            Decision::Edit { edited_action } => Ok(Some(edited_action)),
            other => Err(answer(call, &other)),
        })
    }

    /// The reviewer's replacement of the call in batched mode, from the state.
    fn batched_edit(&self, request: &ToolCallRequest<C>) -> Option<Action> {
        let id = request.tool_call.id.as_ref().filter(|id| !id.is_empty())?;
        let edited = request.state.get(EDITED)?.get(id)?;
        serde_json::from_value(edited.clone()).ok()
    }

    /// The note put before the result of a replaced call.
    fn notice(&self, executed: &Action, has_content: bool) -> Option<String> {
        let base = self.edit_notice.as_ref()?;
        let args = py_json(&executed.args);
        let notice = format!("{base} Executed instead: {} with arguments {args}.", executed.name);
        Some(if has_content { format!("{notice}\n\nTool response:") } else { notice })
    }

    fn annotate(
        &self,
        output: ToolCallOutput,
        executed: Option<&Action>,
        id: Option<&str>,
    ) -> ToolCallOutput {
        let Some(executed) = executed else { return output };
        match output {
            ToolCallOutput::Message(m) if Some(m.tool_call_id.as_str()) == id || id.is_none() => {
                ToolCallOutput::Message(self.prepend(m, executed))
            }
            other => other,
        }
    }

    fn prepend(&self, mut message: ToolMessage, executed: &Action) -> ToolMessage {
        let text = message.content.text();
        let Some(notice) = self.notice(executed, !text.is_empty()) else { return message };
        if text.contains(&notice) {
            return message;
        }
        message.content = match message.content {
            Content::Text(t) if t.is_empty() => Content::Text(notice),
            Content::Text(t) => Content::Text(format!("{notice}\n{t}")),
            Content::Blocks(mut blocks) => {
                let notice = if blocks.iter().all(Value::is_string) && !blocks.is_empty() {
                    Value::String(notice)
                } else {
                    json!({"type": "text", "text": notice})
                };
                blocks.insert(0, notice);
                Content::Blocks(blocks)
            }
        };
        message
    }
}

fn check_allowed<C>(decision: &Decision, call: &ToolCall, config: &InterruptOn<C>) -> Result<()> {
    if config.allowed.contains(&decision.kind()) {
        return Ok(());
    }
    let shown = serde_json::to_value(decision).map(|v| py_repr(&v)).unwrap_or_default();
    let allowed: Vec<Value> = config.allowed.iter().filter_map(|d| serde_json::to_value(d).ok()).collect();
    Err(Error::InvalidInput(format!(
        "Unexpected human decision: {shown}. Decision type '{}' is not allowed for tool '{}'. Expected one of {} \
         based on the tool's configuration.",
        serde_json::to_value(decision.kind())
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        call.name,
        py_repr(&Value::Array(allowed))
    )))
}

/// The message the model gets in place of a rejected or answered call.
fn answer(call: &ToolCall, decision: &Decision) -> ToolMessage {
    let id = call.id.clone().unwrap_or_default();
    let (content, status) = match decision {
        Decision::Respond { message } => (message.clone(), ToolStatus::Success),
        Decision::Reject { message: Some(reason) } if !reason.is_empty() => (
            format!("User rejected the tool call for `{}` with reason: {reason}", call.name),
            ToolStatus::Error,
        ),
        _ => (
            format!(
                "User rejected the tool call for `{}` with id {id}. The tool was not executed. Do not retry this tool \
                 call unless the user explicitly requests it.",
                call.name
            ),
            ToolStatus::Error,
        ),
    };
    let mut additional_kwargs = Map::new();
    additional_kwargs.insert("lc_source".to_owned(), json!("hitl_interrupt_decision"));
    additional_kwargs.insert("lc_data".to_owned(), json!({"decision": decision.kind()}));
    ToolMessage {
        content: content.into(),
        tool_call_id: id,
        name: Some(call.name.clone()),
        status,
        additional_kwargs,
        ..ToolMessage::default()
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for HumanInTheLoop<C> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("HumanInTheLoopMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().after_model().wrap_tool_call()
    }

    fn state_channels(&self) -> Vec<StateChannel> {
        vec![StateChannel::private(EDITED, JsonChannel::LastValue)]
    }

    async fn after_model(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        match self.mode {
            InterruptMode::PerCall => Ok(None),
            InterruptMode::Batched => self.review_batch(state, runtime),
        }
    }

    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest<C>,
        next: ToolHandler<'_, C>,
    ) -> Result<ToolCallOutput> {
        let executed = match self.mode {
            InterruptMode::PerCall => match self.review_call(&request)? {
                Err(answer) => return Ok(ToolCallOutput::Message(answer)),
                Ok(executed) => executed,
            },
            InterruptMode::Batched => self.batched_edit(&request),
        };
        let id = request.tool_call.id.clone();
        let request = match &executed {
            Some(action) => redirect(request, action)?,
            None => request,
        };
        let output = next.call(request).await?;
        Ok(self.annotate(output, executed.as_ref(), id.as_deref()))
    }
}

/// The request pointed at the reviewer's call: another tool must be one the agent has.
fn redirect<C>(mut request: ToolCallRequest<C>, action: &Action) -> Result<ToolCallRequest<C>> {
    if action.name != request.tool_call.name {
        let available = Arc::clone(&request.tools);
        let Some(tool) = available.iter().find(|t| Tool::name(t.as_ref()) == action.name).cloned() else {
            let mut names: Vec<&str> = available.iter().map(|t| Tool::name(t.as_ref())).collect();
            names.sort_unstable();
            return Err(Error::InvalidInput(format!(
                "Reviewer edited tool call '{}' to '{}', which is not an available tool. Available tools: {}.",
                request.tool_call.id.as_deref().unwrap_or_default(),
                action.name,
                names.join(", ")
            )));
        };
        request.tool = Some(tool);
    }
    request.tool_call.name = action.name.clone();
    request.tool_call.args = action.args.clone();
    Ok(request)
}
