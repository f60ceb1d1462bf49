//! `Runtime`: what a node can reach besides its input: the config, run information, interrupts, the stream
//! writer, the user context.

use std::any::Any;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_runnable_core::{ControlFlow, Error, Result, RunnableConfig};

use crate::types::Interrupt;

/// Where the node runs: thread, checkpoint, namespace, task, attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionInfo {
    /// The thread, when the graph has a checkpointer.
    pub thread_id: Option<String>,
    /// The checkpoint the task was planned from.
    pub checkpoint_id: Option<String>,
    /// The checkpoint namespace (`""` at the root).
    pub checkpoint_ns: String,
    /// The task's id.
    pub task_id: String,
    /// The attempt (1-based).
    pub attempt: u32,
    /// The superstep.
    pub step: i64,
}

/// What a node's error handler is told about the failure it handles (LangGraph's `NodeError`): the node
/// that failed and its error. A handler reads it through [`Runtime::node_error`].
///
/// In the run where the node failed, [`source`](NodeError::source) is the node's error itself; a run that
/// resumes into the handler (after a crash, or after the handler itself failed) has only the error's text
/// as the checkpoint saved it, as LangGraph's resumed handler gets the error its checkpointer read back.
#[derive(Debug, Clone)]
pub struct NodeError {
    node: String,
    message: String,
    source: Option<Arc<Error>>,
}

impl NodeError {
    /// The failure of `node` with `source`, as the run that saw it has it.
    pub(crate) fn live(node: &str, message: String, source: Option<Error>) -> Self {
        Self { node: node.to_owned(), message, source: source.map(Arc::new) }
    }

    /// The failure of `node` as a checkpoint saved it (its error's text).
    pub(crate) fn saved(node: String, message: String) -> Self {
        Self { node, message, source: None }
    }

    /// The name of the node that failed.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The failure as text: the error the engine saved with the failed task (`__error__`).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The node's own error, in the run where it failed (`None` in a run that resumed into the handler).
    pub fn source(&self) -> Option<&Error> {
        self.source.as_deref()
    }
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The signal a node raises to pause the graph; carried as [`Error::ControlFlow`].
#[derive(Debug, Clone, PartialEq)]
pub struct GraphInterrupt(pub Vec<Interrupt>);

/// Interrupt bookkeeping of one task.
#[derive(Debug, Default)]
pub(crate) struct Scratchpad {
    /// How many `interrupt` calls the current execution made.
    pub(crate) counter: usize,
    /// Resume values already given to this task, in order.
    pub(crate) resume: Vec<Value>,
    /// Whether `resume` grew during this execution (so it must be saved).
    pub(crate) resume_changed: bool,
}

/// The custom stream writer of a node.
pub(crate) type CustomWriter = Arc<dyn Fn(Value) + Send + Sync>;

/// Builds a task's config the first time a node asks for it (most nodes never do): one per run, shared
/// by its tasks, each task's own parts read from its runtime.
pub(crate) trait ConfigSource: Send + Sync {
    /// The config of the task `task` serves.
    fn build(&self, task: &RuntimeInner, own: &TaskOwnConfig) -> RunnableConfig;
}

/// What a task's config takes from the task itself, beyond its name and [`TaskSite`]: the run's
/// [`ConfigSource`], the task's path and its triggers (named only where someone reads them).
pub(crate) struct TaskOwnConfig {
    pub(crate) source: Arc<dyn ConfigSource>,
    pub(crate) path: Arc<str>,
    pub(crate) triggers: Vec<String>,
}

/// A task's id: a hash, written out (as a hyphenated UUID) the first time something reads it. Most
/// tasks of a run without a checkpointer, stream or observer are never named.
#[derive(Clone)]
pub(crate) struct TaskId {
    hash: u128,
    text: std::sync::OnceLock<std::sync::Arc<str>>,
}

impl TaskId {
    /// The id of hash `hash`, not yet written out.
    pub(crate) fn from_hash(hash: u128) -> Self {
        Self { hash, text: std::sync::OnceLock::new() }
    }

    /// The id's text, shared.
    pub(crate) fn text(&self) -> &std::sync::Arc<str> {
        self.text.get_or_init(|| std::sync::Arc::from(hyphenated(self.hash).as_str()))
    }
}

/// An id known by its text (a functional-API task call's).
impl From<std::sync::Arc<str>> for TaskId {
    fn from(text: std::sync::Arc<str>) -> Self {
        Self { hash: 0, text: std::sync::OnceLock::from(text) }
    }
}

impl std::ops::Deref for TaskId {
    type Target = str;

    fn deref(&self) -> &str {
        self.text()
    }
}

impl std::fmt::Debug for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

/// `value` as a lower-case hyphenated UUID (`8-4-4-4-12` hex digits, most significant first), as
/// `uuid::Uuid::from_u128(value).hyphenated()` writes it, with a table in place of its general encoder (a
/// task id is made for every task of every step).
fn hyphenated(value: u128) -> HyphenatedId {
    // Each byte's two digits at once, from a table (a plain loop: the debug build the instruction-count
    // gate measures keeps every iterator adapter's call).
    const PAIRS: [[u8; 2]; 256] = {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut table = [[0u8; 2]; 256];
        let mut i = 0;
        while i < 256 {
            table[i] = [HEX[i >> 4], HEX[i & 0xf]];
            i += 1;
        }
        table
    };
    let bytes = value.to_be_bytes();
    let mut out = HyphenatedId([b'-'; 36]);
    // The 16 bytes, most significant first, skipping the hyphens after bytes 4, 6, 8 and 10.
    let (mut byte, mut at) = (0usize, 0usize);
    while byte < 16 {
        if byte == 4 || byte == 6 || byte == 8 || byte == 10 {
            at += 1;
        }
        let [high, low] = PAIRS[bytes[byte] as usize];
        out.0[at] = high;
        out.0[at + 1] = low;
        byte += 1;
        at += 2;
    }
    out
}

/// The 36 ASCII bytes of a hyphenated UUID.
struct HyphenatedId([u8; 36]);

impl HyphenatedId {
    fn as_str(&self) -> &str {
        // Only ASCII hex digits and hyphens are written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// Where a task runs, in shared handles; its [`ExecutionInfo`] is made from it when a node asks.
#[derive(Clone)]
pub(crate) struct TaskSite {
    /// The address of the checkpoint the task was planned from, when the run has a saver.
    pub(crate) address: Option<Arc<crate::checkpoint::CheckpointConfig>>,
    /// Without a saver: the thread id the caller gave.
    pub(crate) thread_id: Option<String>,
    /// Without a saver: the run's namespace.
    pub(crate) ns: String,
    pub(crate) task_id: TaskId,
    pub(crate) attempt: u32,
    pub(crate) step: i64,
}

impl TaskSite {
    fn info(&self) -> ExecutionInfo {
        let (thread_id, checkpoint_id, checkpoint_ns) = match &self.address {
            Some(a) => (Some(a.thread_id.clone()), a.checkpoint_id.clone(), a.checkpoint_ns.clone()),
            None => (self.thread_id.clone(), None, self.ns.clone()),
        };
        ExecutionInfo {
            thread_id,
            checkpoint_id,
            checkpoint_ns,
            task_id: self.task_id.to_string(),
            attempt: self.attempt,
            step: self.step,
        }
    }
}

pub(crate) struct RuntimeInner {
    pub(crate) node: Arc<str>,
    /// Boxed, as `info`: most nodes never ask, and the runtime stays small.
    pub(crate) config: std::sync::OnceLock<Box<RunnableConfig>>,
    /// How the config is built when first asked for (`None`: it is already set, or the default).
    pub(crate) own_config: Option<TaskOwnConfig>,
    /// Whether somebody listens to run events (then the node's run is traced).
    pub(crate) observed: bool,
    pub(crate) site: TaskSite,
    pub(crate) info: std::sync::OnceLock<Box<ExecutionInfo>>,
    pub(crate) stop: i64,
    pub(crate) scratchpad: Mutex<Scratchpad>,
    pub(crate) writer: Option<CustomWriter>,
    pub(crate) null_resume: Arc<Mutex<Option<Value>>>,
    pub(crate) context: Option<Arc<dyn Any + Send + Sync>>,
    pub(crate) store: Option<Arc<dyn crate::store::Store>>,
    /// Where the task calls of a functional-API entrypoint go (`None` in other graphs).
    pub(crate) calls: Option<Arc<dyn TaskCalls>>,
    /// The progress clock of a timed attempt (`None` when the node has no timeout).
    pub(crate) clock: Option<Arc<crate::timeout::AttemptClock>>,
    /// The failure an error handler's task handles (`None` for every other task).
    pub(crate) node_error: Option<Arc<NodeError>>,
}

/// The engine's record of a functional-API entrypoint's task calls, as a runtime carries it: the data
/// model passes it on; the engine (which implements it) and the functional API read it.
pub(crate) trait TaskCalls: Any + Send + Sync {
    /// The input of the run, as JSON (`None` for a task call).
    fn input(&self) -> Option<Value>;

    /// The same caller starting again (a retried node): its calls are numbered from the first again.
    fn restart(&self) -> Arc<dyn TaskCalls>;
}

/// Handed to nodes that ask for it: `|state: S, rt: &Runtime|` (sync) or `|state: S, rt: Runtime|` (async).
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("node", &self.inner.node)
            .field("info", self.execution_info())
            .finish()
    }
}

impl Runtime {
    /// The node's name.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// The config of this task's run (pass it to runnables called inside the node so their events and
    /// tokens are attributed to it).
    pub fn config(&self) -> &RunnableConfig {
        self.inner.config.get_or_init(|| {
            Box::new(match &self.inner.own_config {
                Some(own) => own.source.build(&self.inner, own),
                None => RunnableConfig::default(),
            })
        })
    }

    /// Thread, checkpoint, namespace, task id, attempt, step.
    pub fn execution_info(&self) -> &ExecutionInfo {
        self.inner.info.get_or_init(|| Box::new(self.inner.site.info()))
    }

    /// Supersteps left before the recursion limit (LangGraph's `RemainingSteps`).
    pub fn remaining_steps(&self) -> i64 {
        self.inner.stop - self.inner.site.step
    }

    /// Whether this is the last step the recursion limit allows (LangGraph's `IsLastStep`).
    pub fn is_last_step(&self) -> bool {
        self.inner.site.step == self.inner.stop - 1
    }

    /// The task's namespace, `<node>:<task id>`: interrupt ids and subgraph namespaces derive from it.
    pub(crate) fn task_ns(&self) -> String {
        task_ns(&self.inner.node, &self.inner.site.task_id)
    }

    /// The context passed to the run, if it is a `C`.
    pub fn context<C: Any>(&self) -> Option<&C> {
        self.inner.context.as_ref()?.downcast_ref::<C>()
    }

    /// The failure this node handles, when it runs as an error handler (LangGraph's `error: NodeError`
    /// parameter); `None` in every other node. See
    /// [`StateGraph::add_error_handler`](crate::StateGraph::add_error_handler).
    pub fn node_error(&self) -> Option<&NodeError> {
        self.inner.node_error.as_deref()
    }

    /// The graph's long-term memory store, if one was compiled in (a subgraph sees its parent's).
    pub fn store(&self) -> Option<&Arc<dyn crate::store::Store>> {
        self.inner.store.as_ref()
    }

    /// Tells the engine the node is making progress: refreshes the idle timeout of its
    /// [`TimeoutPolicy`](crate::TimeoutPolicy) (under either [`RefreshOn`](crate::RefreshOn)); does
    /// nothing for a node without one. For work that shows no other progress (a long computation, a
    /// call outside weft).
    pub fn heartbeat(&self) {
        if let Some(clock) = &self.inner.clock {
            clock.heartbeat();
        }
    }

    /// Sends `value` to the `custom` stream mode (nothing happens when nobody streams it). Refreshes
    /// the node's idle timeout under [`RefreshOn::Auto`](crate::RefreshOn::Auto), streamed or not.
    pub fn write<T: Serialize>(&self, value: &T) {
        if let Some(clock) = &self.inner.clock {
            clock.touch();
        }
        if let Some(writer) = &self.inner.writer {
            writer(
                serde_json::to_value(value)
                    .unwrap_or_else(|e| Value::String(format!("<unserializable: {e}>"))),
            );
        }
    }

    /// Pauses the graph with `value` shown to the caller, or returns the resume value when the run is
    /// being resumed. On resume the node runs again from the top and its k-th `interrupt` returns the k-th
    /// resume value, so code before an interrupt must be safe to repeat.
    ///
    /// Use with `?`: the error it returns is the pause signal, which the engine catches.
    pub fn interrupt<T: DeserializeOwned>(&self, value: impl Serialize) -> Result<T> {
        let resume = self.next_resume()?;
        match resume {
            Some(v) => serde_json::from_value(v).map_err(|e| {
                Error::InvalidInput(format!(
                    "resume value for node '{}' has the wrong shape: {e}",
                    self.node()
                ))
            }),
            None => {
                let value = serde_json::to_value(value)?;
                let id = self.current_interrupt_id();
                let interrupt = Interrupt { value, id };
                Err(Error::ControlFlow(ControlFlow::new(
                    format!("graph interrupted in node '{}'", self.node()),
                    GraphInterrupt(vec![interrupt]),
                )))
            }
        }
    }

    fn next_resume(&self) -> Result<Option<Value>> {
        let mut pad = self.inner.scratchpad.lock().map_err(|_| Error::msg("interrupt state poisoned"))?;
        let k = pad.counter;
        pad.counter += 1;
        if let Some(v) = pad.resume.get(k) {
            return Ok(Some(v.clone()));
        }
        let taken = self.inner.null_resume.lock().map_err(|_| Error::msg("interrupt state poisoned"))?.take();
        if let Some(v) = taken {
            pad.resume.push(v.clone());
            pad.resume_changed = true;
            return Ok(Some(v));
        }
        // Not answered: undo the count so the id below names this interrupt.
        pad.counter -= 1;
        Ok(None)
    }

    fn current_interrupt_id(&self) -> String {
        let answered = self.inner.scratchpad.lock().map_or(0, |p| p.resume.len());
        interrupt_id(&self.task_ns(), answered)
    }
}

/// A task's namespace, `<node>:<task id>`.
pub(crate) fn task_ns(node: &str, task_id: &str) -> String {
    format!("{node}:{task_id}")
}

/// The stable id of the interrupt of a task namespace after `answered` resumes.
pub(crate) fn interrupt_id(task_ns: &str, answered: usize) -> String {
    let key = if answered == 0 { task_ns.to_owned() } else { format!("{task_ns}|{answered}") };
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes()).simple().to_string()
}
