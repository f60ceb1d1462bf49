//! Errors of building and running graphs.

use weft_runnable_core::Error;

use crate::checkpoint::{CheckpointError, CheckpointErrorKind};
use crate::state::UpdateError;

/// Result alias of the graph crate.
pub type GraphResult<T> = std::result::Result<T, GraphError>;

/// Why a graph could not be built or run.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// No edge leaves `START`.
    #[error("graph must have an entrypoint: add at least one edge from START to another node")]
    NoEntryPoint,
    /// An edge starts at a node that was never added.
    #[error("found edge starting at unknown node '{0}'")]
    UnknownEdgeSource(String),
    /// An edge ends at a node that was never added.
    #[error("found edge ending at unknown node '{0}'")]
    UnknownEdgeTarget(String),
    /// A waiting edge names a source node that was never added.
    #[error("need to add_node '{0}' first")]
    UnknownWaitingSource(String),
    /// A conditional edge's path map names a node that was never added.
    #[error("at '{source_node}' node, '{branch}' branch found unknown target '{target}'")]
    UnknownBranchTarget {
        /// The node the branch leaves.
        source_node: String,
        /// The branch's name.
        branch: String,
        /// The unknown target.
        target: String,
    },
    /// `interrupt_before`/`interrupt_after` names an unknown node.
    #[error("interrupt node '{0}' not found")]
    UnknownInterruptNode(String),
    /// A node reached by an edge takes an input type with a field that is no channel of the state.
    #[error(
        "node '{node}' takes an input type with field '{field}', which is not a channel of the state (channels: {})",
        .channels.join(", ")
    )]
    UnknownInputChannel {
        /// The node.
        node: String,
        /// The field of its input type.
        field: String,
        /// The state's channels.
        channels: Vec<String>,
    },
    /// A router takes an input type with a field that is no channel of the state.
    #[error(
        "router '{branch}' of node '{source_node}' takes an input type with field '{field}', which is not a channel \
         of the state (channels: {})",
        .channels.join(", ")
    )]
    UnknownRouterInputChannel {
        /// The node the branch leaves (`__start__` for a conditional entry).
        source_node: String,
        /// The branch's name.
        branch: String,
        /// The field of the router's input type.
        field: String,
        /// The state's channels.
        channels: Vec<String>,
    },
    /// A node name is used twice.
    #[error("node '{0}' already present")]
    DuplicateNode(String),
    /// An error handler was added for a node the graph does not have, or for an error handler (whose
    /// failures fail the run).
    #[error("error handler for '{0}', which is no node of the graph (or is an error handler itself)")]
    UnknownErrorHandlerNode(String),
    /// A node uses a reserved name.
    #[error("node '{0}' is reserved")]
    ReservedNodeName(String),
    /// A node name contains a reserved character.
    #[error("'{ch}' is a reserved character and is not allowed in node names (node '{node}')")]
    ReservedCharacter {
        /// The node.
        node: String,
        /// The character.
        ch: char,
    },
    /// `END` used as an edge source.
    #[error("END cannot be a start node")]
    EndAsSource,
    /// `START` used as an edge target.
    #[error("START cannot be an end node")]
    StartAsTarget,
    /// A branch of the same name already leaves the node.
    #[error("branch with name '{branch}' already exists for node '{node}'")]
    DuplicateBranch {
        /// The node.
        node: String,
        /// The branch name.
        branch: String,
    },
    /// `add_sequence` was given no node.
    #[error("sequence requires at least one node")]
    EmptySequence,
    /// A write broke a channel's rules.
    #[error("{error} (step {step}){}", node_suffix(.nodes))]
    InvalidUpdate {
        /// What was broken.
        error: UpdateError,
        /// The step.
        step: i64,
        /// The nodes whose writes were being applied.
        nodes: Vec<String>,
    },
    /// The run took more supersteps than the recursion limit allows.
    #[error(
        "recursion limit of {limit} reached without hitting a stop condition; you can increase the limit by \
         setting the `recursion_limit` config key"
    )]
    RecursionLimit {
        /// The limit.
        limit: u32,
    },
    /// The recursion limit is below 1.
    #[error("recursion_limit must be at least 1")]
    InvalidRecursionLimit,
    /// A node failed.
    #[error("node '{node}' of graph '{}' failed at step {step}: {source}", .node.graph())]
    Node {
        /// The node, and the graph it belongs to ([`NodeRef::graph`]); it compares with and reads as the
        /// node's name.
        node: NodeRef,
        /// The step.
        step: i64,
        /// The node's error.
        source: Error,
    },
    /// A node returned something that is not an update of the state (a string, a number): LangGraph's
    /// `InvalidUpdateError`, with its message ("Expected dict, got ...", in lower case); the node and the
    /// step are its fields. The value reads as Python prints it (a string bare).
    #[error("expected dict, got {got}")]
    InvalidNodeReturn {
        /// The node.
        node: NodeRef,
        /// The step.
        step: i64,
        /// What it returned.
        got: String,
    },
    /// A node with a timeout is a sync function, which cannot be cancelled while it runs (LangGraph's
    /// "Node timeouts are only supported for async nodes").
    #[error(
        "node timeouts are only supported for async nodes because a sync function cannot be cancelled while \
         it runs; node '{0}' is sync"
    )]
    SyncNodeTimeout(String),
    /// A router or a command sent a packet to `END`.
    #[error("cannot send a packet to the END node")]
    SendToEnd,
    /// A router returned `None` (LangGraph's "Branch did not return a valid destination").
    #[error("branch '{branch}' of node '{node}' did not return a valid destination at step {step}")]
    NoDestination {
        /// The node the branch leaves from.
        node: String,
        /// The branch.
        branch: String,
        /// The step.
        step: i64,
    },
    /// A command or route sent the run back to `START`.
    #[error("branch of node '{0}' did not return a valid destination")]
    InvalidDestination(String),
    /// A router, a command or a `Send` named a node that does not exist.
    #[error("node '{source_node}' routed to unknown node '{target}'")]
    UnknownDestination {
        /// The node that routed.
        source_node: String,
        /// The unknown target.
        target: String,
    },
    /// `invoke(None)` on a thread with nothing to resume.
    #[error("received no input for __start__")]
    EmptyInput,
    /// An empty `Command` as input.
    #[error("received empty Command input")]
    EmptyCommand,
    /// `Command::resume` without a checkpointer.
    #[error("cannot use Command(resume=...) without checkpointer")]
    ResumeWithoutCheckpointer,
    /// One resume value while several interrupts are pending.
    #[error(
        "when there are multiple pending interrupts, you must specify the interrupt id when resuming \
         (pending: {})",
        .0.join(", ")
    )]
    AmbiguousResume(Vec<String>),
    /// `Command::resume_by_id` named interrupts that are not pending (unknown, or already answered), or
    /// named none.
    #[error(
        "unknown or already-consumed interrupt: {} (pending: {})",
        if .ids.is_empty() { "the resume map names no interrupt".to_owned() } else { .ids.join(", ") },
        .pending.join(", ")
    )]
    UnknownInterrupt {
        /// The ids named that are not pending, sorted.
        ids: Vec<String>,
        /// The pending ids, sorted.
        pending: Vec<String>,
    },
    /// A graph run inside another graph's node paused (`invoke` of a subgraph called from a node): the
    /// node pauses with it when the error is returned with `?` (it converts to the interrupt signal), as
    /// LangGraph's nested `GraphInterrupt` does. At the root, a pause is a result, not this error.
    #[error("the graph paused inside a node ({} pending interrupts)", .0.len())]
    Interrupted(Vec<crate::types::Interrupt>),
    /// A command for the parent graph at the root graph.
    #[error("there is no parent graph")]
    NoParentGraph,
    /// A checkpointer is set but the config has no thread id.
    #[error(
        "checkpointer requires one or more of the following 'configurable' keys: thread_id, checkpoint_ns, \
         checkpoint_id"
    )]
    MissingThreadId,
    /// A checkpoint could not be used (not found, unreadable by this graph, a saver that stopped).
    #[error("checkpointer error: {0}")]
    Checkpoint(String),
    /// The checkpointer failed: its error, whose [`kind`](CheckpointError::kind) says whether the backend
    /// was unavailable (retryable), the data corrupt, the thread's head moved (conflict) or the request
    /// invalid. See [`GraphError::checkpoint_error`].
    #[error("checkpointer error: {0}")]
    Storage(#[source] CheckpointError),
    /// The run stopped at a superstep boundary because its [`RunControl`](crate::RunControl) asked it
    /// to drain: the steps before `next_step` finished and are saved; running the thread again with no
    /// input continues from there.
    #[error(
        "the run was drained before step {next_step}: its checkpoint is saved, resume the thread to continue"
    )]
    Drained {
        /// The superstep the run did not start.
        next_step: i64,
    },
    /// `update_state` named a node that does not exist.
    #[error("node {0} does not exist")]
    UpdateUnknownNode(String),
    /// `update_state` could not infer which node the update is from.
    #[error("ambiguous update, specify as_node")]
    AmbiguousUpdate,
    /// `bulk_update_state` was given no superstep (LangGraph's `ValueError`).
    #[error("no supersteps provided")]
    NoSupersteps,
    /// A `bulk_update_state` superstep holds no update (LangGraph's `ValueError`).
    #[error("no updates provided")]
    NoUpdates,
    /// A bulk update superstep with several updates left `as_node` out.
    #[error("as_node is required when applying multiple updates")]
    AsNodeRequired,
    /// A bulk update superstep copies the checkpoint (`as_node` `__copy__`) beside other updates; a copy
    /// is a superstep of its own, later supersteps update it (LangGraph's `InvalidUpdateError`).
    #[error("cannot copy checkpoint with multiple updates")]
    CopyWithOtherUpdates,
    /// A run value could not be converted.
    #[error("serialization failed: {0}")]
    Serialization(String),
    /// A typed state call (`get_state`, `get_state_history`, `update_state`) got a `checkpoint_ns` naming a
    /// subgraph whose state type is not the graph's: its JSON counterpart (`get_state_json`, ...) reads
    /// and writes any subgraph.
    #[error(
        "checkpoint_ns '{checkpoint_ns}' names a subgraph of another state type: use get_state_json, \
         get_state_history_json or update_state_json"
    )]
    SubgraphStateType {
        /// The namespace.
        checkpoint_ns: String,
    },
}

impl GraphError {
    /// The checkpointer's error this error is, if it is one: its own, or that of a graph run inside a
    /// failed node (a subgraph).
    pub fn checkpoint_error(&self) -> Option<&CheckpointError> {
        match self {
            Self::Storage(e) => Some(e),
            Self::Node { source, .. } => {
                source.downcast_custom::<GraphError>().and_then(Self::checkpoint_error)
            }
            _ => None,
        }
    }

    /// The timeout of the node (or of a node of a subgraph it ran) that failed the run, if a timeout did
    /// (see [`TimeoutPolicy`](crate::TimeoutPolicy)).
    pub fn node_timeout(&self) -> Option<&crate::timeout::NodeTimeoutError> {
        let Self::Node { source, .. } = self else { return None };
        source
            .downcast_custom::<crate::timeout::NodeTimeoutError>()
            .or_else(|| source.downcast_custom::<GraphError>().and_then(Self::node_timeout))
    }

    /// The failed node's own error, as the node returned it: through the failures of subgraphs run by
    /// nodes, the innermost node's. `None` when no node failed (the run's own errors).
    ///
    /// The error's text names the node, its graph and the step; this is what the node raised, to match
    /// (`err.node_error().and_then(|e| e.downcast_custom::<MyError>())`, or
    /// [`downcast_node_error`](Self::downcast_node_error)).
    pub fn node_error(&self) -> Option<&Error> {
        let Self::Node { source, .. } = self else { return None };
        match source.downcast_custom::<GraphError>() {
            Some(inner @ Self::Node { .. }) => inner.node_error(),
            _ => Some(source),
        }
    }

    /// The failed node's own error ([`node_error`](Self::node_error)) when it is a custom error of type
    /// `T` (made with `Error::custom`).
    pub fn downcast_node_error<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.node_error()?.downcast_custom::<T>()
    }

    /// The kind of the checkpointer's error this error is, if it is one.
    pub fn checkpoint_error_kind(&self) -> Option<CheckpointErrorKind> {
        self.checkpoint_error().map(CheckpointError::kind)
    }

    /// Whether running again later may succeed: the checkpointer's backend was unavailable.
    pub fn is_retryable(&self) -> bool {
        self.checkpoint_error().is_some_and(CheckpointError::is_retryable)
    }
}

/// A node's output that is not an update of the state, as the node returned it (the engine turns it into
/// [`GraphError::InvalidNodeReturn`], naming the node and the step).
#[derive(Debug, Clone, thiserror::Error)]
#[error("expected dict, got {0}")]
pub struct InvalidNodeReturn(pub String);

impl From<CheckpointError> for GraphError {
    fn from(err: CheckpointError) -> Self {
        Self::Storage(err)
    }
}

fn node_suffix(nodes: &[String]) -> String {
    if nodes.is_empty() { String::new() } else { format!(" while applying writes of {}", nodes.join(", ")) }
}

impl From<GraphError> for Error {
    fn from(err: GraphError) -> Self {
        match err {
            GraphError::Node { source, .. } if source.is_control_flow() => source,
            GraphError::Interrupted(list) => Error::ControlFlow(weft_runnable_core::ControlFlow::new(
                "a subgraph paused",
                crate::runtime::GraphInterrupt(list),
            )),
            other => Error::custom(other),
        }
    }
}

/// The node a [`GraphError::Node`] happened in: its name and its graph's, behind one pointer so that
/// `GraphResult` stays small. It reads as the node's name (`Deref<Target = str>`, `Display`) and compares
/// with strings (`node == "tools"`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NodeRef(std::sync::Arc<(String, String)>);

impl NodeRef {
    /// Node `node` of graph `graph`.
    pub fn new(graph: impl Into<String>, node: impl Into<String>) -> Self {
        Self(std::sync::Arc::new((graph.into(), node.into())))
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.0.1
    }

    /// The graph's name (its compiled name, `LangGraph` by default).
    pub fn graph(&self) -> &str {
        &self.0.0
    }
}

impl std::ops::Deref for NodeRef {
    type Target = str;
    fn deref(&self) -> &str {
        self.name()
    }
}

impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Debug for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} (graph {:?})", self.name(), self.graph())
    }
}

impl PartialEq<str> for NodeRef {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for NodeRef {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl PartialEq<String> for NodeRef {
    fn eq(&self, other: &String) -> bool {
        self.name() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subgraphs_storage_error_is_reachable_from_the_node_error() {
        let inner = GraphError::Storage(CheckpointError::unavailable("postgres: connection refused"));
        assert!(inner.is_retryable());
        let outer = GraphError::Node { node: NodeRef::new("g", "sub"), step: 1, source: Error::from(inner) };
        assert_eq!(outer.checkpoint_error_kind(), Some(CheckpointErrorKind::Unavailable));
        assert!(outer.is_retryable());
        assert_eq!(GraphError::EmptyInput.checkpoint_error_kind(), None);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("quota of {0} spent")]
    struct Quota(u32);

    #[test]
    fn a_nodes_own_error_is_reachable_through_subgraphs() {
        let inner = GraphError::Node {
            node: NodeRef::new("inner", "call"),
            step: 2,
            source: Error::custom(Quota(3)),
        };
        let outer = GraphError::Node { node: NodeRef::new("g", "sub"), step: 1, source: Error::from(inner) };
        assert_eq!(outer.node_error().map(ToString::to_string).as_deref(), Some("quota of 3 spent"));
        assert_eq!(outer.downcast_node_error::<Quota>().map(|q| q.0), Some(3));
        assert!(outer.to_string().starts_with("node 'sub' of graph 'g' failed at step 1: node 'call'"));
        assert!(GraphError::EmptyInput.node_error().is_none());
    }
}
