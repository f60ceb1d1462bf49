//! `task`: an async function whose calls inside an entrypoint are saved, so a resumed run reuses their
//! results instead of running them again (LangGraph's `@task`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use weft_runnable_core::{Error, Result};

use crate::func::FuncError;
use crate::func::state::FuncValue;
use crate::pregel::calls::{Call, CallSite};
use crate::pregel::execute::{control_interrupt, resume_to_save};
use crate::pregel::task_runtime::with_clock;
use crate::retry::RetryPolicy;
use crate::runtime::{GraphInterrupt, Runtime};
use crate::timeout::{AttemptClock, TimeoutPolicy, run_timed};

/// The entrypoint or task running now: where its task calls go, and its runtime.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) site: Arc<CallSite>,
    pub(crate) runtime: Runtime,
}

tokio::task_local! {
    /// The caller of task calls made by the code running now: an entrypoint or a task.
    static CALLER: Caller;
}

/// Runs `fut` with `caller` as the caller of the tasks it calls.
pub(crate) fn with_caller<F: Future>(caller: Caller, fut: F) -> impl Future<Output = F::Output> {
    CALLER.scope(caller, fut)
}

/// The runtime of the entrypoint or task running now (`None` outside an entrypoint): its config, store,
/// context and stream writer, and [`interrupt`] for its pauses.
pub fn runtime() -> Option<Runtime> {
    CALLER.try_with(|c| c.runtime.clone()).ok()
}

/// Pauses the entrypoint or task running now with `value` shown to the caller, or returns the answer when
/// the run is resumed (LangGraph's `interrupt()` inside an `@entrypoint` or `@task`). Inside a task the
/// pause is the task's: the resumed entrypoint calls the task again, which runs from the top and gets its
/// answer here. Use with `?`, as [`Runtime::interrupt`]; outside an entrypoint it is
/// [`FuncError::InterruptOutsideEntrypoint`].
pub fn interrupt<T: serde::de::DeserializeOwned>(value: impl Serialize) -> Result<T> {
    match runtime() {
        Some(rt) => rt.interrupt(value),
        None => Err(Error::Custom(Arc::new(FuncError::InterruptOutsideEntrypoint))),
    }
}

type TaskBody<A, T> = Arc<dyn Fn(A) -> BoxFuture<'static, Result<T>> + Send + Sync>;

/// A task of the functional API: an async function of one input whose calls made inside an
/// [`entrypoint`](fn@crate::func::entrypoint) are tasks of the entrypoint's run. Each call's result is saved
/// with the run (as a pending write of its step, LangGraph's `__return__`), so after an interrupt or a
/// failure, the resumed entrypoint gets the result of every call that finished without running it again.
///
/// [`call`](Task::call) returns a future: await it, or await several together (`futures::join!`,
/// `futures::future::try_join_all`) to run them concurrently. Calls are numbered in the order they are
/// made, and that number is what a resumed run finds a result by, so the entrypoint must make its calls
/// in the same order each time it runs (as in LangGraph). Calling a task anywhere but inside an
/// entrypoint or another task (a plain graph node, a spawned tokio task, outside any run) is an error,
/// [`FuncError::OutsideEntrypoint`].
///
/// Made with [`task`]. Cloning is cheap.
pub struct Task<A, T> {
    name: Arc<str>,
    body: TaskBody<A, T>,
    retry: Vec<RetryPolicy>,
    timeout: Option<TimeoutPolicy>,
}

impl<A, T> Clone for Task<A, T> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            body: Arc::clone(&self.body),
            retry: self.retry.clone(),
            timeout: self.timeout,
        }
    }
}

impl<A, T> std::fmt::Debug for Task<A, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.name)
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A task named `name` running `f` (see [`Task`]).
///
/// ```
/// use weft_graph::func::task;
///
/// let double = task("double", |x: i64| async move { Ok(x * 2) });
/// assert_eq!(double.name(), "double");
/// ```
pub fn task<A, T, F, Fut>(name: impl Into<String>, f: F) -> Task<A, T>
where
    A: Serialize + Clone + Send + 'static,
    T: FuncValue,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let body: TaskBody<A, T> = Arc::new(move |input| f(input).boxed());
    Task { name: Arc::from(name.into()), body, retry: Vec::new(), timeout: None }
}

impl<A: Serialize + Clone + Send + 'static, T: FuncValue> Task<A, T> {
    /// The task's name: its `updates` chunks and task events carry it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Limits each attempt of a call as `policy` says (LangGraph's `@task(timeout=...)`): a call past
    /// it fails with a [`NodeTimeoutError`](crate::NodeTimeoutError) naming the task, which the task's
    /// retry policy may retry. `runtime().heartbeat()` inside the task is its progress.
    pub fn with_timeout(mut self, policy: TimeoutPolicy) -> Self {
        self.timeout = Some(policy);
        self
    }

    /// Retries a failed call as `policy` says (the errors it retries, attempts, backoff). Called again, it
    /// adds a policy: the first whose `retry_on` matches the error applies.
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry.push(policy);
        self
    }

    /// Calls the task: the call is numbered now, and runs when the future is polled. The future's output
    /// is the task's result, or the error it failed with; an interrupt raised inside the task travels up
    /// the same way (return it with `?` to pause the entrypoint).
    pub fn call(&self, input: A) -> TaskFuture<T> {
        let call = match CALLER.try_with(|c| (c.site.next_call(&self.name), c.runtime.clone())) {
            Ok(call) => call,
            Err(_) => {
                let err = FuncError::OutsideEntrypoint { task: self.name.to_string() };
                return TaskFuture {
                    inner: futures::future::ready(Err(Error::Custom(Arc::new(err)))).boxed(),
                };
            }
        };
        let (body, policies) =
            (Arc::clone(&self.body), Policies { retry: self.retry.clone(), timeout: self.timeout });
        TaskFuture { inner: run_call(call, body, policies, input).boxed() }
    }
}

/// A task's retry and timeout policies.
struct Policies {
    retry: Vec<RetryPolicy>,
    timeout: Option<TimeoutPolicy>,
}

async fn run_call<A: Serialize + Clone + Send + 'static, T: FuncValue>(
    (call, caller): (Call, Runtime),
    body: TaskBody<A, T>,
    Policies { retry, timeout }: Policies,
    input: A,
) -> Result<T> {
    if let Some(saved) = call.saved() {
        return serde_json::from_value(saved).map_err(|e| {
            Error::Custom(Arc::new(FuncError::SavedResult {
                task: call.name.to_string(),
                message: e.to_string(),
            }))
        });
    }
    call.started(|| serde_json::to_value(&input).unwrap_or(Value::Null));
    let mut attempt = 1u32;
    let result = loop {
        let mut runtime = call.runtime(&caller);
        let clock = timeout.map(|p| Arc::new(AttemptClock::new(p.refreshed_on())));
        if let Some(clock) = &clock {
            runtime = with_clock(&runtime, Arc::clone(clock));
        }
        let scope = Caller { site: Arc::new(call.site()), runtime: runtime.clone() };
        let call_fut = with_caller(scope, body(input.clone()));
        let result = match (&timeout, &clock) {
            (Some(policy), Some(clock)) => run_timed(policy, clock, &call.name, call_fut).await,
            _ => call_fut.await,
        };
        if let Err(err) = &result {
            if let Some(GraphInterrupt(list)) = control_interrupt(err) {
                call.paused(&list, resume_to_save(&runtime));
            }
        }
        match result {
            Err(err) if !err.is_control_flow() => match crate::retry::next_retry(&retry, &err, attempt) {
                Some(wait) => {
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                None => break Err(err),
            },
            other => break other,
        }
    };
    match result {
        Ok(value) => {
            let json = serde_json::to_value(&value).map_err(|e| {
                Error::Custom(Arc::new(FuncError::SavedResult {
                    task: call.name.to_string(),
                    message: e.to_string(),
                }))
            })?;
            call.finished(json);
            Ok(value)
        }
        Err(err) => {
            if !err.is_control_flow() {
                call.failed(err.to_string());
            }
            Err(err)
        }
    }
}

/// The result of a task [call](Task::call), to await.
#[must_use = "a task call runs only when its future is awaited"]
pub struct TaskFuture<T> {
    inner: BoxFuture<'static, Result<T>>,
}

impl<T> std::fmt::Debug for TaskFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskFuture").finish_non_exhaustive()
    }
}

impl<T> Future for TaskFuture<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}
