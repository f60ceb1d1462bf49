//! The functional API: LangGraph's `@entrypoint` and `@task` in Rust.
//!
//! An [`entrypoint`](fn@entrypoint) is an async function of `(input, previous, runtime)` run as a graph of one node:
//! compiled like any [`StateGraph`] (checkpointer, store, cache, durability), it streams, pauses at
//! interrupts and resumes, keeps `previous` (what the thread's last run returned or saved) and shows its
//! last return value in `get_state`. A [`task`](fn@task) is an async function whose calls made inside the
//! entrypoint are saved as they finish, so a run resumed after an interrupt (or a failure) gets their
//! results back without running them again. A [`Final`] returns one value and saves another for the next
//! run (LangGraph's `entrypoint.final`). [`interrupt`] pauses the entrypoint or task running now (a task
//! paused runs again from the top when resumed, and gets its answer there). The attributes
//! [`#[entrypoint]`](macro@entrypoint) and [`#[task]`](macro@task) make plain `async fn`s into the same.
//!
//! ```
//! use std::sync::Arc;
//!
//! use weft_graph::func::{Final, entrypoint, task};
//! use weft_graph::{Command, CompileConfig, InMemorySaver};
//! use weft_runnable_core::RunnableConfig;
//! # tokio_test::block_on(async {
//! let double = task("double", |x: i64| async move { Ok(x * 2) });
//! let workflow = entrypoint("workflow", move |numbers: Vec<i64>, previous: Option<i64>, rt| {
//!     let double = double.clone();
//!     async move {
//!         // Calls run together when awaited together.
//!         let doubled = futures::future::try_join_all(numbers.into_iter().map(|n| double.call(n))).await?;
//!         let sum: i64 = doubled.iter().sum();
//!         let ok: bool = rt.interrupt(format!("sum is {sum}, keep it?"))?;
//!         // Return the sum (or nothing), and remember the running total as `previous`.
//!         let total = previous.unwrap_or(0) + if ok { sum } else { 0 };
//!         Ok(Final::new(ok.then_some(sum), total))
//!     }
//! })
//! .compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())))
//! .unwrap();
//!
//! let thread = RunnableConfig::default().with_configurable("thread_id", "1");
//! let paused = workflow.invoke(vec![1, 2, 3], &thread).await.unwrap();
//! assert_eq!(paused.interrupts[0].value, "sum is 12, keep it?");
//! // Resumed, the entrypoint runs again from the top; the three `double` calls return their saved results.
//! let done = workflow.invoke(Command::resume(true), &thread).await.unwrap();
//! assert_eq!(done.value.value(), Some(&Some(12)));
//! assert_eq!(done.value.previous(), Some(&12));
//! # });
//! ```

mod node;
pub(crate) mod state;
mod task;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt as _;
use weft_runnable_core::Result;

pub use node::EntrypointNode;
pub use state::{END_CHANNEL, FuncState, FuncUpdate, FuncValue, INPUT_CHANNEL, PREVIOUS_CHANNEL};
pub use task::{Task, TaskFuture, interrupt, runtime, task};
pub use weft_macros::{entrypoint, task};

use crate::builder::StateGraph;
use crate::compiled::{GraphInput, IntoGraphInput};
use crate::runtime::Runtime;
use crate::types::{END, START};

/// Errors of the functional API (carried as [`Error::Custom`](weft_runnable_core::Error::Custom) out of
/// task calls, so that `?` passes them on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FuncError {
    /// A task was called outside an entrypoint (in a plain graph node, a spawned tokio task, or outside
    /// any run), where its result could not be saved.
    #[error(
        "task '{task}' was called outside an entrypoint: call tasks inside an entrypoint or another task"
    )]
    OutsideEntrypoint {
        /// The task.
        task: String,
    },
    /// A task's result could not be turned into JSON to be saved, or a saved result does not read back as
    /// the task's result type.
    #[error("the result of task '{task}' cannot be saved or read back: {message}")]
    SavedResult {
        /// The task.
        task: String,
        /// What went wrong.
        message: String,
    },
    /// [`interrupt`] was called outside an entrypoint or a task.
    #[error("interrupt was called outside an entrypoint or a task")]
    InterruptOutsideEntrypoint,
    /// The entrypoint ran without an input (a run continued with no input pending).
    #[error("entrypoint '{entrypoint}' has no input to run on")]
    NoInput {
        /// The entrypoint.
        entrypoint: String,
    },
}

/// What an entrypoint returns when the value it saves for the thread's next run (`previous`) is not the
/// value it returns (LangGraph's `entrypoint.final`). An entrypoint returning a plain value saves that
/// value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Final<O, P> {
    /// What the run returns.
    pub value: O,
    /// What the next run on the thread receives as `previous`.
    pub save: P,
}

impl<O, P> Final<O, P> {
    /// Returns `value`, saves `save`.
    pub fn new(value: O, save: P) -> Self {
        Self { value, save }
    }
}

impl<T: Clone> From<T> for Final<T, T> {
    fn from(value: T) -> Self {
        Self { save: value.clone(), value }
    }
}

/// An entrypoint named `name` running `f`: a graph of one node, named `name`, that runs
/// `f(input, previous, runtime)` on each input. `previous` is what the thread's last finished run
/// returned (or saved with [`Final`]); `None` on a new thread or without a checkpointer. Inside `f`,
/// [`Task::call`] runs tasks whose results are saved with the run, and `runtime.interrupt(..)` pauses it.
///
/// Compile the graph it returns (`compile` or `compile_with`, for a checkpointer, a store or a cache):
/// the run's input is `I` (or a [`Command`](crate::Command) to resume), and its state a
/// [`FuncState`], whose [`value`](FuncState::value) is the last return value. In `updates` mode the
/// entrypoint and each task call stream a [`StreamData::Returned`](crate::StreamData::Returned) chunk
/// with the value they returned. On resume the entrypoint runs again from the top, so its code before an
/// interrupt must be safe to repeat; task calls are not repeated.
pub fn entrypoint<I, O, P, R, F, Fut>(name: impl Into<String>, f: F) -> StateGraph<FuncState<I, O, P>>
where
    I: FuncValue,
    O: FuncValue,
    P: FuncValue,
    R: Into<Final<O, P>>,
    F: Fn(I, Option<P>, Runtime) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R>> + Send + 'static,
{
    let name = name.into();
    let body: node::Body<I, O, P> =
        Arc::new(move |input, previous, rt| f(input, previous, rt).map(|r| r.map(Into::into)).boxed());
    let mut graph = StateGraph::new();
    graph.functional = true;
    graph.add_node(name.as_str(), EntrypointNode::new(&name, body).into_node());
    graph.add_edge(START, name.as_str());
    graph.add_edge(name.as_str(), END);
    graph
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> IntoGraphInput<FuncState<I, O, P>> for I {
    fn into_graph_input(self) -> GraphInput<FuncState<I, O, P>> {
        GraphInput::Update(vec![FuncUpdate::input(self)])
    }
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> IntoGraphInput<FuncState<I, O, P>> for FuncUpdate<I, O, P> {
    fn into_graph_input(self) -> GraphInput<FuncState<I, O, P>> {
        GraphInput::Update(vec![self])
    }
}
