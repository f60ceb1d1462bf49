//! The executor's loop as a state machine without I/O: [`AgentLoop`] holds the rules, [`AgentRun`] the
//! serializable progress of one run.
//!
//! A driver asks the run what it waits for ([`AgentRun::next`]), does that (calls the agent, runs a tool),
//! and feeds the result back ([`AgentLoop::on_agent_output`], [`AgentLoop::on_tool_output`]), until the
//! run is [`Next::Finish`]ed. [`AgentExecutor`](super::AgentExecutor) is such a driver; a graph node can
//! be another, keeping the run in its state so that checkpoints hold it.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use weft_runnable_core::{OutputParserError, SharedTool, Tool};

use super::action::{AgentAction, AgentDecision, AgentFinish, AgentStep};
use super::error::TextReactError;
use super::parser::parse_react_output;
use super::prompt::format_log_to_str;

/// The output when the executor stops the agent ([`EarlyStopping::Force`]).
pub const STOPPED_OUTPUT: &str = "Agent stopped due to iteration limit or time limit.";

/// The name of the pseudo-tool whose step records a handled parsing error.
pub const EXCEPTION_TOOL_NAME: &str = "_Exception";

/// The name of the pseudo-tool whose step records a call to a tool the executor does not have.
pub const INVALID_TOOL_NAME: &str = "invalid_tool";

/// The observation of a handled parsing error that carries no observation of its own.
pub const INVALID_RESPONSE_OBSERVATION: &str = "Invalid or incomplete response";

/// What [`EarlyStopping::Generate`] appends to the scratchpad for its last call.
pub const GENERATE_FINAL_SUFFIX: &str =
    "\n\nI now need to return a final answer based on the previous steps:";

/// The default of [`AgentLoop::max_iterations`].
pub const DEFAULT_MAX_ITERATIONS: u32 = 15;

/// The observation sent back when the model names a tool the executor lacks:
/// `<name> is not a valid tool, try one of [a, b].`
pub fn invalid_tool_observation(requested: &str, available: &[String]) -> String {
    format!("{requested} is not a valid tool, try one of [{}].", available.join(", "))
}

type ParsingErrorHandler = dyn Fn(&OutputParserError) -> String + Send + Sync;
type StepsTrimmer = dyn Fn(&[AgentStep]) -> Vec<AgentStep> + Send + Sync;

/// What the executor does when the agent's output cannot be parsed (LangChain's `handle_parsing_errors`).
///
/// Every policy but `Raise` records a step of the pseudo-tool `_Exception` whose observation goes back
/// to the model, and the loop goes on.
#[derive(Clone, Default)]
pub enum ParsingErrorPolicy {
    /// Fail the run with [`TextReactError::OutputParsing`] (the default).
    #[default]
    Raise,
    /// Send the parser's observation back to the model when the parser marked the error so (the step's
    /// log is then the model output), else `Invalid or incomplete response` (the step's log is then the
    /// error message).
    SendToModel,
    /// Send this text back to the model.
    Text(String),
    /// Send the text this function makes of the error back to the model.
    Handler(Arc<ParsingErrorHandler>),
}

impl ParsingErrorPolicy {
    /// A policy that makes the observation with `f`.
    pub fn handler(f: impl Fn(&OutputParserError) -> String + Send + Sync + 'static) -> Self {
        Self::Handler(Arc::new(f))
    }

    /// The observation and the step's log for `err`, or `None` when the error must be raised.
    fn handle(&self, err: &OutputParserError) -> Option<(String, String)> {
        let message = err.to_string();
        match self {
            Self::Raise => None,
            Self::SendToModel if err.send_to_llm => Some((
                err.observation.clone().unwrap_or_default(),
                err.llm_output.clone().unwrap_or_default(),
            )),
            Self::SendToModel => Some((INVALID_RESPONSE_OBSERVATION.to_owned(), message)),
            Self::Text(text) => Some((text.clone(), message)),
            Self::Handler(f) => Some((f(err), message)),
        }
    }
}

impl fmt::Debug for ParsingErrorPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Raise => f.write_str("Raise"),
            Self::SendToModel => f.write_str("SendToModel"),
            Self::Text(text) => f.debug_tuple("Text").field(text).finish(),
            Self::Handler(_) => f.write_str("Handler(..)"),
        }
    }
}

/// Which of the steps taken so far the agent sees (LangChain's `trim_intermediate_steps`); the steps
/// returned to the caller are never trimmed.
#[derive(Clone, Default)]
pub enum TrimSteps {
    /// Every step (the default).
    #[default]
    All,
    /// The last `n` steps; `Last(0)` keeps every step, as LangChain's `trim_intermediate_steps=0` does.
    Last(usize),
    /// The steps this function returns.
    Handler(Arc<StepsTrimmer>),
}

impl TrimSteps {
    /// A trimmer that keeps what `f` returns.
    pub fn handler(f: impl Fn(&[AgentStep]) -> Vec<AgentStep> + Send + Sync + 'static) -> Self {
        Self::Handler(Arc::new(f))
    }

    fn apply(&self, steps: &[AgentStep]) -> Vec<AgentStep> {
        match self {
            Self::All | Self::Last(0) => steps.to_vec(),
            Self::Last(n) => steps[steps.len().saturating_sub(*n)..].to_vec(),
            Self::Handler(f) => f(steps),
        }
    }
}

impl fmt::Debug for TrimSteps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("All"),
            Self::Last(n) => f.debug_tuple("Last").field(n).finish(),
            Self::Handler(_) => f.write_str("Handler(..)"),
        }
    }
}

/// What the executor answers when the iteration or time limit stops the agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EarlyStopping {
    /// [`STOPPED_OUTPUT`] (the default).
    #[default]
    Force,
    /// One last agent call, whose scratchpad ends with [`GENERATE_FINAL_SUFFIX`]: a final answer is the
    /// output; an action, or an output that does not parse, gives the model's whole text as the output.
    /// (LangChain's classic `Agent` does this; its runnable agents reject `generate`.)
    Generate,
}

/// A tool run the driver must perform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolRun {
    /// One of the executor's tools: run it on the action's input and feed back what it returns.
    Tool(AgentAction),
    /// The model named a tool the executor lacks: feed back `observation` (a driver may trace it as a
    /// run of the pseudo-tool `invalid_tool`).
    InvalidTool {
        /// The model's action.
        action: AgentAction,
        /// `<name> is not a valid tool, try one of [a, b].`
        observation: String,
    },
    /// The agent's output did not parse and the error is handled: feed back `observation` (a driver may
    /// trace it as a run of the pseudo-tool `_Exception`).
    ParsingError {
        /// The `_Exception` action whose input is the observation.
        action: AgentAction,
        /// The text sent back to the model.
        observation: String,
    },
}

impl ToolRun {
    /// The action this run answers.
    pub fn action(&self) -> &AgentAction {
        match self {
            Self::Tool(action) | Self::InvalidTool { action, .. } | Self::ParsingError { action, .. } => {
                action
            }
        }
    }
}

/// What a run waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Next {
    /// Call the agent on [`AgentLoop::agent_input`] and feed back its decision.
    CallAgent,
    /// Call the agent one last time (early stopping by [`EarlyStopping::Generate`]) on
    /// [`AgentLoop::agent_input`].
    CallAgentFinal,
    /// Perform this tool run and feed back its observation.
    CallTool(ToolRun),
    /// The run is over.
    Finish(AgentFinish),
}

impl Next {
    fn describe(&self) -> &'static str {
        match self {
            Self::CallAgent | Self::CallAgentFinal => "the agent's output",
            Self::CallTool(_) => "a tool output",
            Self::Finish(_) => "nothing (it is finished)",
        }
    }
}

/// The progress of one executor run: the user's input, the steps taken, the counters, and what comes
/// next. It is plain data (serde), so it can live in a graph's state and in its checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRun {
    inputs: Map<String, Value>,
    intermediate_steps: Vec<AgentStep>,
    iterations: u32,
    elapsed: Duration,
    next: Next,
}

impl AgentRun {
    /// The user's input variables.
    pub fn inputs(&self) -> &Map<String, Value> {
        &self.inputs
    }

    /// Every step taken so far.
    pub fn intermediate_steps(&self) -> &[AgentStep] {
        &self.intermediate_steps
    }

    /// How many loop iterations are done (a step recorded and not returned directly).
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The time spent so far, as reported with [`add_elapsed`](Self::add_elapsed).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Adds time spent in the agent or a tool; [`AgentLoop`] compares the total with its time limit.
    pub fn add_elapsed(&mut self, spent: Duration) {
        self.elapsed = self.elapsed.saturating_add(spent);
    }

    /// What the run waits for.
    pub fn next(&self) -> &Next {
        &self.next
    }

    /// The finish, once the run is over.
    pub fn finish(&self) -> Option<&AgentFinish> {
        match &self.next {
            Next::Finish(finish) => Some(finish),
            _ => None,
        }
    }

    fn unexpected(&self, received: &'static str) -> TextReactError {
        TextReactError::UnexpectedEvent { waiting_for: self.next.describe(), received }
    }
}

/// The rules of the executor's loop (LangChain's `AgentExecutor._call`), without I/O: limits, early
/// stopping, parsing-error handling, trimming, direct-return tools.
///
/// One iteration: the agent decides; a final answer ends the run; an action runs its tool and records
/// the step; a tool marked `return_direct` ends the run with its observation as the output; otherwise the
/// iteration count goes up and, while it is below `max_iterations` and the elapsed time below
/// `max_execution_time`, the agent decides again. When a limit is reached the run ends as
/// [`EarlyStopping`] says.
#[derive(Debug, Clone)]
pub struct AgentLoop {
    tool_names: Vec<String>,
    return_direct: HashSet<String>,
    max_iterations: Option<u32>,
    max_execution_time: Option<Duration>,
    early_stopping: EarlyStopping,
    handle_parsing_errors: ParsingErrorPolicy,
    trim_intermediate_steps: TrimSteps,
    return_intermediate_steps: bool,
}

impl AgentLoop {
    /// The rules for these tools, with LangChain's defaults: at most 15 iterations, no time limit,
    /// forced early stopping, parsing errors raised, no trimming, no intermediate steps in the output.
    pub fn new(tools: &[SharedTool]) -> Self {
        Self {
            tool_names: tools.iter().map(|t| Tool::name(&**t).to_owned()).collect(),
            return_direct: tools
                .iter()
                .filter(|t| t.return_direct())
                .map(|t| Tool::name(&**t).to_owned())
                .collect(),
            max_iterations: Some(DEFAULT_MAX_ITERATIONS),
            max_execution_time: None,
            early_stopping: EarlyStopping::Force,
            handle_parsing_errors: ParsingErrorPolicy::Raise,
            trim_intermediate_steps: TrimSteps::All,
            return_intermediate_steps: false,
        }
    }

    /// Sets the most iterations (`None`: no limit, which may loop forever).
    pub fn with_max_iterations(mut self, max: Option<u32>) -> Self {
        self.max_iterations = max;
        self
    }

    /// Sets the most time spent in the agent and tools (`None`: no limit).
    pub fn with_max_execution_time(mut self, max: Option<Duration>) -> Self {
        self.max_execution_time = max;
        self
    }

    /// Sets what happens when a limit stops the agent.
    pub fn with_early_stopping(mut self, method: EarlyStopping) -> Self {
        self.early_stopping = method;
        self
    }

    /// Sets how parsing errors are handled.
    pub fn with_handle_parsing_errors(mut self, policy: ParsingErrorPolicy) -> Self {
        self.handle_parsing_errors = policy;
        self
    }

    /// Sets which steps the agent sees.
    pub fn with_trim_intermediate_steps(mut self, trim: TrimSteps) -> Self {
        self.trim_intermediate_steps = trim;
        self
    }

    /// Sets whether the output carries `intermediate_steps`.
    pub fn with_return_intermediate_steps(mut self, yes: bool) -> Self {
        self.return_intermediate_steps = yes;
        self
    }

    /// The names of the executor's tools, in order.
    pub fn tool_names(&self) -> &[String] {
        &self.tool_names
    }

    /// The iteration limit.
    pub fn max_iterations(&self) -> Option<u32> {
        self.max_iterations
    }

    /// The time limit.
    pub fn max_execution_time(&self) -> Option<Duration> {
        self.max_execution_time
    }

    /// The early stopping method.
    pub fn early_stopping(&self) -> EarlyStopping {
        self.early_stopping
    }

    /// Starts a run on the user's input variables. A limit of zero iterations or zero time stops it at
    /// once, before any agent call.
    pub fn start(&self, inputs: Map<String, Value>) -> AgentRun {
        let mut run = AgentRun {
            inputs,
            intermediate_steps: Vec::new(),
            iterations: 0,
            elapsed: Duration::ZERO,
            next: Next::CallAgent,
        };
        run.next = self.continue_or_stop(&run);
        run
    }

    /// The agent's input for the pending call: the user's variables, `intermediate_steps` (as the agent
    /// should see them: trimmed), and for the final call of [`EarlyStopping::Generate`] an
    /// `agent_scratchpad` of every step ending with [`GENERATE_FINAL_SUFFIX`].
    pub fn agent_input(&self, run: &AgentRun) -> Result<Value, TextReactError> {
        let (steps, scratchpad) = match run.next {
            Next::CallAgent => (self.trim_intermediate_steps.apply(&run.intermediate_steps), None),
            Next::CallAgentFinal => {
                let mut scratchpad = format_log_to_str(&run.intermediate_steps);
                scratchpad.push_str(GENERATE_FINAL_SUFFIX);
                (run.intermediate_steps.clone(), Some(scratchpad))
            }
            _ => return Err(run.unexpected("a request for the agent's input")),
        };
        let mut input = run.inputs.clone();
        input.insert("intermediate_steps".to_owned(), json!(steps));
        if let Some(scratchpad) = scratchpad {
            input.insert("agent_scratchpad".to_owned(), Value::String(scratchpad));
        }
        Ok(Value::Object(input))
    }

    /// Feeds back the agent's decision, or its parsing error.
    ///
    /// A final answer finishes the run. An action waits for its tool ([`ToolRun::Tool`]), or, when the
    /// tool is unknown, for the unknown-tool observation to be fed back ([`ToolRun::InvalidTool`]). A
    /// parsing error is raised as [`TextReactError::OutputParsing`] or, when handled, waits for its
    /// observation to be fed back ([`ToolRun::ParsingError`]).
    pub fn on_agent_output(
        &self,
        run: &mut AgentRun,
        output: Result<AgentDecision, OutputParserError>,
    ) -> Result<(), TextReactError> {
        match run.next {
            Next::CallAgent => {}
            Next::CallAgentFinal => {
                run.next = Next::Finish(final_generation(output)?);
                return Ok(());
            }
            _ => return Err(run.unexpected("the agent's output")),
        }
        run.next = match output {
            Ok(AgentDecision::Finish(finish)) => Next::Finish(finish),
            Ok(AgentDecision::Action(action)) if self.tool_names.contains(&action.tool) => {
                Next::CallTool(ToolRun::Tool(action))
            }
            Ok(AgentDecision::Action(action)) => {
                let observation = invalid_tool_observation(&action.tool, &self.tool_names);
                Next::CallTool(ToolRun::InvalidTool { action, observation })
            }
            Err(err) => {
                let Some((observation, log)) = self.handle_parsing_errors.handle(&err) else {
                    return Err(TextReactError::OutputParsing(err));
                };
                let action = AgentAction::new(EXCEPTION_TOOL_NAME, observation.clone(), log);
                Next::CallTool(ToolRun::ParsingError { action, observation })
            }
        };
        Ok(())
    }

    /// Feeds back the model's text for the pending agent call, parsed by the ReAct rules
    /// ([`parse_react_output`]): the sans-I/O step of a text ReAct loop whose driver calls the model
    /// itself.
    pub fn on_model_output(&self, run: &mut AgentRun, text: &str) -> Result<(), TextReactError> {
        self.on_agent_output(run, parse_react_output(text))
    }

    /// Feeds back the observation of the pending tool run: records the step, then finishes when the
    /// tool returns directly, else counts the iteration and calls the agent again or stops at a limit.
    pub fn on_tool_output(
        &self,
        run: &mut AgentRun,
        observation: impl Into<String>,
    ) -> Result<(), TextReactError> {
        let Next::CallTool(tool_run) = &run.next else {
            return Err(run.unexpected("a tool output"));
        };
        let direct = matches!(tool_run, ToolRun::Tool(action) if self.return_direct.contains(&action.tool));
        let step = AgentStep::new(tool_run.action().clone(), observation);
        let observation = step.observation.clone();
        run.intermediate_steps.push(step);
        if direct {
            run.next = Next::Finish(AgentFinish::new(observation, ""));
            return Ok(());
        }
        run.iterations += 1;
        run.next = self.continue_or_stop(run);
        Ok(())
    }

    /// The time limit ran out while the agent or a tool was running: the pending call is dropped and the
    /// run stops as [`EarlyStopping`] says. A run that is finished, or already in its final call, is left
    /// as it is.
    pub fn on_time_limit(&self, run: &mut AgentRun) {
        if matches!(run.next, Next::CallAgent | Next::CallTool(_)) {
            if let Some(limit) = self.max_execution_time {
                run.elapsed = run.elapsed.max(limit);
            }
            run.next = self.stopped(run);
        }
    }

    /// The executor's output for a finished run: the user's input variables, the finish's return values
    /// (`output`), and `intermediate_steps` when asked for; `None` while the run is not finished.
    pub fn output(&self, run: &AgentRun) -> Option<Value> {
        let finish = run.finish()?;
        let mut output = run.inputs.clone();
        for (key, value) in &finish.return_values {
            output.insert(key.clone(), value.clone());
        }
        if self.return_intermediate_steps {
            output.insert("intermediate_steps".to_owned(), json!(run.intermediate_steps));
        }
        Some(Value::Object(output))
    }

    /// The remaining time before the limit, when there is one.
    pub fn remaining_time(&self, run: &AgentRun) -> Option<Duration> {
        self.max_execution_time.map(|limit| limit.saturating_sub(run.elapsed))
    }

    fn should_continue(&self, run: &AgentRun) -> bool {
        self.max_iterations.is_none_or(|max| run.iterations < max)
            && self.max_execution_time.is_none_or(|max| run.elapsed < max)
    }

    fn continue_or_stop(&self, run: &AgentRun) -> Next {
        if self.should_continue(run) { Next::CallAgent } else { self.stopped(run) }
    }

    fn stopped(&self, _run: &AgentRun) -> Next {
        match self.early_stopping {
            EarlyStopping::Force => Next::Finish(AgentFinish::new(STOPPED_OUTPUT, "")),
            EarlyStopping::Generate => Next::CallAgentFinal,
        }
    }
}

/// The finish of the last call of [`EarlyStopping::Generate`].
fn final_generation(output: Result<AgentDecision, OutputParserError>) -> Result<AgentFinish, TextReactError> {
    match output {
        Ok(AgentDecision::Finish(finish)) => Ok(finish),
        Ok(AgentDecision::Action(action)) => Ok(AgentFinish::new(action.log.clone(), action.log)),
        Err(err) => match err.llm_output.clone() {
            Some(text) => Ok(AgentFinish::new(text.clone(), text)),
            None => Err(TextReactError::OutputParsing(err)),
        },
    }
}
