//! Control-flow values: `START`, `END`, `Send`, `Command`, `Interrupt`.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::state::State;

/// The virtual entry node.
pub const START: &str = "__start__";
/// The virtual exit node.
pub const END: &str = "__end__";

type ToJson = fn(&(dyn Any + std::marker::Send + Sync)) -> Result<Value, String>;

/// A typed value handed to one task, kept as `Any` so that nodes of one graph may take different input
/// types; it remembers how to turn itself into JSON for checkpoints.
#[derive(Clone)]
pub struct Payload {
    value: Arc<dyn Any + std::marker::Send + Sync>,
    type_name: &'static str,
    to_json: ToJson,
}

impl Payload {
    /// Wraps a value.
    pub fn new<T: Serialize + std::marker::Send + Sync + 'static>(value: T) -> Self {
        fn to_json<T: Serialize + 'static>(
            v: &(dyn Any + std::marker::Send + Sync),
        ) -> Result<Value, String> {
            match v.downcast_ref::<T>() {
                Some(v) => serde_json::to_value(v).map_err(|e| e.to_string()),
                None => Err("payload type mismatch".to_owned()),
            }
        }
        Self { value: Arc::new(value), type_name: std::any::type_name::<T>(), to_json: to_json::<T> }
    }

    /// Wraps a command of a graph over `S` (see [`Send::command`]). Only its graph can write it as JSON
    /// (the updates need the state's channels), so [`Payload::to_json`] reports an error for it.
    pub fn command<S: State>(command: Command<S>) -> Self {
        fn to_json(_: &(dyn Any + std::marker::Send + Sync)) -> Result<Value, String> {
            Err("a Command carried by a Send is written as JSON by its graph alone".to_owned())
        }
        Self { value: Arc::new(command), type_name: std::any::type_name::<Command<S>>(), to_json }
    }

    /// The command, if the value is a `Command` of a graph over `S`.
    pub fn as_command<S: State>(&self) -> Option<&Command<S>> {
        self.value.downcast_ref::<Command<S>>()
    }

    /// The value, if it is a `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }

    /// The Rust type name of the value.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The value as JSON.
    pub fn to_json(&self) -> Result<Value, String> {
        (self.to_json)(self.value.as_ref())
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_json() {
            Ok(v) => write!(f, "Payload({v})"),
            Err(_) => write!(f, "Payload(<{}>)", self.type_name),
        }
    }
}

/// A task for `node` in the next superstep whose input is `payload` itself, not the graph state
/// (map-reduce fan-out).
#[derive(Debug, Clone)]
pub struct Send {
    pub(crate) node: String,
    pub(crate) payload: Payload,
}

impl Send {
    /// A packet for `node` carrying `payload` (the node's input type).
    pub fn new<T: Serialize + std::marker::Send + Sync + 'static>(
        node: impl Into<String>,
        payload: T,
    ) -> Self {
        Self { node: node.into(), payload: Payload::new(payload) }
    }

    /// A packet for `node` carrying a [`Command`] of the graph, as LangGraph's `Send(node, Command(...))`:
    /// the node takes `Command<S>` as its input and may return it (re-emit it), so that its update
    /// applies and its `goto` runs, as if the node had returned it.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use weft_graph::{Command, END, START, Send, State, StateGraph};
    /// # tokio_test::block_on(async {
    /// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
    /// struct Log {
    ///     #[state(append)]
    ///     seen: Vec<String>,
    /// }
    ///
    /// let mut graph = StateGraph::<Log>::new();
    /// graph.add_node("fan", |_: Log| ());
    /// // Runs once per Send: it re-emits the command it was sent, so its goto runs in the next step.
    /// graph.add_node("relay", |cmd: Command<Log>| vec![cmd, Command::new().update(LogUpdate::new().seen(vec!["relayed".into()]))]);
    /// graph.add_node("done", |_: Log| LogUpdate::new().seen(vec!["done".into()]));
    /// graph.add_edge(START, "fan");
    /// graph.add_conditional_edges("fan", |_: &Log| vec![Send::command("relay", Command::<Log>::new().goto("done"))], None);
    /// graph.add_edge("done", END);
    /// let app = graph.compile().unwrap();
    /// let out = app.invoke(LogUpdate::new(), &Default::default()).await.unwrap();
    /// assert_eq!(out.value.seen, vec!["relayed", "done"]);
    /// # });
    /// ```
    pub fn command<S: State>(node: impl Into<String>, command: Command<S>) -> Self {
        Self { node: node.into(), payload: Payload::command(command) }
    }

    /// The target node.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The payload.
    pub fn payload(&self) -> &Payload {
        &self.payload
    }
}

/// Where a command sends control next.
#[derive(Debug, Clone)]
pub enum Goto {
    /// A node by name.
    Node(String),
    /// A task with its own input.
    Send(Send),
}

impl From<&str> for Goto {
    fn from(s: &str) -> Self {
        Goto::Node(s.to_owned())
    }
}

impl From<String> for Goto {
    fn from(s: String) -> Self {
        Goto::Node(s)
    }
}

impl From<Send> for Goto {
    fn from(s: Send) -> Self {
        Goto::Send(s)
    }
}

/// Which graph a command applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CommandGraph {
    /// The graph of the node that returned it.
    #[default]
    Current,
    /// The parent graph, as if the subgraph node had returned it.
    Parent,
}

/// The value given back to pending interrupts.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// One value, for when exactly one interrupt is pending.
    Value(Value),
    /// A value per interrupt id (a partial map resumes only those).
    ById(Map<String, Value>),
}

/// Update state and route in one value, from a node or as graph input (resume, update, goto).
#[derive(Debug, Clone)]
pub struct Command<S: State> {
    /// Updates to apply, in order (several updates may write the same key).
    pub update: Vec<S::Update>,
    /// Where to go next, in addition to the node's static edges.
    pub goto: Vec<Goto>,
    /// Values for pending interrupts (graph input only).
    pub resume: Option<Resume>,
    /// Which graph the command is for.
    pub graph: CommandGraph,
}

impl<S: State> Default for Command<S> {
    fn default() -> Self {
        Self { update: Vec::new(), goto: Vec::new(), resume: None, graph: CommandGraph::Current }
    }
}

impl<S: State> Command<S> {
    /// An empty command.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an update.
    pub fn update(mut self, update: S::Update) -> Self {
        self.update.push(update);
        self
    }

    /// Adds a destination.
    pub fn goto(mut self, goto: impl Into<Goto>) -> Self {
        self.goto.push(goto.into());
        self
    }

    /// Resumes the one pending interrupt with `value`.
    pub fn resume(value: impl Into<Value>) -> Self {
        Self { resume: Some(Resume::Value(value.into())), ..Self::default() }
    }

    /// Resumes interrupts by id.
    pub fn resume_by_id(values: Map<String, Value>) -> Self {
        Self { resume: Some(Resume::ById(values)), ..Self::default() }
    }

    /// Sends the command to the parent graph.
    pub fn to_parent(mut self) -> Self {
        self.graph = CommandGraph::Parent;
        self
    }

    /// Whether the command carries nothing.
    pub fn is_empty(&self) -> bool {
        self.update.is_empty() && self.goto.is_empty() && self.resume.is_none()
    }
}

/// A pause requested by a node through `interrupt`, waiting for a resume value.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Interrupt {
    /// The value shown to whoever resumes (a question, the pending tool calls, ...).
    pub value: Value,
    /// A stable id: the same interrupt has the same id across replays and processes.
    pub id: String,
}

/// When checkpoints are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Each checkpoint is saved before the next superstep starts.
    Sync,
    /// Checkpoints are saved in the background, in order, overlapping the next superstep, no more: step
    /// N+2 never starts before every save of step N is stored, and a failed save stops the run at the
    /// next step boundary with the saver's error. The run does not return before every save is done
    /// (LangGraph's default mode, with the lag bounded).
    #[default]
    Async,
    /// Only the final checkpoint (or the one at an interrupt or error) is saved.
    Exit,
}
