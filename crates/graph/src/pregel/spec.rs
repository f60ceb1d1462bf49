//! The compiled form of a graph: nodes sorted by name, edges as index lists, channel layout.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::branch::Branch;
use crate::checkpoint::{ChannelName, special};
use crate::node::NodeFn;
use crate::state::State;
use crate::subgraph_reader::SubgraphStateReader;
use crate::types::START;

/// Per-node options.
#[derive(Clone, Default)]
pub struct NodeConfig {
    /// Run the node only once nothing else is pending (LangGraph's `defer=True`).
    pub defer: bool,
    /// Retry the node on failure: the first policy whose `retry_on` matches the error applies (none:
    /// the graph's policies, if any).
    pub retry: Vec<crate::retry::RetryPolicy>,
    /// Metadata attached to the node's runs and stream chunks.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Cache the node's writes by input (needs a cache in the compile config).
    pub cache: Option<crate::cache::CachePolicy>,
    /// The subgraph the node's function invokes, declared so that `get_graph_xray`, the erased graph's
    /// `subgraphs()` (the server's `/assistants/{id}/subgraphs`) and `get_state` see it as they see a
    /// compiled graph added as a node (LangGraph finds it by inspecting the function).
    pub subgraph: Option<Arc<dyn SubgraphStateReader>>,
    /// The nodes a `Command` returned by this node may go to (LangGraph's `destinations=`): drawn as
    /// dotted edges and counted for reachability, so the nodes it routes to are not reported unreached.
    pub destinations: Vec<String>,
    /// Time limits of each attempt (none: the builder's default from
    /// [`set_node_defaults`](crate::StateGraph::set_node_defaults), if any).
    pub timeout: Option<crate::timeout::TimeoutPolicy>,
}

impl std::fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeConfig")
            .field("defer", &self.defer)
            .field("retry", &self.retry)
            .field("metadata", &self.metadata)
            .field("cache", &self.cache)
            .field("subgraph", &self.subgraph.as_ref().and_then(|s| s.graph_name()))
            .field("destinations", &self.destinations)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl NodeConfig {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Defers the node.
    pub fn defer(mut self) -> Self {
        self.defer = true;
        self
    }

    /// Caches the node's writes by input.
    pub fn cache(mut self, policy: crate::cache::CachePolicy) -> Self {
        self.cache = Some(policy);
        self
    }

    /// Limits each attempt's time (LangGraph's `timeout=`): see [`TimeoutPolicy`](crate::TimeoutPolicy).
    pub fn timeout(mut self, policy: crate::timeout::TimeoutPolicy) -> Self {
        self.timeout = Some(policy);
        self
    }

    /// Adds a retry policy after the ones already given (LangGraph's list of policies: the first whose
    /// `retry_on` matches the error applies).
    pub fn retry(mut self, policy: crate::retry::RetryPolicy) -> Self {
        self.retry.push(policy);
        self
    }

    /// Declares where the node's `Command`s may go (LangGraph's `destinations=`, or a
    /// `Command[Literal[...]]` return annotation): the drawing shows a dotted edge to each, reachability
    /// counts them (so `compile` does not warn that they are unreached), and `compile` refuses one that is
    /// no node. The node still routes with its commands; this only declares it.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use weft_graph::{Command, END, NodeConfig, START, State, StateGraph};
    ///
    /// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
    /// struct Team {
    ///     next: String,
    /// }
    ///
    /// let mut graph = StateGraph::<Team>::new();
    /// graph.add_node_with(
    ///     "supervisor",
    ///     |s: Team| Command::<Team>::new().goto(if s.next.is_empty() { "researcher" } else { END }),
    ///     NodeConfig::new().destinations(["researcher", "coder", END]),
    /// );
    /// graph.add_node("researcher", |_: Team| Team::update().next("done"));
    /// graph.add_node("coder", |_: Team| Team::update().next("done"));
    /// graph.add_edge(START, "supervisor");
    /// graph.add_edge("researcher", "supervisor");
    /// graph.add_edge("coder", "supervisor");
    /// assert!(graph.unreached_nodes().is_empty());
    /// let drawing = graph.compile()?.get_graph().draw_mermaid();
    /// assert!(drawing.contains("supervisor -.-> coder;"), "{drawing}");
    /// # Ok::<(), weft_graph::GraphError>(())
    /// ```
    pub fn destinations<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.destinations = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the list of retry policies (the first whose `retry_on` matches the error applies).
    pub fn retry_policies(mut self, policies: impl IntoIterator<Item = crate::retry::RetryPolicy>) -> Self {
        self.retry = policies.into_iter().collect();
        self
    }
}

pub(crate) struct NodeSpec<S: State> {
    /// Shared by its tasks.
    pub(crate) name: Arc<str>,
    pub(crate) func: Option<Arc<dyn NodeFn<S>>>,
    pub(crate) config: NodeConfig,
    /// Targets of plain edges.
    pub(crate) edges: Vec<usize>,
    pub(crate) branches: Vec<Branch<S>>,
    /// Waiting edges this node is a source of.
    pub(crate) joins: Vec<usize>,
    /// The task path of its pull tasks (`~__pregel_pull, <name>`), made once.
    pub(crate) pull_path: Arc<str>,
    /// The channel that triggers it (`branch:to:<name>`), made once.
    pub(crate) trigger: String,
    /// The node its failures go to (its own error handler, else the graph's default one); `None` for a
    /// node without one and for error handlers themselves (a handler's failure fails the run).
    pub(crate) error_handler: Option<usize>,
}

impl<S: State> NodeSpec<S> {
    /// The subgraph the node runs: the compiled graph it is, or the one its options declare its function
    /// invokes.
    pub(crate) fn subgraph(&self) -> Option<&dyn SubgraphStateReader> {
        self.func.as_ref().and_then(|f| f.subgraph()).or(self.config.subgraph.as_deref())
    }

    pub(crate) fn start() -> Self {
        Self {
            name: Arc::from(START),
            func: None,
            config: NodeConfig::default(),
            edges: Vec::new(),
            branches: Vec::new(),
            joins: Vec::new(),
            pull_path: Arc::from(format!("~__pregel_pull, {START}")),
            trigger: format!("branch:to:{START}"),
            error_handler: None,
        }
    }
}

pub(crate) struct JoinSpec {
    pub(crate) name: String,
    /// Source nodes (`None` = START).
    pub(crate) sources: Vec<Option<usize>>,
    /// The target (`None` = END).
    pub(crate) target: Option<usize>,
}

pub(crate) struct GraphSpec<S: State> {
    pub(crate) initial: S,
    pub(crate) nodes: Vec<NodeSpec<S>>,
    pub(crate) node_names: BTreeMap<String, usize>,
    pub(crate) start: NodeSpec<S>,
    pub(crate) joins: Vec<JoinSpec>,
    /// Indexes into `nodes` in the order the nodes were added (drawing lists them that way).
    pub(crate) insertion_order: Vec<usize>,
    /// Whether the graph is a functional-API entrypoint: its tasks may call tasks
    /// ([`crate::func::Task`]), and its node's `updates` chunk is the bare return value.
    pub(crate) functional: bool,
    /// The compile-time topology (drawing reads it).
    pub(crate) topology: crate::topology::Topology,
}

/// Where each channel sits in the flat version table: state channels, `__start__`, one `branch:to:<node>`
/// per node, one per waiting edge, `__pregel_tasks`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) n_state: usize,
    pub(crate) n_nodes: usize,
    pub(crate) n_joins: usize,
}

impl Layout {
    pub(crate) fn start(&self) -> usize {
        self.n_state
    }
    pub(crate) fn branch(&self, node: usize) -> usize {
        self.n_state + 1 + node
    }
    pub(crate) fn join(&self, join: usize) -> usize {
        self.n_state + 1 + self.n_nodes + join
    }
    pub(crate) fn tasks(&self) -> usize {
        self.n_state + 1 + self.n_nodes + self.n_joins
    }
    pub(crate) fn len(&self) -> usize {
        self.tasks() + 1
    }
}

impl<S: State> GraphSpec<S> {
    pub(crate) fn layout(&self) -> Layout {
        Layout {
            n_state: self.initial.channels().len(),
            n_nodes: self.nodes.len(),
            n_joins: self.joins.len(),
        }
    }

    /// The names checkpoints use for the channels and nodes, made once per graph.
    pub(crate) fn checkpoint_names(&self) -> CheckpointNames {
        let mut channels: Vec<ChannelName> =
            self.initial.channels().iter().map(|c| ChannelName::from(&*c.name)).collect();
        channels.push(special::START.into());
        channels.extend(self.nodes.iter().map(|n| ChannelName::from(n.trigger.as_str())));
        channels.extend(self.joins.iter().map(|j| ChannelName::from(j.name.as_str())));
        channels.push(special::TASKS.into());
        let mut nodes: Vec<ChannelName> = self.nodes.iter().map(|n| Arc::clone(&n.name)).collect();
        nodes.push(special::START.into());
        let sorted = |names: &[ChannelName]| {
            let mut order: Vec<usize> = (0..names.len()).collect();
            order.sort_by(|&a, &b| names[a].cmp(&names[b]));
            order
        };
        let (channel_order, node_order) = (sorted(&channels), sorted(&nodes));
        CheckpointNames {
            channels,
            nodes,
            channel_order,
            node_order,
            interrupt: special::INTERRUPT.into(),
            input: special::INPUT.into(),
        }
    }
}

/// The names a checkpoint uses, shared by every checkpoint of the graph.
pub(crate) struct CheckpointNames {
    /// Every channel, in layout order.
    pub(crate) channels: Vec<ChannelName>,
    /// Every node, then START (the keys of `versions_seen`).
    pub(crate) nodes: Vec<ChannelName>,
    /// Indices of `channels` in name order (the order checkpoint maps are built in).
    pub(crate) channel_order: Vec<usize>,
    /// Indices of `nodes` in name order.
    pub(crate) node_order: Vec<usize>,
    /// The key of the static breakpoint's seen versions.
    pub(crate) interrupt: ChannelName,
    /// `__input__`, the key of the input's entry in `versions_seen`.
    pub(crate) input: ChannelName,
}
