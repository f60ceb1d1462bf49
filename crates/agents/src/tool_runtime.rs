//! [`ToolRuntime`]: what a tool running in a graph's tool node reaches besides its arguments
//! (LangGraph's `ToolRuntime`): the graph's state, the run's context, the store, the call's id, the
//! stream writer.

use std::any::Any;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_graph::{Runtime, State, Store};
use weft_runnable_core::{Result, RunnableConfig, ToolContext};

/// The state a tool node hands its tools, typed (read back with [`ToolRuntime::state`]), and the id of
/// the graph task it belongs to: a config carried into a graph run inside the task (a tool running a
/// graph) keeps it, but that graph's tasks never read it (LangGraph 1.2.23's rule for `Send` tasks).
#[derive(Clone)]
pub(crate) struct ToolState {
    state: Arc<dyn Any + Send + Sync>,
    task_id: String,
}

impl ToolState {
    pub(crate) fn new<S: State>(state: S, runtime: &Runtime) -> Self {
        Self { state: Arc::new(state), task_id: runtime.execution_info().task_id.clone() }
    }
}

/// What a tool running in a [`ToolNode`](crate::ToolNode) (or an agent's `tools` node) reaches:
/// LangGraph's `ToolRuntime`, read from the tool's [`ToolContext`].
///
/// Outside a graph every part is `None` (the call id aside, when the caller gave one).
///
/// ```
/// use serde_json::{Value, json};
/// use weft_agents::ToolRuntime;
/// use weft_agents::agent::AgentState;
/// use weft_runnable_core::{StructuredTool, ToolContext, ToolOutput};
///
/// let count = StructuredTool::from_fn("count", "Counts the messages.", json!({"type": "object"}),
///     |_args: Value, ctx: ToolContext| async move {
///         let rt = ToolRuntime::of(&ctx);
///         let n = rt.state::<AgentState>().map_or(0, |s| s.messages().len());
///         rt.write(&json!({"counted": n}));
///         Ok(ToolOutput::text(n.to_string()))
///     });
/// # let _ = count;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ToolRuntime<'a> {
    ctx: &'a ToolContext,
}

impl<'a> ToolRuntime<'a> {
    /// The runtime of the tool whose context is `ctx`.
    pub fn of(ctx: &'a ToolContext) -> Self {
        Self { ctx }
    }

    /// The graph's state as of the step the tool runs in, when it is an `S`.
    pub fn state<S: State>(&self) -> Option<&'a S> {
        let saved = self.ctx.config().extensions.get::<ToolState>()?;
        // Only in the task that saved it, not in a graph run inside that task.
        if self.graph()?.execution_info().task_id != saved.task_id {
            return None;
        }
        saved.state.downcast_ref::<S>()
    }

    /// The graph task's runtime (interrupts, execution info).
    pub fn graph(&self) -> Option<&'a Runtime> {
        self.ctx.config().extensions.get::<Runtime>()
    }

    /// The run's context, when the caller passed a `C`.
    pub fn context<C: Any>(&self) -> Option<&'a C> {
        self.graph()?.context::<C>()
    }

    /// The run's context read as a `C`: the value itself (cloned) when the caller passed a `C`, read from
    /// JSON when it passed JSON (as the server does); `None` without one.
    pub fn context_as<C: DeserializeOwned + Clone + Any>(&self) -> Result<Option<C>> {
        let Some(graph) = self.graph() else { return Ok(None) };
        if let Some(c) = graph.context::<C>() {
            return Ok(Some(c.clone()));
        }
        match graph.context::<serde_json::Value>() {
            Some(json) => Ok(Some(serde_json::from_value(json.clone())?)),
            None => Ok(None),
        }
    }

    /// The graph's long-term memory store, if it has one.
    pub fn store(&self) -> Option<&'a Arc<dyn Store>> {
        self.graph()?.store()
    }

    /// The id of the tool call being answered.
    pub fn tool_call_id(&self) -> Option<&'a str> {
        self.ctx.tool_call_id()
    }

    /// The config of the tool's run (pass it to runnables the tool calls).
    pub fn config(&self) -> &'a RunnableConfig {
        self.ctx.config()
    }

    /// Sends `value` to the `custom` stream mode (nothing happens outside a graph or when nobody streams
    /// it).
    pub fn write<T: Serialize>(&self, value: &T) {
        if let Some(graph) = self.graph() {
            graph.write(value);
        }
    }

    /// Pauses the graph with `value`, or returns the resume value (see [`Runtime::interrupt`]); outside a
    /// graph it is an error.
    pub fn interrupt<T: DeserializeOwned>(&self, value: impl Serialize) -> Result<T> {
        match self.graph() {
            Some(graph) => graph.interrupt(value),
            None => {
                Err(weft_runnable_core::Error::msg("interrupt() needs a graph: the tool ran outside one"))
            }
        }
    }
}
