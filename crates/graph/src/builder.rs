//! `StateGraph`: the builder. Add nodes and edges, then `compile()`.

use std::collections::{BTreeMap, HashSet};

use std::sync::Arc;

use crate::branch::{Branch, IntoRouter, PathMap};
use crate::compiled::{CompileConfig, CompiledGraph};
use crate::error::{GraphError, GraphResult};
use crate::node::{IntoNode, NodeFn};
use crate::pregel::spec::{GraphSpec, JoinSpec, NodeSpec};
use crate::state::State;
use crate::topology::Topology;
use crate::types::{END, START};

pub use crate::pregel::spec::NodeConfig;

impl NodeConfig {
    /// Declares the subgraph the node's function invokes (through `rt.config()`), so that the drawing
    /// with xray, the list of subgraphs and `get_state` see it before the node runs, as they see a
    /// compiled graph added as a node. A node has one subgraph, as LangGraph's drawing and state
    /// calls see one: declaring another replaces it.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use weft_graph::{GraphError, NodeConfig, Runtime, START, State, StateGraph};
    ///
    /// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
    /// struct Count {
    ///     n: i64,
    /// }
    ///
    /// let mut inner = StateGraph::<Count>::new();
    /// inner.add_node("a", |s: Count| Count::update().n(s.n + 1));
    /// inner.add_node("b", |s: Count| Count::update().n(s.n * 2));
    /// inner.add_edge(START, "a").add_edge("a", "b");
    /// let inner = inner.compile()?;
    ///
    /// let called = inner.clone();
    /// let mut outer = StateGraph::<Count>::new();
    /// outer.add_node_with(
    ///     "call",
    ///     move |s: Count, rt: Runtime| {
    ///         let called = called.clone();
    ///         async move {
    ///             let out = called.invoke(Count::update().n(s.n), rt.config()).await?;
    ///             Ok::<_, GraphError>(Count::update().n(out.value.n))
    ///         }
    ///     },
    ///     NodeConfig::new().subgraph(&inner),
    /// );
    /// outer.add_edge(START, "call");
    /// let drawn = outer.compile()?.get_graph_xray(true);
    /// assert!(drawn.node("call:a").is_some() && drawn.node("call").is_none());
    /// # Ok::<(), weft_graph::GraphError>(())
    /// ```
    pub fn subgraph<C: State>(mut self, graph: &CompiledGraph<C>) -> Self {
        self.subgraph = Some(Arc::new(graph.clone()));
        self
    }
}

/// Policies for every node of one graph that sets none of its own (LangGraph's `set_node_defaults`):
/// given to [`StateGraph::set_node_defaults`], applied when the graph compiles. A node's own policy wins;
/// a subgraph keeps its own defaults (a graph's defaults are not inherited by the graphs it runs).
///
/// Retry and timeout defaults apply to error handlers too; the cache and the error handler defaults
/// apply to the other nodes only (a handler's failure fails the run, as in LangGraph).
///
/// ```
/// use std::time::Duration;
/// use weft_graph::{NodeConfig, NodeDefaults, RetryPolicy, START, State, StateGraph, TimeoutPolicy};
///
/// #[derive(State, Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
/// struct Count {
///     n: i64,
/// }
///
/// let mut graph = StateGraph::<Count>::new();
/// graph.set_node_defaults(
///     NodeDefaults::new()
///         .retry(RetryPolicy::new().max_attempts(3))
///         .timeout(TimeoutPolicy::run(Duration::from_secs(30))?),
/// );
/// // Gets the defaults.
/// graph.add_node("a", |s: Count| async move { Count::update().n(s.n + 1) });
/// // Keeps its own retry policy, and takes the default timeout.
/// graph.add_node_with(
///     "b",
///     |s: Count| async move { Count::update().n(s.n * 2) },
///     NodeConfig::new().retry(RetryPolicy::new().max_attempts(5)),
/// );
/// graph.add_edge(START, "a").add_edge("a", "b");
/// graph.compile()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct NodeDefaults<S: State> {
    retry: Vec<crate::retry::RetryPolicy>,
    cache: Option<crate::cache::CachePolicy>,
    timeout: Option<crate::timeout::TimeoutPolicy>,
    error_handler: Option<Arc<dyn NodeFn<S>>>,
}

impl<S: State> Default for NodeDefaults<S> {
    fn default() -> Self {
        Self { retry: Vec::new(), cache: None, timeout: None, error_handler: None }
    }
}

impl<S: State> Clone for NodeDefaults<S> {
    fn clone(&self) -> Self {
        Self {
            retry: self.retry.clone(),
            cache: self.cache.clone(),
            timeout: self.timeout,
            error_handler: self.error_handler.clone(),
        }
    }
}

impl<S: State> std::fmt::Debug for NodeDefaults<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeDefaults")
            .field("retry", &self.retry)
            .field("cache", &self.cache)
            .field("timeout", &self.timeout)
            .field("error_handler", &self.error_handler.is_some())
            .finish()
    }
}

impl<S: State> NodeDefaults<S> {
    /// No defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a retry policy for nodes with none of their own (the first whose `retry_on` matches the
    /// error applies); these come before the compile config's [`retry`](CompileConfig::retry).
    pub fn retry(mut self, policy: crate::retry::RetryPolicy) -> Self {
        self.retry.push(policy);
        self
    }

    /// Caches the writes of nodes with no cache policy of their own.
    pub fn cache(mut self, policy: crate::cache::CachePolicy) -> Self {
        self.cache = Some(policy);
        self
    }

    /// Limits the attempts of nodes with no timeout policy of their own.
    pub fn timeout(mut self, policy: crate::timeout::TimeoutPolicy) -> Self {
        self.timeout = Some(policy);
        self
    }

    /// Routes the failures of every node without an error handler of its own to `handler` (LangGraph's
    /// `set_node_defaults(error_handler=...)`): compiled as the node `__default_error_handler__`. See
    /// [`StateGraph::add_error_handler`] for what a handler gets and does.
    pub fn error_handler<M>(mut self, handler: impl IntoNode<S, M>) -> Self {
        self.error_handler = Some(handler.into_node());
        self
    }

    /// `config` with these defaults where it has none of its own; an error handler's `config` takes
    /// no default cache.
    fn apply(&self, mut config: NodeConfig, is_handler: bool) -> NodeConfig {
        if config.retry.is_empty() {
            config.retry.clone_from(&self.retry);
        }
        if config.cache.is_none() && !is_handler {
            config.cache.clone_from(&self.cache);
        }
        if config.timeout.is_none() {
            config.timeout = self.timeout;
        }
        config
    }

    /// These defaults, with those `other` sets replacing them.
    fn merge(&mut self, other: NodeDefaults<S>) {
        if !other.retry.is_empty() {
            self.retry = other.retry;
        }
        if other.cache.is_some() {
            self.cache = other.cache;
        }
        if other.timeout.is_some() {
            self.timeout = other.timeout;
        }
        if other.error_handler.is_some() {
            self.error_handler = other.error_handler;
        }
    }
}

/// The name of the node an error handler added with [`StateGraph::add_error_handler`] compiles to.
pub(crate) fn error_handler_name(node: &str) -> String {
    format!("__error_handler__{node}")
}

/// The name of the node the default error handler ([`NodeDefaults::error_handler`]) compiles to.
pub(crate) const DEFAULT_ERROR_HANDLER: &str = "__default_error_handler__";

pub(crate) struct NodeEntry<S: State> {
    pub(crate) name: String,
    pub(crate) func: Arc<dyn NodeFn<S>>,
    pub(crate) config: NodeConfig,
    /// For an error handler: the node whose failures it handles (`None`: the graph's default handler,
    /// or no handler).
    pub(crate) handles: Option<Handles>,
}

/// Which failures an error handler node handles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Handles {
    /// Those of one node (added with [`StateGraph::add_error_handler`]).
    Node(String),
    /// Those of every node without a handler of its own ([`NodeDefaults::error_handler`]).
    Default,
}

/// Builds a graph over the state `S`: nodes, edges, conditional edges, waiting edges.
///
/// Mistakes (an unknown node, a reserved name, ...) are reported by [`compile`](StateGraph::compile), each
/// as a [`GraphError`] naming the culprit.
pub struct StateGraph<S: State> {
    initial: S,
    nodes: Vec<NodeEntry<S>>,
    edges: Vec<(String, String)>,
    waiting_edges: Vec<(Vec<String>, String)>,
    branches: Vec<(String, Branch<S>)>,
    errors: Vec<GraphError>,
    node_defaults: NodeDefaults<S>,
    /// Set for the graph of a functional-API entrypoint.
    pub(crate) functional: bool,
}

impl<S: State> std::fmt::Debug for StateGraph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateGraph")
            .field("nodes", &self.nodes.iter().map(|n| &n.name).collect::<Vec<_>>())
            .field("edges", &self.edges)
            .field("waiting_edges", &self.waiting_edges)
            .field("branches", &self.branches)
            .finish()
    }
}

impl<S: State + Default> Default for StateGraph<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: State + Default> StateGraph<S> {
    /// A graph whose state starts from `S::default()`.
    pub fn new() -> Self {
        Self::with_initial(S::default())
    }
}

impl<S: State> StateGraph<S> {
    /// A graph whose state starts from `initial` (for states that carry their own schema, like
    /// [`JsonState`](crate::JsonState)).
    pub fn with_initial(initial: S) -> Self {
        Self {
            initial,
            nodes: Vec::new(),
            edges: Vec::new(),
            waiting_edges: Vec::new(),
            branches: Vec::new(),
            errors: Vec::new(),
            node_defaults: NodeDefaults::default(),
            functional: false,
        }
    }

    /// Adds a node: a sync or async function of the state (or of a `Send` payload type), optionally also
    /// taking the [`Runtime`](crate::Runtime).
    pub fn add_node<M>(&mut self, name: impl Into<String>, node: impl IntoNode<S, M>) -> &mut Self {
        self.add_node_with(name, node, NodeConfig::default())
    }

    /// Sets policies for every node that sets none of its own (LangGraph's `set_node_defaults`); a
    /// later call replaces only the policies it sets. See [`NodeDefaults`].
    pub fn set_node_defaults(&mut self, defaults: NodeDefaults<S>) -> &mut Self {
        self.node_defaults.merge(defaults);
        self
    }

    /// Adds a compiled graph as a node named after it (the name given by [`CompileConfig::name`]), as
    /// LangGraph's `add_node(subgraph)` takes the graph's name. Two subgraphs left unnamed would both be
    /// `LangGraph`, which `compile` reports as a duplicate node.
    pub fn add_subgraph<C: State>(&mut self, graph: CompiledGraph<C>) -> &mut Self {
        let name = graph.name().to_owned();
        self.add_node(name, graph)
    }

    /// Adds a node with options (defer, retry policy, metadata).
    pub fn add_node_with<M>(
        &mut self,
        name: impl Into<String>,
        node: impl IntoNode<S, M>,
        config: NodeConfig,
    ) -> &mut Self {
        let name = name.into();
        if name == START || name == END {
            self.errors.push(GraphError::ReservedNodeName(name));
            return self;
        }
        if let Some(ch) = name.chars().find(|c| *c == '|' || *c == ':') {
            self.errors.push(GraphError::ReservedCharacter { node: name, ch });
            return self;
        }
        if self.nodes.iter().any(|n| n.name == name) {
            self.errors.push(GraphError::DuplicateNode(name));
            return self;
        }
        self.nodes.push(NodeEntry { name, func: node.into_node(), config, handles: None });
        self
    }

    /// Routes the failures of node `node` to `handler` (LangGraph's `add_node(..., error_handler=...)`),
    /// compiled as the node `__error_handler__<node>`. When `node` fails (after its retries), its error
    /// and name are saved as the task's writes (`__error__` and `__error_source_node__`, in one write),
    /// then the handler runs in the same superstep, on the input the node had, with the failure in
    /// [`Runtime::node_error`](crate::Runtime::node_error). Its writes count as the step's in the failed
    /// node's place, and it goes on with a [`Command`](crate::Command)'s `goto` (it has no edges). A run
    /// that stops between the failure and the handler's end (a crash, or the handler's own failure, which
    /// fails the run) resumes into the handler without running `node` again. Interrupts and commands to a
    /// parent graph are not failures: they never reach a handler. A node's own handler replaces the
    /// graph's default one ([`NodeDefaults::error_handler`]).
    ///
    /// ```
    /// use weft_graph::{Command, GraphError, Runtime, START, State, StateGraph};
    ///
    /// #[derive(State, Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
    /// struct Job {
    ///     status: String,
    /// }
    ///
    /// # tokio_test::block_on(async {
    /// let mut graph = StateGraph::<Job>::new();
    /// graph.add_node("fetch", |_: Job| async { Err::<(), _>(GraphError::Checkpoint("offline".into())) });
    /// graph.add_error_handler("fetch", |_: Job, rt: Runtime| async move {
    ///     let failed = rt.node_error().map(|e| e.node().to_owned()).unwrap_or_default();
    ///     Command::<Job>::new().update(Job::update().status(format!("{failed} failed"))).goto("report")
    /// });
    /// graph.add_node("report", |s: Job| async move {
    ///     Job::update().status(format!("{}, reported", s.status))
    /// });
    /// graph.add_edge(START, "fetch");
    /// let out = graph.compile()?.invoke(Job::update().status("new"), &Default::default()).await?;
    /// assert_eq!(out.value.status, "fetch failed, reported");
    /// # Ok::<(), GraphError>(())
    /// # }).unwrap();
    /// ```
    pub fn add_error_handler<M>(
        &mut self,
        node: impl Into<String>,
        handler: impl IntoNode<S, M>,
    ) -> &mut Self {
        let node = node.into();
        let name = error_handler_name(&node);
        if self.nodes.iter().any(|n| n.name == name) {
            self.errors.push(GraphError::DuplicateNode(name));
            return self;
        }
        let handles = Some(Handles::Node(node));
        self.nodes.push(NodeEntry {
            name,
            func: handler.into_node(),
            config: NodeConfig::default(),
            handles,
        });
        self
    }

    /// Adds an edge: after `from` runs, `to` runs in the next superstep.
    pub fn add_edge(&mut self, from: impl Into<String>, to: impl Into<String>) -> &mut Self {
        let (from, to) = (from.into(), to.into());
        if from == END {
            self.errors.push(GraphError::EndAsSource);
        } else if to == START {
            self.errors.push(GraphError::StartAsTarget);
        } else {
            self.edges.push((from, to));
        }
        self
    }

    /// Adds a waiting edge: `to` runs once after every node of `from` has run (since `to` last ran).
    pub fn add_waiting_edge<I, T>(&mut self, from: I, to: impl Into<String>) -> &mut Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let from: Vec<String> = from.into_iter().map(Into::into).collect();
        let to = to.into();
        if from.len() == 1 {
            let single = from.into_iter().next().unwrap_or_default();
            return self.add_edge(single, to);
        }
        if let Some(start) = from.iter().find(|f| *f == START) {
            // LangGraph accepts START only on plain edges; a barrier on it would never complete again.
            self.errors.push(GraphError::UnknownWaitingSource(start.clone()));
        } else if from.iter().any(|f| f == END) {
            self.errors.push(GraphError::EndAsSource);
        } else if to == START {
            self.errors.push(GraphError::StartAsTarget);
        } else {
            self.waiting_edges.push((from, to));
        }
        self
    }

    /// Adds a conditional edge: after `source` runs, `router` (seeing the state with `source`'s own writes
    /// applied) picks the next nodes, `END`, or `Send`s; `path_map` maps its answers to node names.
    ///
    /// The router takes `&S`, or an input type: the state, or a struct whose fields name the channels it
    /// reads, private ones included, through [`Router::with_input`](crate::Router::with_input).
    pub fn add_conditional_edges<M>(
        &mut self,
        source: impl Into<String>,
        router: impl IntoRouter<S, M>,
        path_map: impl Into<PathMap>,
    ) -> &mut Self {
        let source = source.into();
        let name = format!("branch_{}", self.branches.iter().filter(|(s, _)| *s == source).count());
        self.add_branch(source, Branch::new(name, router, path_map.into()))
    }

    /// Adds a named conditional edge (names must be unique per source node).
    pub fn add_branch(&mut self, source: impl Into<String>, branch: Branch<S>) -> &mut Self {
        let source = source.into();
        if source == END {
            self.errors.push(GraphError::EndAsSource);
        } else if self.branches.iter().any(|(s, b)| *s == source && b.name == branch.name) {
            self.errors.push(GraphError::DuplicateBranch { node: source, branch: branch.name });
        } else {
            self.branches.push((source, branch));
        }
        self
    }

    /// Conditional entry: a router from `START`.
    pub fn set_conditional_entry_point<M>(
        &mut self,
        router: impl IntoRouter<S, M>,
        path_map: impl Into<PathMap>,
    ) -> &mut Self {
        self.add_conditional_edges(START, router, path_map)
    }

    /// Entry point: an edge from `START`.
    pub fn set_entry_point(&mut self, node: impl Into<String>) -> &mut Self {
        self.add_edge(START, node)
    }

    /// Finish point: an edge to `END`.
    pub fn set_finish_point(&mut self, node: impl Into<String>) -> &mut Self {
        self.add_edge(node, END)
    }

    /// Adds nodes and chains them with edges in the given order.
    pub fn add_sequence<M, N>(&mut self, nodes: Vec<(&str, N)>) -> &mut Self
    where
        N: IntoNode<S, M>,
    {
        if nodes.is_empty() {
            self.errors.push(GraphError::EmptySequence);
            return self;
        }
        let mut previous: Option<String> = None;
        for (name, node) in nodes {
            self.add_node(name, node);
            if let Some(prev) = previous {
                self.add_edge(prev, name);
            }
            previous = Some(name.to_owned());
        }
        self
    }

    /// Names of the nodes added so far.
    pub fn node_names(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    /// The nodes that no path of edges from `START` reaches (static edges, waiting edges, routers' path
    /// maps; a router without a path map may go anywhere): only a `Command` or a `Send` can run them.
    /// `compile` logs a warning for each.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use weft_graph::{START, State, StateGraph};
    ///
    /// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
    /// struct Empty {}
    ///
    /// let mut graph = StateGraph::<Empty>::new();
    /// graph.add_node("a", |_: Empty| ());
    /// graph.add_node("orphan", |_: Empty| ());
    /// graph.add_edge(START, "a");
    /// assert_eq!(graph.unreached_nodes(), ["orphan"]);
    /// ```
    pub fn unreached_nodes(&self) -> Vec<String> {
        self.topology().unreached().into_iter().map(str::to_owned).collect()
    }

    /// The graph's topology: nodes, `START`, `END` and every edge, for validation, reachability and
    /// drawing.
    fn topology(&self) -> Topology {
        let default_handler = self.node_defaults.error_handler.as_ref().map(|_| DEFAULT_ERROR_HANDLER);
        let mut topology = Topology::new(self.nodes.iter().map(|n| n.name.as_str()).chain(default_handler));
        for (from, to) in &self.edges {
            topology.edge(from, to);
        }
        for (sources, to) in &self.waiting_edges {
            topology.waiting_edge(sources, to);
        }
        for (source, branch) in &self.branches {
            topology.branch(source, &branch.name, branch.path_map.0.as_ref());
        }
        // Where a node's commands may go: a branch of the topology (drawn and followed like one), no router.
        for node in self.nodes.iter().filter(|n| !n.config.destinations.is_empty()) {
            let targets = node.config.destinations.iter().map(|d| (d.clone(), d.clone())).collect();
            topology.branch(&node.name, "destinations", Some(&targets));
        }
        // Where a node's failures go: a branch too (a handler is reached by its nodes' failures).
        for (source, handler) in self.error_handler_links() {
            let targets = BTreeMap::from([(handler.to_owned(), handler.to_owned())]);
            topology.branch(source, "error_handler", Some(&targets));
        }
        topology
    }

    /// Each node with an error handler, and the handler's node: its own, else the default one.
    fn error_handler_links(&self) -> Vec<(&str, &str)> {
        let own = |name: &str| {
            self.nodes
                .iter()
                .find(|h| h.handles.as_ref().is_some_and(|of| *of == Handles::Node(name.to_owned())))
                .map(|h| h.name.as_str())
        };
        let default_handler = self.node_defaults.error_handler.as_ref().map(|_| DEFAULT_ERROR_HANDLER);
        self.nodes
            .iter()
            .filter(|n| n.handles.is_none())
            .filter_map(|n| Some((n.name.as_str(), own(&n.name).or(default_handler)?)))
            .collect()
    }

    /// Refuses an error handler for a node the graph does not have (or for an error handler), and a
    /// default handler whose node name is taken.
    fn check_error_handlers(&self) -> GraphResult<()> {
        for entry in &self.nodes {
            let Some(Handles::Node(source)) = &entry.handles else { continue };
            if !self.nodes.iter().any(|n| n.name == *source && n.handles.is_none()) {
                return Err(GraphError::UnknownErrorHandlerNode(source.clone()));
            }
        }
        if self.node_defaults.error_handler.is_some()
            && self.nodes.iter().any(|n| n.name == DEFAULT_ERROR_HANDLER)
        {
            return Err(GraphError::DuplicateNode(DEFAULT_ERROR_HANDLER.to_owned()));
        }
        Ok(())
    }

    /// Validates the graph and compiles it with default settings (no checkpointer).
    pub fn compile(&self) -> GraphResult<CompiledGraph<S>> {
        self.compile_with(CompileConfig::default())
    }

    /// Validates the graph and compiles it with a checkpointer, breakpoints, a name, ...
    pub fn compile_with(&self, config: CompileConfig) -> GraphResult<CompiledGraph<S>> {
        if let Some(err) = self.errors.first() {
            return Err(err.clone());
        }
        self.check_error_handlers()?;
        let topology = self.topology();
        // Validation, in LangGraph's order.
        topology.validate()?;
        for name in config.interrupt_before.iter().chain(config.interrupt_after.iter()) {
            if name != "*" && !topology.is_node(name) {
                return Err(GraphError::UnknownInterruptNode(name.clone()));
            }
        }
        self.check_node_inputs()?;
        let router_inputs = self.router_inputs()?;
        if !self.functional {
            for node in topology.unreached() {
                tracing::warn!(
                    node = %node,
                    "node '{node}' is reached by no edge from START: only a Command or a Send can run it"
                );
            }
        }
        let spec = self.spec(topology, router_inputs)?;
        let sync_timed = spec
            .nodes
            .iter()
            .find(|n| n.config.timeout.is_some() && n.func.as_ref().is_some_and(|f| f.is_sync()));
        if let Some(node) = sync_timed {
            return Err(GraphError::SyncNodeTimeout(node.name.to_string()));
        }
        Ok(CompiledGraph::new(spec, config))
    }

    /// The names of the state's channels, for errors that list them.
    fn channel_names(&self) -> Vec<String> {
        self.initial.channels().iter().map(|c| c.name.to_string()).collect()
    }

    /// Checks that a node a plain edge reaches, which gets the state, has an input type naming channels
    /// only. A router's destinations are left out: a router may reach them with `Send`s, whose payloads
    /// are their own types (the map step of a map-reduce names its workers in its path map).
    fn check_node_inputs(&self) -> GraphResult<()> {
        let edge_targets: HashSet<&str> = self
            .edges
            .iter()
            .map(|(_, t)| t.as_str())
            .chain(self.waiting_edges.iter().map(|(_, t)| t.as_str()))
            .collect();
        for node in self.nodes.iter().filter(|n| edge_targets.contains(n.name.as_str())) {
            for field in node.func.input_fields().unwrap_or_default() {
                if self.initial.channel_index(field).is_none() {
                    return Err(GraphError::UnknownInputChannel {
                        node: node.name.clone(),
                        field: (*field).to_owned(),
                        channels: self.channel_names(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The channels each router's input type reads (LangGraph's path function input schema), in the
    /// order of the branches; none for a router that takes the whole state.
    fn router_inputs(&self) -> GraphResult<Vec<Option<Arc<[usize]>>>> {
        let mut router_inputs: Vec<Option<Arc<[usize]>>> = Vec::with_capacity(self.branches.len());
        for (source, branch) in &self.branches {
            let Some(fields) = branch.input_fields() else {
                router_inputs.push(None);
                continue;
            };
            let mut indexes = Vec::with_capacity(fields.len());
            for field in fields {
                match self.initial.channel_index(field) {
                    Some(i) => indexes.push(i),
                    None => {
                        return Err(GraphError::UnknownRouterInputChannel {
                            source_node: source.clone(),
                            branch: branch.name.clone(),
                            field: (*field).to_owned(),
                            channels: self.channel_names(),
                        });
                    }
                }
            }
            router_inputs.push(Some(indexes.into()));
        }
        Ok(router_inputs)
    }

    /// The nodes' run-time specs in the order of `names` (sorted), with the graph's defaults applied and
    /// each node's error handler resolved; no edges yet.
    fn node_specs(&self, entries: &[&NodeEntry<S>], names: &[&str]) -> Vec<NodeSpec<S>> {
        let links = self.error_handler_links();
        let index_of = |name: &str| names.binary_search(&name).ok();
        names
            .iter()
            .filter_map(|name| entries.iter().find(|n| n.name == *name))
            .map(|n| NodeSpec {
                name: Arc::from(n.name.as_str()),
                func: Some(Arc::clone(&n.func)),
                config: self.node_defaults.apply(n.config.clone(), n.handles.is_some()),
                edges: Vec::new(),
                branches: Vec::new(),
                joins: Vec::new(),
                pull_path: Arc::from(format!("~__pregel_pull, {}", n.name)),
                trigger: format!("branch:to:{}", n.name),
                error_handler: links.iter().find(|(s, _)| *s == n.name).and_then(|(_, h)| index_of(h)),
            })
            .collect()
    }

    /// The run-time spec: nodes sorted by name, edges as index lists.
    fn spec(
        &self,
        topology: Topology,
        router_inputs: Vec<Option<Arc<[usize]>>>,
    ) -> GraphResult<GraphSpec<S>> {
        let default_entry = self.node_defaults.error_handler.as_ref().map(|func| NodeEntry {
            name: DEFAULT_ERROR_HANDLER.to_owned(),
            func: Arc::clone(func),
            config: NodeConfig::default(),
            handles: Some(Handles::Default),
        });
        let entries: Vec<&NodeEntry<S>> = self.nodes.iter().chain(default_entry.as_ref()).collect();
        let mut names: Vec<&str> = entries.iter().map(|n| n.name.as_str()).collect();
        names.sort_unstable();
        let index_of = |name: &str| names.binary_search(&name).ok();
        let mut nodes = self.node_specs(&entries, &names);
        let mut start = NodeSpec::<S>::start();
        for (from, to) in &self.edges {
            let spec = if from == START {
                &mut start
            } else {
                index_of(from)
                    .map(|i| &mut nodes[i])
                    .ok_or_else(|| GraphError::UnknownEdgeSource(from.clone()))?
            };
            if let Some(t) = index_of(to) {
                if !spec.edges.contains(&t) {
                    spec.edges.push(t);
                }
            }
        }
        for ((source, branch), input_channels) in self.branches.iter().zip(router_inputs) {
            let spec = if source == START {
                &mut start
            } else {
                index_of(source)
                    .map(|i| &mut nodes[i])
                    .ok_or_else(|| GraphError::UnknownEdgeSource(source.clone()))?
            };
            let mut branch = branch.clone();
            branch.input_channels = input_channels;
            branch.resolve(index_of);
            spec.branches.push(branch);
        }
        let mut joins = Vec::new();
        for (sources, target) in &self.waiting_edges {
            let target_index = index_of(target);
            let mut source_indexes = Vec::new();
            for s in sources {
                let idx = if s == START { None } else { index_of(s) };
                source_indexes.push(idx);
            }
            let join_index = joins.len();
            joins.push(JoinSpec {
                name: format!("join:{}:{}", sources.join("+"), target),
                sources: source_indexes.clone(),
                target: target_index,
            });
            for idx in source_indexes {
                match idx {
                    Some(i) => nodes[i].joins.push(join_index),
                    None => start.joins.push(join_index),
                }
            }
        }
        let node_names: BTreeMap<String, usize> =
            nodes.iter().enumerate().map(|(i, n)| (n.name.to_string(), i)).collect();
        let insertion_order = entries.iter().filter_map(|n| index_of(&n.name)).collect();
        Ok(GraphSpec {
            initial: self.initial.clone(),
            nodes,
            node_names,
            start,
            joins,
            insertion_order,
            functional: self.functional,
            topology,
        })
    }
}
