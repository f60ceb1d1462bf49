//! What passes between a parent run and the subgraph runs its tasks start: the parent's run context
//! ([`ParentRun`], in the subgraph run's config), the subgraphs function nodes called, and commands for the
//! parent graph encoded by channel name.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use weft_runnable_core::{ControlFlow, Error, Result};

use crate::checkpoint::Checkpointer;
use crate::state::State;
use crate::subgraph_reader::SubgraphStateReader;
use crate::types::{Command, Goto, Payload};

/// What a parent run hands the subgraph runs started by one of its tasks.
#[derive(Clone)]
pub(crate) struct ParentRun {
    /// The parent's stream, when it streams subgraphs: where the subgraph's chunks go.
    pub(crate) stream: Option<crate::pregel::sink::ParentStream>,
    pub(crate) checkpointer: Option<Arc<dyn Checkpointer>>,
    /// The checkpoint namespace of the subgraph run.
    pub(crate) ns: String,
    /// The namespace of a subgraph that keeps one namespace per node (`SubgraphCheckpoints::PerNode`).
    pub(crate) node_ns: String,
    /// The parent's store.
    pub(crate) store: Option<Arc<dyn crate::store::Store>>,
    /// Namespace to checkpoint id of every enclosing run (saved as the subgraph checkpoints' `parents`).
    pub(crate) parents: std::collections::BTreeMap<String, String>,
    pub(crate) resuming: bool,
    pub(crate) null_resume: Arc<Mutex<Option<Value>>>,
    pub(crate) resume_by_id: Map<String, Value>,
    /// How many subgraph runs the task has started: the second and later ones get namespaces of their own
    /// (`<ns>|1`, `<ns>|2`, ...), as in LangGraph, so two subgraphs called from one node never share one.
    pub(crate) calls: Arc<std::sync::atomic::AtomicUsize>,
    /// Where a subgraph run registers itself with the parent graph (under the task's node).
    pub(crate) called: (CalledSubgraphs, Arc<str>),
}

/// The subgraphs function nodes called, by node name: the first one each node ran (as LangGraph takes the
/// first subgraph it finds in a function).
#[derive(Clone, Default)]
pub(crate) struct CalledSubgraphs(Arc<Mutex<ReadersByNode>>);

/// Subgraph state readers by node name.
type ReadersByNode = std::collections::HashMap<Arc<str>, Arc<dyn SubgraphStateReader>>;

impl CalledSubgraphs {
    /// Records that `node` called `subgraph`, unless it called another one first.
    pub(crate) fn record(&self, node: &Arc<str>, subgraph: impl FnOnce() -> Arc<dyn SubgraphStateReader>) {
        if let Ok(mut map) = self.0.lock() {
            map.entry(Arc::clone(node)).or_insert_with(subgraph);
        }
    }

    /// The subgraph `node` called, if it ran one.
    pub(crate) fn get(&self, node: &str) -> Option<Arc<dyn SubgraphStateReader>> {
        self.0.lock().ok()?.get(node).cloned()
    }
}

impl ParentRun {
    /// The namespaces of the task's next subgraph run: (`ns`, `node_ns`).
    pub(crate) fn next_namespaces(&self) -> (String, String) {
        match self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => (self.ns.clone(), self.node_ns.clone()),
            n => (format!("{}|{n}", self.ns), format!("{}|{n}", self.node_ns)),
        }
    }
}

/// A command for the parent graph, travelling up as control flow; the parent applies it as the output of
/// the node that ran the subgraph.
#[derive(Debug, Clone)]
pub(crate) struct EncodedParentCommand {
    /// State writes by channel name.
    pub(crate) writes: Vec<(String, Value)>,
    /// Destinations: node names, or `Send`s as `(node, payload JSON)`.
    pub(crate) goto: Vec<(String, Option<Value>)>,
}

impl EncodedParentCommand {
    /// Encodes a command of a subgraph of state `C`.
    pub(crate) fn encode<C: State>(state: &C, cmd: Command<C>) -> Result<Self> {
        let names = state.channels();
        let mut writes = Vec::new();
        for u in &cmd.update {
            for (i, v) in state.update_to_json(u).map_err(|e| Error::Serialization(e.to_string()))? {
                writes.push((names[i].name.to_string(), v));
            }
        }
        let mut goto = Vec::new();
        for g in cmd.goto {
            match g {
                Goto::Node(n) => goto.push((n, None)),
                Goto::Send(s) => {
                    let arg = s.payload.to_json().map_err(Error::Serialization)?;
                    goto.push((s.node, Some(arg)));
                }
            }
        }
        Ok(Self { writes, goto })
    }

    /// Decodes it as a command of the parent graph of state `S`.
    pub(crate) fn decode<S: State>(self, spec: &crate::pregel::spec::GraphSpec<S>) -> Result<Command<S>> {
        let state = &spec.initial;
        let mut cmd = Command::new();
        let mut writes = Vec::new();
        for (name, value) in self.writes {
            let i = state.channel_index(&name).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "a command for the parent graph writes '{name}', which the parent state lacks"
                ))
            })?;
            writes.push((i, value));
        }
        if !writes.is_empty() {
            for w in writes {
                cmd.update
                    .push(state.update_from_json(vec![w]).map_err(|e| Error::Serialization(e.to_string()))?);
            }
        }
        for (node, arg) in self.goto {
            match arg {
                None => cmd.goto.push(Goto::Node(node)),
                Some(arg) => {
                    let &i = spec.node_names.get(&node).ok_or_else(|| {
                        Error::InvalidInput(format!(
                            "a command for the parent graph sends to unknown node '{node}'"
                        ))
                    })?;
                    let func = spec.nodes[i]
                        .func
                        .as_ref()
                        .ok_or_else(|| Error::InvalidInput(format!("node '{node}' has no function")))?;
                    let payload: Payload = func.payload_from_json(arg)?;
                    cmd.goto.push(Goto::Send(crate::types::Send { node, payload }));
                }
            }
        }
        Ok(cmd)
    }
}

/// The parent command inside an error, if it carries one.
pub(crate) fn parent_command(err: &Error) -> Option<EncodedParentCommand> {
    match err {
        Error::ControlFlow(flow) => flow.downcast_ref::<EncodedParentCommand>().cloned(),
        _ => None,
    }
}

/// Turns a parent command into control flow.
pub(crate) fn raise_parent_command(cmd: EncodedParentCommand) -> Error {
    Error::ControlFlow(ControlFlow::new("command for the parent graph", cmd))
}
