//! [`AgentRuntime`]: what a middleware hook reaches besides the state (LangGraph's `Runtime[ContextT]`):
//! the typed context, the store, the stream writer, interrupts.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_graph::{ExecutionInfo, Runtime, Store};
use weft_runnable_core::{Error, Result, RunnableConfig};

/// The runtime of one agent node, with the run's context as a `C` (LangChain's `context_schema`).
///
/// The context is what the caller passed in [`RunOptions::context`](weft_graph::RunOptions): a `C`
/// itself, or JSON (as the server passes a run's `context`), read into a `C` once per node.
pub struct AgentRuntime<C = ()> {
    runtime: Runtime,
    parsed: Option<Arc<C>>,
}

impl<C> Clone for AgentRuntime<C> {
    fn clone(&self) -> Self {
        Self { runtime: self.runtime.clone(), parsed: self.parsed.clone() }
    }
}

impl<C: Any> fmt::Debug for AgentRuntime<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentRuntime")
            .field("runtime", &self.runtime)
            .field("context", &self.context().is_some())
            .finish()
    }
}

impl<C: ContextType> AgentRuntime<C> {
    /// The runtime of a graph task, its context read as a `C`; a JSON context that is not a `C` is an
    /// error naming the type.
    pub fn new(runtime: Runtime) -> Result<Self> {
        let parsed = if runtime.context::<C>().is_some() { None } else { C::from_json_context(&runtime)? };
        Ok(Self { runtime, parsed })
    }
}

impl<C: Any> AgentRuntime<C> {
    /// The run's context, when the caller gave one.
    pub fn context(&self) -> Option<&C> {
        self.runtime.context::<C>().or(self.parsed.as_deref())
    }

    /// The graph task's runtime (interrupts, the stream writer, execution info).
    pub fn graph(&self) -> &Runtime {
        &self.runtime
    }

    /// The config of this task's run: pass it to runnables called inside a hook.
    pub fn config(&self) -> &RunnableConfig {
        self.runtime.config()
    }

    /// The long-term memory store, when the agent has one.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.runtime.store()
    }

    /// Thread, checkpoint, task, step.
    pub fn execution_info(&self) -> &ExecutionInfo {
        self.runtime.execution_info()
    }

    /// Sends `value` to the `custom` stream mode.
    pub fn write<T: Serialize>(&self, value: &T) {
        self.runtime.write(value);
    }

    /// Pauses the run with `value`, or returns the resume value (see [`Runtime::interrupt`]).
    pub fn interrupt<T: DeserializeOwned>(&self, value: impl Serialize) -> Result<T> {
        self.runtime.interrupt(value)
    }
}

/// A type an agent's context can be: `()` (no context) or any type that reads from JSON.
pub trait ContextType: Send + Sync + 'static {
    /// The run's context read from the JSON the caller passed (as the server passes a run's
    /// `context`), or `None` when it passed none.
    fn from_json_context(runtime: &Runtime) -> Result<Option<Arc<Self>>>;
}

impl<C: DeserializeOwned + Send + Sync + 'static> ContextType for C {
    fn from_json_context(runtime: &Runtime) -> Result<Option<Arc<Self>>> {
        if std::any::TypeId::of::<C>() == std::any::TypeId::of::<()>() {
            return Ok(None);
        }
        let json = match (runtime.context::<Value>(), runtime.context::<serde_json::Map<String, Value>>()) {
            (Some(v), _) => v.clone(),
            (None, Some(map)) => Value::Object(map.clone()),
            (None, None) => return Ok(None),
        };
        let empty = json.is_null() || json.as_object().is_some_and(serde_json::Map::is_empty);
        match serde_json::from_value::<C>(json) {
            Ok(context) => Ok(Some(Arc::new(context))),
            // No context given (the server sends `{}`) for a type that needs fields: none.
            Err(_) if empty => Ok(None),
            Err(e) => Err(Error::InvalidInput(format!(
                "the run's context is not a {}: {e}",
                std::any::type_name::<C>()
            ))),
        }
    }
}
