//! The `model` node of [`create_agent`](crate::create_agent): the request, the `wrap_model_call` chain,
//! the bound model call and the structured response.

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use weft_graph::{NodeOutput, Runtime};
use weft_runnable_core::chat_model::invoke_chat_model;
use weft_runnable_core::py::py_str;
use weft_runnable_core::{
    AiMessage, BoundChatModel, CallOptions, ChatModel, Message, PromptValue, REMOVE_ALL_MESSAGES,
    RemoveMessage, Result, SharedTool, SystemMessage, Tool, ToolChoice, ToolMessage, ToolSpec, ToolStatus,
};

use super::AgentError;
use super::middleware::{Middleware, ModelCall, ModelRequest, ModelResponse, run_model_chain};
use super::runtime::{AgentRuntime, ContextType};
use super::state::{AgentState, AgentUpdate};
use super::structured::{
    ProviderStrategy, ResponseFormat, SchemaSpec, StructuredOutputError, ToolStrategy,
    supports_provider_strategy,
};

/// The strategy a call uses once `Auto` is resolved for its model.
#[derive(Debug, Clone)]
enum Effective {
    Tool(ToolStrategy),
    Provider(ProviderStrategy),
}

/// The model node's fixed parts, shared by its calls.
pub(crate) struct ModelNode<C> {
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) system_message: Option<SystemMessage>,
    /// The agent's tools and the middleware's, as requests start with them.
    pub(crate) tools: Vec<SharedTool>,
    /// The tools the tools node runs (a request naming another is an error unless a middleware wraps
    /// tool calls).
    pub(crate) known: HashSet<String>,
    pub(crate) wraps_tool_calls: bool,
    pub(crate) response_format: Option<ResponseFormat>,
    /// The structured-output tools declared up front (LangChain's `structured_output_tools`).
    pub(crate) output_tools: Vec<SchemaSpec>,
    pub(crate) wrappers: Vec<Arc<dyn Middleware<C>>>,
    pub(crate) name: Option<String>,
    /// The binding of a request nobody changed, made once.
    pub(crate) default_binding: std::sync::OnceLock<Result<Binding>>,
}

/// A model with its call options, and the strategy the call follows.
#[derive(Clone)]
pub(crate) struct Binding {
    model: Arc<BoundChatModel<Arc<dyn ChatModel>>>,
    effective: Option<Effective>,
}

impl<C: ContextType> ModelNode<C> {
    /// Runs the node: the request from the state, the chain, the state updates.
    pub(crate) async fn run(&self, state: &AgentState, runtime: Runtime) -> Result<NodeOutput<AgentState>> {
        let repaired = patch_invalid_tool_calls(state.messages());
        let messages = match &repaired {
            Some(messages) => messages.clone(),
            None => state.messages().to_vec(),
        };
        let request = ModelRequest {
            model: Arc::clone(&self.model),
            messages,
            system_message: self.system_message.clone(),
            tools: self.tools.clone(),
            tool_choice: None,
            response_format: self.response_format.clone(),
            model_settings: serde_json::Map::new(),
            state: state.clone(),
            runtime: AgentRuntime::new(runtime)?,
        };
        let response = run_model_chain(&self.wrappers, self, request).await?;
        let mut main = AgentUpdate::new();
        main = match repaired {
            Some(repaired) => {
                let mut all = Vec::with_capacity(repaired.len() + response.result.len() + 1);
                all.push(Message::Remove(RemoveMessage { id: REMOVE_ALL_MESSAGES.to_owned() }));
                all.extend(repaired);
                all.extend(response.result);
                main.messages(all)
            }
            None => main.messages(response.result),
        };
        match response.structured_response {
            Some(value) => main = main.structured_response(value),
            None if self.response_format.is_some() => main = main.structured_response(Value::Null),
            None => {}
        }
        if response.updates.is_empty() {
            return Ok(NodeOutput::Update(main));
        }
        let mut parts = vec![NodeOutput::Update(main)];
        parts.extend(response.updates.into_iter().map(NodeOutput::Update));
        Ok(NodeOutput::Many(parts))
    }

    /// The model bound for `request`, and the strategy its reply follows.
    fn bind(&self, request: &ModelRequest<C>) -> Result<Binding> {
        if self.is_default(request) {
            return self.default_binding.get_or_init(|| self.bind_fresh(request)).clone();
        }
        self.bind_fresh(request)
    }

    /// Whether `request` binds as the agent's untouched request does.
    fn is_default(&self, request: &ModelRequest<C>) -> bool {
        Arc::ptr_eq(&request.model, &self.model)
            && request.tool_choice.is_none()
            && request.model_settings.is_empty()
            && request.tools.len() == self.tools.len()
            && request.tools.iter().zip(&self.tools).all(|(a, b)| Arc::ptr_eq(a, b))
            && same_format(request.response_format.as_ref(), self.response_format.as_ref())
    }

    fn bind_fresh(&self, request: &ModelRequest<C>) -> Result<Binding> {
        if !self.wraps_tool_calls {
            let unknown: Vec<String> = request
                .tools
                .iter()
                .map(|t| Tool::name(t.as_ref()).to_owned())
                .filter(|n| !self.known.contains(n))
                .collect();
            if !unknown.is_empty() {
                let mut available: Vec<String> = self.known.iter().cloned().collect();
                available.sort();
                return Err(AgentError::UnknownTools { unknown, available }.into());
            }
        }
        let effective = match &request.response_format {
            None => None,
            Some(ResponseFormat::Tool(s)) => Some(Effective::Tool(s.clone())),
            Some(ResponseFormat::Provider(p)) => Some(Effective::Provider(p.clone())),
            Some(ResponseFormat::Auto(spec)) if supports_provider_strategy(request.model.model_name()) => {
                Some(Effective::Provider(ProviderStrategy::new(spec.clone())))
            }
            Some(ResponseFormat::Auto(spec)) => Some(Effective::Tool(ToolStrategy::new(spec.clone()))),
        };
        let mut specs: Vec<ToolSpec> = request.tools.iter().map(ToolSpec::from).collect();
        let mut options = CallOptions { extra: request.model_settings.clone(), ..CallOptions::default() };
        match &effective {
            Some(Effective::Provider(p)) => {
                options.response_format = p.call_options().response_format;
            }
            Some(Effective::Tool(strategy)) => {
                for spec in &strategy.specs {
                    if !self.output_tools.iter().any(|d| d.name() == spec.name()) {
                        return Err(AgentError::UndeclaredOutputTool(spec.name().to_owned()).into());
                    }
                }
                specs.extend(strategy.specs.iter().map(SchemaSpec::tool_spec));
                options.tool_choice = if self.output_tools.is_empty() {
                    request.tool_choice.clone()
                } else {
                    Some(ToolChoice::Required)
                };
            }
            None => options.tool_choice = request.tool_choice.clone(),
        }
        options.tools = specs;
        Ok(Binding { model: Arc::new(BoundChatModel::new(Arc::clone(&request.model), options)), effective })
    }

    /// The reply as messages and a structured response (LangChain's `_handle_model_output`).
    fn handle_output(&self, output: AiMessage, effective: Option<&Effective>) -> Result<ModelResponse> {
        match effective {
            Some(Effective::Provider(p)) if output.tool_calls.is_empty() => {
                let value = p.parse(&output)?;
                Ok(ModelResponse {
                    result: vec![Message::Ai(output)],
                    structured_response: Some(value),
                    ..Default::default()
                })
            }
            Some(Effective::Tool(strategy)) => self.tool_strategy_output(output, strategy),
            _ => Ok(ModelResponse::message(output)),
        }
    }

    fn tool_strategy_output(&self, output: AiMessage, strategy: &ToolStrategy) -> Result<ModelResponse> {
        let calls: Vec<_> = output
            .tool_calls
            .iter()
            .filter(|c| self.output_tools.iter().any(|s| s.name() == c.name))
            .cloned()
            .collect();
        let answer = |call: &weft_runnable_core::ToolCall, content: String| {
            Message::Tool(ToolMessage {
                content: content.into(),
                tool_call_id: call.id.clone().unwrap_or_default(),
                name: Some(call.name.clone()),
                status: ToolStatus::Success,
                ..ToolMessage::default()
            })
        };
        if calls.len() > 1 {
            let error =
                StructuredOutputError::Multiple { tools: calls.iter().map(|c| c.name.clone()).collect() };
            let Some(text) = strategy.handle_errors.message(&error) else { return Err(error.into()) };
            let mut result = vec![Message::Ai(output)];
            result.extend(calls.iter().map(|c| answer(c, text.clone())));
            return Ok(ModelResponse { result, ..Default::default() });
        }
        let Some(call) = calls.into_iter().next() else { return Ok(ModelResponse::message(output)) };
        let parsed = match self.output_tools.iter().find(|s| s.name() == call.name) {
            Some(spec) => spec.parse(call.args.clone()),
            None => Err(format!("no schema is named {}", call.name)),
        };
        match parsed {
            Ok(value) => {
                let content = strategy
                    .tool_message_content
                    .clone()
                    .unwrap_or_else(|| format!("Returning structured response: {}", py_str(&value)));
                let result = vec![Message::Ai(output), answer(&call, content)];
                Ok(ModelResponse { result, structured_response: Some(value), ..Default::default() })
            }
            Err(source) => {
                let error = StructuredOutputError::Validation { tool: call.name.clone(), reason: source };
                let Some(text) = strategy.handle_errors.message(&error) else { return Err(error.into()) };
                Ok(ModelResponse {
                    result: vec![Message::Ai(output), answer(&call, text)],
                    ..Default::default()
                })
            }
        }
    }
}

/// Whether two response formats bind alike (same strategy, same schema names).
fn same_format(a: Option<&ResponseFormat>, b: Option<&ResponseFormat>) -> bool {
    let names = |specs: &[SchemaSpec]| specs.iter().map(|s| s.name().to_owned()).collect::<Vec<_>>();
    match (a, b) {
        (None, None) => true,
        (Some(ResponseFormat::Tool(x)), Some(ResponseFormat::Tool(y))) => names(&x.specs) == names(&y.specs),
        (Some(ResponseFormat::Provider(x)), Some(ResponseFormat::Provider(y))) => {
            x.spec.name() == y.spec.name() && x.spec.schema() == y.spec.schema()
        }
        (Some(ResponseFormat::Auto(x)), Some(ResponseFormat::Auto(y))) => {
            x.name() == y.name() && x.schema() == y.schema()
        }
        _ => false,
    }
}

impl<C: ContextType> ModelCall<C> for ModelNode<C> {
    fn call<'a>(&'a self, request: ModelRequest<C>) -> BoxFuture<'a, Result<ModelResponse>> {
        Box::pin(async move {
            let binding = self.bind(&request)?;
            let ModelRequest { system_message, messages, runtime, .. } = request;
            let input = match system_message {
                Some(system) => {
                    let mut input = Vec::with_capacity(messages.len() + 1);
                    input.push(Message::System(system));
                    input.extend(messages);
                    input
                }
                None => messages,
            };
            let mut output =
                invoke_chat_model(binding.model.as_ref(), PromptValue::Messages(input), runtime.config())
                    .await?;
            if let Some(name) = &self.name {
                output.name = Some(name.clone());
            }
            self.handle_output(output, binding.effective.as_ref())
        })
    }
}

/// The conversation with an error tool message after every invalid tool call nobody answered
/// (LangChain's `_patch_invalid_tool_calls`), or `None` when there is none.
fn patch_invalid_tool_calls(messages: &[Message]) -> Option<Vec<Message>> {
    let has_invalid = messages.iter().filter_map(Message::as_ai).any(|ai| !ai.invalid_tool_calls.is_empty());
    if !has_invalid {
        return None;
    }
    let mut answered: HashSet<String> =
        messages.iter().filter_map(Message::as_tool).map(|t| t.tool_call_id.clone()).collect();
    let mut patched = Vec::with_capacity(messages.len());
    let mut changed = false;
    for message in messages {
        patched.push(message.clone());
        let Some(ai) = message.as_ai() else { continue };
        for call in &ai.invalid_tool_calls {
            let Some(id) = &call.id else { continue };
            if !answered.insert(id.clone()) {
                continue;
            }
            let name = call.name.clone().unwrap_or_else(|| "unknown".to_owned());
            patched.push(Message::Tool(ToolMessage {
                content: format!(
                    "Tool call {name} with id {id} could not be executed - arguments were malformed or truncated."
                )
                .into(),
                tool_call_id: id.clone(),
                name: Some(name),
                status: ToolStatus::Error,
                ..ToolMessage::default()
            }));
            changed = true;
        }
    }
    changed.then_some(patched)
}
