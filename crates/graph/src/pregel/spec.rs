//! The compiled form of a graph: nodes sorted by name, edges as index lists, channel layout.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::branch::Branch;
use crate::builder::NodeConfig;
use crate::checkpoint::{ChannelName, special};
use crate::node::NodeFn;
use crate::state::State;
use crate::types::START;

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
}

impl<S: State> NodeSpec<S> {
    /// The subgraph the node runs: the compiled graph it is, or the one its options declare its function
    /// invokes.
    pub(crate) fn subgraph(&self) -> Option<&dyn crate::subgraph::SubgraphStateReader> {
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
