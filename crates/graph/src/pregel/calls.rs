//! Task calls of the functional API made inside a running task: their ids, the results a resumed step
//! saved for them, and the writes they leave for the step to save.
//!
//! As in LangGraph, a call is a push task of the step its caller runs in: its id derives from the step's
//! checkpoint, the caller's task path and the call's position among the caller's calls, so the same code
//! resumed from the same checkpoint calls the same ids and finds the results saved for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::checkpoint::{ChannelName, special};
use crate::pregel::run::Ctx;
use crate::pregel::saved::SavedWrites;
use crate::pregel::task::task_id;
use crate::state::State;
use crate::stream::{StreamData, StreamMode};

/// The channel a call task's result is saved under (LangGraph's `__return__`).
pub(crate) const RETURN: &str = "__return__";

/// Writes of one call task waiting to be saved: task id, task path, writes.
pub(crate) type CallWrites = (Arc<str>, Arc<str>, Vec<(ChannelName, Value)>);

/// What a call task reports to the run's stream.
pub(crate) enum CallEvent {
    /// It started, with its input.
    Start { id: Arc<str>, name: Arc<str>, input: Value },
    /// It returned `value`.
    Done { id: Arc<str>, name: Arc<str>, value: Value },
    /// It failed.
    Failed { id: Arc<str>, name: Arc<str>, error: String },
}

type Emit = Arc<dyn Fn(CallEvent) + Send + Sync>;

/// What the task calls of one step share.
pub(crate) struct CallStep {
    checkpoint_id: String,
    ns: String,
    step: i64,
    /// The results of the step's call tasks that finished (before the step was resumed, or in an earlier
    /// attempt of their caller), by task id.
    returned: Mutex<HashMap<String, Value>>,
    /// The answers each call task received before the step was resumed, by task id.
    resumes: HashMap<String, Vec<Value>>,
    /// Answers given by interrupt id with the resume.
    resume_by_id: serde_json::Map<String, Value>,
    /// Writes of finished calls, saved by the step (in order) when their caller's task ends.
    outbox: Mutex<Vec<CallWrites>>,
    /// The names of the tasks called in the step.
    called: Mutex<std::collections::BTreeSet<Arc<str>>>,
    /// Signals a write waiting in the outbox.
    kept: tokio::sync::Notify,
    emit: Option<Emit>,
}

impl CallStep {
    /// The call bookkeeping of a step planned from checkpoint `checkpoint_id`, resumed with `saved`.
    pub(crate) fn new<S: State>(
        ctx: &Ctx<'_, S>,
        saved: &SavedWrites,
        checkpoint_id: &str,
        step: i64,
    ) -> Self {
        let returned = saved
            .by_task
            .iter()
            .filter_map(|(id, writes)| {
                writes.iter().find(|(c, _)| c == RETURN).map(|(_, v)| (id.clone(), v.clone()))
            })
            .collect();
        let emit = ctx.sink.filter(|s| s.modes.has(StreamMode::Updates) || s.modes.tasks()).map(|sink| {
            let sink = sink.share();
            Arc::new(move |event: CallEvent| match event {
                CallEvent::Start { id, name, input } => {
                    if sink.modes.tasks() {
                        sink.send(StreamData::TaskStart {
                            id: id.to_string(),
                            name: name.to_string(),
                            input,
                            triggers: vec![special::PUSH.to_owned()],
                            step,
                        });
                    }
                }
                CallEvent::Done { id, name, value } => {
                    if sink.modes.has(StreamMode::Updates) {
                        sink.send(StreamData::Returned { node: name.to_string(), value: value.clone() });
                    }
                    if sink.modes.tasks() {
                        sink.send(StreamData::TaskResult {
                            id: id.to_string(),
                            name: name.to_string(),
                            error: None,
                            result: vec![(RETURN.to_owned(), value)],
                            interrupts: Vec::new(),
                            step,
                        });
                    }
                }
                CallEvent::Failed { id, name, error } => {
                    if sink.modes.tasks() {
                        sink.send(StreamData::TaskResult {
                            id: id.to_string(),
                            name: name.to_string(),
                            error: Some(error),
                            result: Vec::new(),
                            interrupts: Vec::new(),
                            step,
                        });
                    }
                }
            }) as Emit
        });
        Self {
            checkpoint_id: checkpoint_id.to_owned(),
            ns: ctx.ns.clone(),
            step,
            returned: Mutex::new(returned),
            resumes: saved.by_task.keys().map(|id| (id.clone(), saved.resume_values(id))).collect(),
            resume_by_id: ctx.resume_by_id.clone(),
            outbox: Mutex::new(Vec::new()),
            called: Mutex::default(),
            kept: tokio::sync::Notify::new(),
            emit,
        }
    }

    /// The names of the tasks called in the step so far.
    pub(crate) fn called(&self) -> std::collections::BTreeSet<Arc<str>> {
        self.called.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Resolves when a call's writes are waiting to be saved (at once if some wait already).
    pub(crate) async fn finished(&self) {
        self.kept.notified().await;
    }

    /// Takes the writes waiting to be saved, in the order the calls finished.
    pub(crate) fn take_writes(&self) -> Vec<CallWrites> {
        self.outbox.lock().map(|mut w| std::mem::take(&mut *w)).unwrap_or_default()
    }
}

/// A caller of tasks: a running task, or a running task call (calls may nest).
pub(crate) struct CallSite {
    step: Arc<CallStep>,
    /// The caller's task path.
    path: Arc<str>,
    /// How many calls the caller has made.
    counter: AtomicUsize,
    /// The input of the run, for an entrypoint's task (`None` for a task call).
    input: Option<Value>,
}

/// One call of a task: where it is saved, and what it finds there.
pub(crate) struct Call {
    pub(crate) id: Arc<str>,
    pub(crate) path: Arc<str>,
    pub(crate) name: Arc<str>,
    step: Arc<CallStep>,
}

impl CallSite {
    /// The calls of the task at `path`, which runs on `input` (an entrypoint's task: the run's input).
    pub(crate) fn new(step: Arc<CallStep>, path: Arc<str>, input: Option<Value>) -> Self {
        Self { step, path, counter: AtomicUsize::new(0), input }
    }

    /// The input of the run, as JSON (`None` for a task call).
    pub(crate) fn input(&self) -> Option<Value> {
        self.input.clone()
    }

    /// The same caller starting again (a retried node): its calls are numbered from the first again.
    pub(crate) fn restart(&self) -> Self {
        Self::new(Arc::clone(&self.step), Arc::clone(&self.path), self.input.clone())
    }

    /// The next call this caller makes, of task `name`.
    pub(crate) fn next_call(&self, name: &Arc<str>) -> Call {
        let index = self.counter.fetch_add(1, Ordering::SeqCst);
        let path: Arc<str> = Arc::from(format!("~{}, {}, {index:010}, True", special::PUSH, self.path));
        let step = &self.step;
        let id = task_id(&step.checkpoint_id, &step.ns, step.step, name, &format!("call:{path}"));
        if let Ok(mut called) = step.called.lock() {
            called.insert(Arc::clone(name));
        }
        Call { id: Arc::clone(id.text()), path, name: Arc::clone(name), step: Arc::clone(step) }
    }
}

impl crate::runtime::TaskCalls for CallSite {
    fn input(&self) -> Option<Value> {
        CallSite::input(self)
    }

    fn restart(&self) -> Arc<dyn crate::runtime::TaskCalls> {
        Arc::new(CallSite::restart(self))
    }
}

/// The call site a runtime carries: an entrypoint's task's, or a task call's (`None` in other graphs).
pub(crate) fn site_of(runtime: &crate::runtime::Runtime) -> Option<Arc<CallSite>> {
    let calls: Arc<dyn crate::runtime::TaskCalls> = Arc::clone(runtime.inner.calls.as_ref()?);
    let calls: Arc<dyn std::any::Any + Send + Sync> = calls;
    calls.downcast::<CallSite>().ok()
}

impl Call {
    /// The result this call already has: saved before the step was resumed, or from an earlier attempt
    /// of its caller.
    pub(crate) fn saved(&self) -> Option<Value> {
        self.step.returned.lock().ok()?.get(&*self.id).cloned()
    }

    /// A site for the calls this call makes.
    pub(crate) fn site(&self) -> CallSite {
        CallSite::new(Arc::clone(&self.step), Arc::clone(&self.path), None)
    }

    /// Reports the call's start to the stream.
    pub(crate) fn started(&self, input: impl FnOnce() -> Value) {
        if let Some(emit) = &self.step.emit {
            emit(CallEvent::Start { id: Arc::clone(&self.id), name: Arc::clone(&self.name), input: input() });
        }
    }

    /// The runtime the call runs with: its own id, name and answers, the rest its caller's.
    pub(crate) fn runtime(&self, caller: &crate::runtime::Runtime) -> crate::runtime::Runtime {
        let resume = self.step.resumes.get(&*self.id).cloned().unwrap_or_default();
        crate::pregel::task_runtime::for_call(caller, &self.name, &self.id, resume, &self.step.resume_by_id)
    }

    /// Records that the call paused: its interrupts (and the answers it consumed) are saved with the step,
    /// so the resumed call gets its answers back.
    pub(crate) fn paused(&self, interrupts: &[crate::types::Interrupt], resumed: Option<Vec<Value>>) {
        self.keep(crate::pregel::task::paused_writes(interrupts, resumed));
    }

    /// Records the call's result: saved with the step, and streamed.
    pub(crate) fn finished(&self, value: Value) {
        self.keep(vec![(ChannelName::from(RETURN), value.clone())]);
        if let Ok(mut returned) = self.step.returned.lock() {
            returned.insert(self.id.to_string(), value.clone());
        }
        if let Some(emit) = &self.step.emit {
            emit(CallEvent::Done { id: Arc::clone(&self.id), name: Arc::clone(&self.name), value });
        }
    }

    /// Records the call's failure: saved with the step (a resume runs it again), and streamed.
    pub(crate) fn failed(&self, error: String) {
        self.keep(vec![(ChannelName::from(special::ERROR), Value::String(error.clone()))]);
        if let Some(emit) = &self.step.emit {
            emit(CallEvent::Failed { id: Arc::clone(&self.id), name: Arc::clone(&self.name), error });
        }
    }

    fn keep(&self, writes: Vec<(ChannelName, Value)>) {
        if let Ok(mut outbox) = self.step.outbox.lock() {
            outbox.push((Arc::clone(&self.id), Arc::clone(&self.path), writes));
        }
        // Stored as a permit when nobody waits yet: the step saves it at its next turn.
        self.step.kept.notify_one();
    }
}
