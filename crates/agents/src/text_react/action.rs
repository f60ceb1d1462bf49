//! What a text agent decides (an action or a finish) and the steps it has taken.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The agent wants a tool run: which tool, on what input, and the model text it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentAction {
    /// The tool's name, as the model wrote it.
    pub tool: String,
    /// The tool's input: a string for the ReAct format; a JSON object is passed to the tool as its
    /// arguments.
    pub tool_input: Value,
    /// The model output that produced this action; it goes back into the scratchpad.
    pub log: String,
}

impl AgentAction {
    /// An action with a string input.
    pub fn new(tool: impl Into<String>, tool_input: impl Into<String>, log: impl Into<String>) -> Self {
        Self { tool: tool.into(), tool_input: Value::String(tool_input.into()), log: log.into() }
    }

    /// The input as text: the string itself, or the JSON text of any other value.
    pub fn input_text(&self) -> String {
        match &self.tool_input {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// The agent is done: its return values (`output` for the ReAct agent) and the model text it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentFinish {
    /// The values returned to the caller, usually just `output`.
    pub return_values: Map<String, Value>,
    /// The model output that produced this finish (empty when the executor stopped the agent).
    pub log: String,
}

impl AgentFinish {
    /// A finish whose only return value is `output`.
    pub fn new(output: impl Into<String>, log: impl Into<String>) -> Self {
        let mut return_values = Map::new();
        return_values.insert("output".to_owned(), Value::String(output.into()));
        Self { return_values, log: log.into() }
    }

    /// The `output` return value, when it is a string.
    pub fn output(&self) -> Option<&str> {
        self.return_values.get("output").and_then(Value::as_str)
    }
}

/// One decision of an agent: act, or finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentDecision {
    /// Run a tool.
    Action(AgentAction),
    /// Return to the caller.
    Finish(AgentFinish),
}

/// An action taken and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentStep {
    /// The action.
    pub action: AgentAction,
    /// What the tool returned, or the text sent back to the model in its place.
    pub observation: String,
}

impl AgentStep {
    /// A step from its parts.
    pub fn new(action: AgentAction, observation: impl Into<String>) -> Self {
        Self { action, observation: observation.into() }
    }
}
