//! `AgentExecutor`: drives an [`AgentLoop`] with an agent runnable and tools.

use std::borrow::Cow;
use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::{Map, Value, json};
use weft_runnable_core::events::event_input;
use weft_runnable_core::{
    BoxRunnable, Error, Merge, OutputParserError, Result, RunKind, Runnable, RunnableConfig, RunnableExt,
    SharedTool, Tool, ToolCall, trace_invoke, trace_stream,
};

use super::action::{AgentAction, AgentDecision};
use super::error::TextReactError;
use super::state::{
    AgentLoop, AgentRun, EXCEPTION_TOOL_NAME, EarlyStopping, INVALID_TOOL_NAME, Next, ParsingErrorPolicy,
    ToolRun, TrimSteps,
};

const NAME: &str = "AgentExecutor";

/// Runs an agent in a loop: the agent decides, the executor runs the tool it picked and shows it the
/// observation, until it answers or a limit stops it (LangChain's classic `AgentExecutor`).
///
/// The agent is any `Runnable<Value, AgentDecision>`, usually
/// [`create_text_react_agent`](super::create_text_react_agent). The rules of the loop are an
/// [`AgentLoop`] (its setters are mirrored here); the executor only performs what an [`AgentRun`] waits
/// for, in [`advance`](Self::advance). It is a `Runnable<Value, Value>`: the input is a JSON object of
/// prompt variables (a bare string is taken as `input`), the output is that object plus `output` (and
/// `intermediate_steps` when asked for); `stream` reports actions, steps and the output as they come. Its
/// run is traced as a chain named `AgentExecutor`, with the
/// agent's runs and one tool run per step (the pseudo-tools `_Exception` and `invalid_tool` included)
/// as children.
///
/// A tool receives the action's input as its arguments: a JSON object as it is; a string as the value
/// of the first argument of the tool's schema (read as JSON first when that argument is not a string and
/// the text is valid JSON), or, when the schema has several arguments and the string is a JSON object,
/// as that object. A tool error propagates, unless the tool's own error policy turns it into text.
#[derive(Clone)]
pub struct AgentExecutor {
    agent: BoxRunnable<Value, AgentDecision>,
    tools: Vec<SharedTool>,
    rules: AgentLoop,
}

impl std::fmt::Debug for AgentExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentExecutor")
            .field("agent", &self.agent)
            .field("tools", &self.rules.tool_names())
            .field("rules", &self.rules)
            .finish()
    }
}

impl AgentExecutor {
    /// An executor of `agent` with `tools`, with the default rules of [`AgentLoop::new`]. Two tools of the
    /// same name are [`TextReactError::DuplicateTool`].
    pub fn new(
        agent: impl Runnable<Value, AgentDecision> + 'static,
        tools: Vec<SharedTool>,
    ) -> std::result::Result<Self, TextReactError> {
        let mut seen = HashSet::new();
        if let Some(dup) = tools.iter().find(|t| !seen.insert(Tool::name(&***t).to_owned())) {
            return Err(TextReactError::DuplicateTool(Tool::name(&**dup).to_owned()));
        }
        let rules = AgentLoop::new(&tools);
        Ok(Self { agent: agent.boxed(), tools, rules })
    }

    /// The rules of the loop.
    pub fn rules(&self) -> &AgentLoop {
        &self.rules
    }

    /// Replaces the rules of the loop (keep them made from the same tools).
    pub fn with_rules(mut self, rules: AgentLoop) -> Self {
        self.rules = rules;
        self
    }

    /// The tools.
    pub fn tools(&self) -> &[SharedTool] {
        &self.tools
    }

    /// The tool named `name`.
    pub fn lookup_tool(&self, name: &str) -> Option<&SharedTool> {
        self.tools.iter().find(|t| Tool::name(&***t) == name)
    }

    /// Sets the most iterations (default 15; `None`: no limit).
    pub fn with_max_iterations(self, max: Option<u32>) -> Self {
        let rules = self.rules.clone().with_max_iterations(max);
        self.with_rules(rules)
    }

    /// Sets the most time spent in the agent and tools (default: no limit). A call still running when
    /// the time is up is abandoned.
    pub fn with_max_execution_time(self, max: Option<Duration>) -> Self {
        let rules = self.rules.clone().with_max_execution_time(max);
        self.with_rules(rules)
    }

    /// Sets what happens when a limit stops the agent (default [`EarlyStopping::Force`]).
    pub fn with_early_stopping(self, method: EarlyStopping) -> Self {
        let rules = self.rules.clone().with_early_stopping(method);
        self.with_rules(rules)
    }

    /// Sets how parsing errors are handled (default [`ParsingErrorPolicy::Raise`]).
    pub fn with_handle_parsing_errors(self, policy: ParsingErrorPolicy) -> Self {
        let rules = self.rules.clone().with_handle_parsing_errors(policy);
        self.with_rules(rules)
    }

    /// Sets which steps the agent sees (default: all).
    pub fn with_trim_intermediate_steps(self, trim: TrimSteps) -> Self {
        let rules = self.rules.clone().with_trim_intermediate_steps(trim);
        self.with_rules(rules)
    }

    /// Sets whether the output carries `intermediate_steps` (default: no).
    pub fn with_return_intermediate_steps(self, yes: bool) -> Self {
        let rules = self.rules.clone().with_return_intermediate_steps(yes);
        self.with_rules(rules)
    }

    /// Starts a run on `input`: a JSON object of prompt variables, or a string taken as `input`.
    pub fn start(&self, input: Value) -> std::result::Result<AgentRun, TextReactError> {
        let inputs = match input {
            Value::Object(map) => map,
            Value::String(text) => {
                let mut map = Map::new();
                map.insert("input".to_owned(), Value::String(text));
                map
            }
            other => return Err(TextReactError::InvalidInput(other.to_string())),
        };
        Ok(self.rules.start(inputs))
    }

    /// Performs what `run` waits for (one agent call or one tool run) under `config`, and feeds the
    /// result back. A finished run is left as it is. With a time limit, a call still running when the
    /// time is up is abandoned and the run stops; the time spent is added to the run.
    pub async fn advance(&self, run: &mut AgentRun, config: &RunnableConfig) -> Result<()> {
        match run.next().clone() {
            Next::Finish(_) => Ok(()),
            Next::CallAgent => {
                let input = self.rules.agent_input(run)?;
                match self.timed(run, self.agent.invoke(input, config)).await {
                    None => Ok(()),
                    Some(output) => {
                        let output = split_parse_error(output)?;
                        Ok(self.rules.on_agent_output(run, output)?)
                    }
                }
            }
            Next::CallAgentFinal => {
                // The last call is not bound by the time limit that led to it.
                let input = self.rules.agent_input(run)?;
                let started = tokio::time::Instant::now();
                let output = self.agent.invoke(input, config).await;
                run.add_elapsed(started.elapsed());
                Ok(self.rules.on_agent_output(run, split_parse_error(output)?)?)
            }
            Next::CallTool(tool_run) => {
                let observation = match tool_run {
                    ToolRun::Tool(action) => match self.timed(run, self.call_tool(&action, config)).await {
                        None => return Ok(()),
                        Some(observation) => observation?,
                    },
                    ToolRun::InvalidTool { action, observation } => {
                        let input = json!({
                            "requested_tool_name": action.tool,
                            "available_tool_names": self.rules.tool_names(),
                        });
                        trace_builtin(INVALID_TOOL_NAME, input, observation, config).await?
                    }
                    ToolRun::ParsingError { observation, .. } => {
                        trace_builtin(EXCEPTION_TOOL_NAME, json!(observation), observation, config).await?
                    }
                };
                Ok(self.rules.on_tool_output(run, observation)?)
            }
        }
    }

    /// Runs on `input` until the run finishes, and returns the finished run (its steps, its finish).
    pub async fn run(&self, input: Value, config: &RunnableConfig) -> Result<AgentRun> {
        let mut run = self.start(input)?;
        while run.finish().is_none() {
            self.advance(&mut run, config).await?;
        }
        Ok(run)
    }

    /// Awaits `call`, adding the time it took to the run; with a time limit, gives up when the time is up
    /// (`None`, and the run stops).
    async fn timed<T>(&self, run: &mut AgentRun, call: impl Future<Output = T>) -> Option<T> {
        let started = tokio::time::Instant::now();
        let result = match self.rules.remaining_time(run) {
            Some(remaining) => tokio::time::timeout(remaining, call).await.ok(),
            None => Some(call.await),
        };
        run.add_elapsed(started.elapsed());
        if result.is_none() {
            self.rules.on_time_limit(run);
        }
        result
    }

    async fn call_tool(&self, action: &AgentAction, config: &RunnableConfig) -> Result<String> {
        let tool = self.lookup_tool(&action.tool).ok_or_else(|| {
            Error::InvalidInput(format!("the agent executor has no tool named '{}'", action.tool))
        })?;
        let args = tool_args(&tool.model_schema(), &action.tool_input);
        let call = ToolCall { name: action.tool.clone(), args, id: None };
        let message = weft_runnable_core::tools::invoke_tool_message(&**tool, call, config).await?;
        Ok(message.content.text())
    }
}

/// Splits a parsing error off an agent call's result: it goes to the loop, any other error up.
fn split_parse_error(
    output: Result<AgentDecision>,
) -> Result<std::result::Result<AgentDecision, OutputParserError>> {
    match output {
        Ok(decision) => Ok(Ok(decision)),
        Err(err) => match err.as_output_parser() {
            Some(parse_error) => Ok(Err(parse_error.clone())),
            None => Err(err),
        },
    }
}

/// Traces a pseudo-tool whose observation is already known, as LangChain runs `_Exception` and
/// `invalid_tool` as tools.
async fn trace_builtin(
    name: &str,
    input: Value,
    observation: String,
    config: &RunnableConfig,
) -> Result<String> {
    trace_invoke(name, RunKind::Tool, input, config, |_, _| async move { Ok(observation) }).await
}

/// The arguments of a tool for an action's input (see [`AgentExecutor`]).
pub(crate) fn tool_args(schema: &Value, input: &Value) -> Value {
    let text = match input {
        Value::Object(_) => return input.clone(),
        Value::String(text) => Some(text.as_str()),
        _ => None,
    };
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return json!({});
    };
    let Some((first, property)) = properties.iter().next() else {
        return json!({});
    };
    let value = match text {
        None => input.clone(),
        Some(text) => {
            let parsed = serde_json::from_str::<Value>(text).ok();
            match parsed {
                Some(object @ Value::Object(_)) if properties.len() > 1 => return object,
                Some(parsed) if !accepts_string(property) => parsed,
                _ => Value::String(text.to_owned()),
            }
        }
    };
    let mut args = Map::new();
    args.insert(first.clone(), value);
    Value::Object(args)
}

/// Whether a property schema accepts a string (or says nothing of its type).
fn accepts_string(property: &Value) -> bool {
    match property.get("type") {
        None => true,
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "string"),
        Some(_) => true,
    }
}

#[async_trait]
impl Runnable<Value, Value> for AgentExecutor {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(NAME)
    }

    async fn invoke(&self, input: Value, config: &RunnableConfig) -> Result<Value> {
        trace_invoke(NAME, RunKind::Chain, input, config, |input, child| async move {
            let run = self.run(input, &child).await?;
            self.rules.output(&run).ok_or_else(|| Error::msg("the agent run ended without finishing"))
        })
        .await
    }

    /// Streams the run as it goes, as LangChain's `AgentExecutor.stream` does: `{"actions": [action]}`
    /// when the agent picks a tool (a known one or not), `{"steps": [step]}` when a step is recorded
    /// (handled parsing errors give a step without an action), and last the output's return values
    /// (`{"output": ...}`, with `intermediate_steps` when asked for). The chunks merge, key by key, into
    /// one object.
    fn stream<'a>(&'a self, input: Value, config: &RunnableConfig) -> BoxStream<'a, Result<Value>> {
        let input_value = event_input(config, &input);
        trace_stream(
            NAME,
            RunKind::Chain,
            input_value,
            config,
            move |child| match self.start(input) {
                Ok(run) => stream::unfold(Some((run, child)), move |state| self.next_chunk(state)).boxed(),
                Err(err) => stream::once(async move { Err(err.into()) }).boxed(),
            },
            Value::merge,
        )
    }

    fn merge_chunks(&self, acc: Value, next: Value) -> Result<Value> {
        acc.merge(next)
    }
}

type StreamState = Option<(AgentRun, RunnableConfig)>;

impl AgentExecutor {
    /// Advances the run until it has something to report: the next chunk of [`Runnable::stream`].
    async fn next_chunk(&self, state: StreamState) -> Option<(Result<Value>, StreamState)> {
        let (mut run, config) = state?;
        loop {
            if let Some(finish) = run.finish() {
                let mut chunk = finish.return_values.clone();
                if let Some(Value::Object(output)) = self.rules.output(&run) {
                    if let Some(steps) = output.get("intermediate_steps") {
                        chunk.insert("intermediate_steps".to_owned(), steps.clone());
                    }
                }
                return Some((Ok(Value::Object(chunk)), None));
            }
            let asked_agent = matches!(run.next(), Next::CallAgent | Next::CallAgentFinal);
            let steps_before = run.intermediate_steps().len();
            if let Err(err) = self.advance(&mut run, &config).await {
                return Some((Err(err), None));
            }
            let chunk = match run.next() {
                Next::CallTool(ToolRun::Tool(action) | ToolRun::InvalidTool { action, .. })
                    if asked_agent =>
                {
                    Some(json!({"actions": [action]}))
                }
                _ if run.intermediate_steps().len() > steps_before => {
                    run.intermediate_steps().last().map(|step| json!({"steps": [step]}))
                }
                _ => None,
            };
            if let Some(chunk) = chunk {
                return Some((Ok(chunk), Some((run, config))));
            }
        }
    }
}
