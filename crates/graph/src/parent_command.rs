//! A command for the parent graph written in the parent's terms ([`ParentCommand`]), raised from a node of
//! a subgraph as control flow.

use std::sync::Arc;

use weft_runnable_core::{ControlFlow, Error};

use crate::state::State;
use crate::types::{Command, CommandGraph};

/// A command for the parent graph written in the parent's terms: a [`Command`] of the parent graph's
/// state, raised from a node of a subgraph whose state is another type (LangGraph's
/// `Command(graph=Command.PARENT, ...)`, whose update names the parent's keys).
///
/// A node raises it with [`into_error`](Self::into_error) (as `Err(..)`); its graph passes it up, and the
/// parent applies it as the output of the node that ran the subgraph. The parent's state must be the
/// command's: another type is an error naming both.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use weft_graph::{Command, END, ParentCommand, Runtime, START, State, StateGraph};
///
/// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
/// struct Team {
///     active: String,
/// }
///
/// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
/// struct Worker {
///     notes: String,
/// }
///
/// # tokio_test::block_on(async {
/// let mut worker = StateGraph::<Worker>::new();
/// worker.add_node("hand_off", |_: Worker| -> weft_runnable_core::Result<()> {
///     let command = Command::<Team>::new().update(Team::update().active("reviewer")).goto("reviewer");
///     Err(ParentCommand::new(command).into_error())
/// });
/// worker.add_edge(START, "hand_off");
/// let worker = worker.compile().unwrap();
///
/// let mut team = StateGraph::<Team>::new();
/// team.add_node("writer", worker);
/// team.add_node("reviewer", |s: Team| Team::update().active(format!("{} done", s.active)));
/// team.add_edge(START, "writer");
/// team.add_edge("reviewer", END);
/// let out = team.compile().unwrap().invoke(Team::update(), &Default::default()).await.unwrap();
/// assert_eq!(out.value.active, "reviewer done");
/// # });
/// ```
#[derive(Clone)]
pub struct ParentCommand {
    command: Arc<dyn std::any::Any + Send + Sync>,
    state: std::borrow::Cow<'static, str>,
    /// Whether it left the graph of the node that raised it (the next graph up applies it).
    lifted: bool,
}

impl std::fmt::Debug for ParentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParentCommand").field("state", &self.state).field("lifted", &self.lifted).finish()
    }
}

impl ParentCommand {
    /// A command for the parent graph, whose state is `P`.
    pub fn new<P: State>(command: Command<P>) -> Self {
        Self { command: Arc::new(command), state: std::any::type_name::<P>().into(), lifted: false }
    }

    /// The same from a shared, type-erased `Command<P>` (as a tool's command payload holds it), with
    /// `P`'s type name for error messages.
    pub fn from_shared(
        command: Arc<dyn std::any::Any + Send + Sync>,
        state: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Self {
        Self { command, state: state.into(), lifted: false }
    }

    /// The control flow a node returns (as its error) to send the command up.
    pub fn into_error(self) -> Error {
        Error::ControlFlow(ControlFlow::new("command for the parent graph", self))
    }

    /// The command as one of a graph over `S`, when that is its type.
    pub(crate) fn command<S: State>(&self) -> Option<Command<S>> {
        let mut command = self.command.downcast_ref::<Command<S>>()?.clone();
        command.graph = CommandGraph::Current;
        Some(command)
    }

    /// The state type it was written for.
    pub fn state_type(&self) -> &str {
        &self.state
    }

    pub(crate) fn is_lifted(&self) -> bool {
        self.lifted
    }

    pub(crate) fn lifted(mut self) -> Self {
        self.lifted = true;
        self
    }
}

/// The typed parent command inside an error, if it carries one.
pub(crate) fn typed_parent_command(err: &Error) -> Option<ParentCommand> {
    match err {
        Error::ControlFlow(flow) => flow.downcast_ref::<ParentCommand>().cloned(),
        _ => None,
    }
}
