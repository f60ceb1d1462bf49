//! `JsonInput`: what a run of an erased graph starts from, in LangGraph's JSON forms.

use serde_json::{Map, Value};

use super::update_from_object;
use crate::compiled::GraphInput;
use crate::error::{GraphError, GraphResult};
use crate::pregel::spec::GraphSpec;
use crate::state::State;
use crate::types::{Command, Goto, Resume, Send};

/// What a run of an [`ErasedGraph`](super::ErasedGraph) starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonInput {
    /// New input: channel writes (keys that are not channels are ignored, as in LangGraph).
    Values(Map<String, Value>),
    /// A command: resume interrupts, update the state, go to nodes.
    Command(JsonCommand),
    /// Continue the thread from its checkpoint (LangGraph's `None` input).
    Resume,
    /// A value that is not an object (a list, a string, a number, a boolean): the whole input of a
    /// root-value graph ([`RootState`](crate::root::RootState)); any other graph rejects it with
    /// LangGraph's "expected dict".
    Bare(Value),
}

impl JsonInput {
    /// LangGraph's input forms: an object of channel writes, `null` to continue the thread, or any other
    /// value, the whole input of a root-value graph (a graph of any other state fails its run with an
    /// error that says what it got, LangGraph's "Expected dict").
    pub fn from_json(value: Value) -> GraphResult<Self> {
        Ok(match value {
            Value::Null => JsonInput::Resume,
            Value::Object(map) => JsonInput::Values(map),
            other => JsonInput::Bare(other),
        })
    }

    /// The typed input of a graph over `S`.
    pub(crate) fn into_graph_input<S: State>(self, spec: &GraphSpec<S>) -> GraphResult<GraphInput<S>> {
        let state = &spec.initial;
        match self {
            JsonInput::Resume => Ok(GraphInput::Resume),
            JsonInput::Values(map) => {
                Ok(GraphInput::Update(vec![update_from_object(state, Value::Object(map))?]))
            }
            JsonInput::Bare(value) => Ok(GraphInput::Update(vec![update_from_object(state, value)?])),
            JsonInput::Command(command) => command.into_command(spec).map(GraphInput::Command),
        }
    }
}

/// A destination of a [`JsonCommand`].
#[derive(Debug, Clone, PartialEq)]
pub enum JsonGoto {
    /// A node by name.
    Node(String),
    /// A task for `node` whose input is `input` (a `Send`).
    Send {
        /// The node.
        node: String,
        /// Its input.
        input: Value,
    },
}

/// LangGraph's `Command` as JSON input: `{"update": ..., "resume": ..., "goto": ...}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonCommand {
    /// Writes applied with the command: an object of channel writes, or a list of `[channel, value]` pairs
    /// (one update each, so a channel may be written several times).
    pub update: Option<Value>,
    /// The value for the pending interrupt; an object whose keys are all interrupt ids (32 hex digits)
    /// answers those interrupts by id, as in LangGraph.
    pub resume: Option<Value>,
    /// Where to go next.
    pub goto: Vec<JsonGoto>,
}

impl JsonCommand {
    /// Reads LangGraph's command object: `update`, `resume` and `goto` (a node name, a
    /// `{"node", "input"}` object, or a list of them); a `null` member counts as absent.
    pub fn from_json(value: Value) -> GraphResult<Self> {
        let Value::Object(mut map) = value else {
            return Err(GraphError::Serialization(format!("expected a command object, got {value}")));
        };
        let present = |v: Option<Value>| v.filter(|v| !v.is_null());
        let goto = match present(map.remove("goto")) {
            None => Vec::new(),
            Some(Value::Array(items)) => items.into_iter().map(goto_from_json).collect::<GraphResult<_>>()?,
            Some(one) => vec![goto_from_json(one)?],
        };
        Ok(Self { update: present(map.remove("update")), resume: present(map.remove("resume")), goto })
    }

    fn into_command<S: State>(self, spec: &GraphSpec<S>) -> GraphResult<Command<S>> {
        let state = &spec.initial;
        let mut command = Command::<S>::new();
        match self.update {
            None => {}
            // `[[key, value], ...]`; a root-value state's update is its bare value, whatever its shape.
            Some(Value::Array(pairs)) if !super::is_root_value(state) && pairs.iter().all(is_pair) => {
                for pair in pairs {
                    let Value::Array(mut pair) = pair else { continue };
                    let value = pair.pop().unwrap_or(Value::Null);
                    let key = pair.pop().unwrap_or(Value::Null);
                    let mut object = Map::new();
                    if let Value::String(key) = key {
                        object.insert(key, value);
                    }
                    command.update.push(update_from_object(state, Value::Object(object))?);
                }
            }
            Some(update) => command.update.push(update_from_object(state, update)?),
        }
        command.resume = self.resume.map(|resume| match resume {
            Value::Object(map) if !map.is_empty() && map.keys().all(|k| is_interrupt_id(k)) => {
                Resume::ById(map)
            }
            other => Resume::Value(other),
        });
        for goto in self.goto {
            command.goto.push(match goto {
                JsonGoto::Node(node) => Goto::Node(node),
                JsonGoto::Send { node, input } => {
                    let &n = spec
                        .node_names
                        .get(&node)
                        .ok_or_else(|| GraphError::UpdateUnknownNode(node.clone()))?;
                    let func = spec.nodes[n]
                        .func
                        .as_ref()
                        .ok_or_else(|| GraphError::UpdateUnknownNode(node.clone()))?;
                    let payload = func
                        .payload_from_json(input)
                        .map_err(|e| GraphError::Serialization(e.to_string()))?;
                    Goto::Send(Send { node, payload })
                }
            });
        }
        Ok(command)
    }
}

/// A `[string, value]` pair.
fn is_pair(value: &Value) -> bool {
    matches!(value, Value::Array(pair) if pair.len() == 2 && pair[0].is_string())
}

/// LangGraph's interrupt ids: 32 lower-case hex digits.
fn is_interrupt_id(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn goto_from_json(value: Value) -> GraphResult<JsonGoto> {
    match value {
        Value::String(node) => Ok(JsonGoto::Node(node)),
        Value::Object(mut map) => match (map.remove("node"), map.remove("input")) {
            (Some(Value::String(node)), input) => {
                Ok(JsonGoto::Send { node, input: input.unwrap_or(Value::Null) })
            }
            _ => Err(GraphError::Serialization(
                "a goto object needs a 'node' string and an 'input'".to_owned(),
            )),
        },
        other => Err(GraphError::Serialization(format!("in Command.goto, expected Send/str, got {other}"))),
    }
}
