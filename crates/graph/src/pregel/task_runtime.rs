//! The runtime a task's node sees: its config, resume values, stream writer and parent-run link.

use crate::pregel::emit::{messages_sink_for, task_metadata, tools_sink_for, with_task_ns};
use crate::pregel::run::Ctx;
use crate::pregel::saved::SavedWrites;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use weft_runnable_core::{EventSink, RunnableConfig};

use crate::timeout::AttemptClock;

use crate::pregel::parent::ParentRun;
use crate::pregel::sink::Sink;
use crate::pregel::task::Task;
use crate::runtime::{
    ConfigSource, Runtime, RuntimeInner, Scratchpad, TaskOwnConfig, TaskSite, interrupt_id, task_ns,
};
use crate::state::State;
use crate::stream::{StreamData, StreamMode, StreamPart};

pub(crate) fn make_runtime<S: State>(
    ctx: &Ctx<'_, S>,
    task: &Task<S>,
    saved: &SavedWrites,
    (step, stop): (i64, i64),
    triggers: Vec<String>,
    calls: Option<Arc<dyn crate::runtime::TaskCalls>>,
    spare: Option<Runtime>,
) -> Runtime {
    let observed = ctx.config.callbacks.is_some()
        || ctx.sink.is_some_and(|s| s.modes.has(StreamMode::Messages) || s.modes.has(StreamMode::Tools));
    let address = ctx.saver.as_ref().map(|s| Arc::clone(s.current_config()));
    let source = ctx.config_source.get_or_init(|| config_source(ctx));
    let writer = ctx.sink.filter(|s| s.modes.has(StreamMode::Custom)).map(|sink| {
        let send = Arc::clone(&sink.send);
        let node = task.name.to_string();
        Arc::new(move |value: Value| {
            send(StreamPart { ns: Vec::new(), data: StreamData::Custom { node: node.clone(), value } });
        }) as crate::runtime::CustomWriter
    });
    let mut resume = if saved.is_empty() { Vec::new() } else { saved.resume_values(&task.id) };
    let mut resume_changed = false;
    if !ctx.resume_by_id.is_empty() {
        let next = interrupt_id(&task_ns(&task.name, &task.id), resume.len());
        if let Some(v) = ctx.resume_by_id.get(&next) {
            resume.push(v.clone());
            resume_changed = true;
        }
    }
    // Without a saver, the thread and namespace are the run's own.
    let (thread_id, ns) = match address {
        Some(_) => (None, String::new()),
        None => (ctx.thread_id.clone(), ctx.ns.clone()),
    };
    let site = TaskSite { address, thread_id, ns, task_id: task.id.clone(), attempt: 1, step };
    let scratchpad = Scratchpad { counter: 0, resume, resume_changed };
    let fresh = Fresh { triggers, observed, site, stop, scratchpad, writer, calls };
    if let Some(mut spare) = spare {
        if let Some(inner) = reusable(&mut spare, ctx, task, source) {
            refill(inner, ctx, fresh);
            return spare;
        }
    }
    Runtime {
        inner: Arc::new(RuntimeInner {
            node: Arc::clone(&task.name),
            config: std::sync::OnceLock::new(),
            own_config: Some(TaskOwnConfig {
                source: Arc::clone(source),
                path: Arc::clone(&task.path),
                triggers: fresh.triggers,
            }),
            observed: fresh.observed,
            site: fresh.site,
            info: std::sync::OnceLock::new(),
            stop: fresh.stop,
            scratchpad: Mutex::new(fresh.scratchpad),
            writer: fresh.writer,
            null_resume: Arc::clone(&ctx.null_resume),
            context: ctx.options.context.clone(),
            store: ctx.store.clone(),
            calls: fresh.calls,
            clock: None,
            node_error: None,
        }),
    }
}

/// What differs between two tasks of one node in a run: the parts of a runtime made for each task.
struct Fresh {
    triggers: Vec<String>,
    observed: bool,
    site: TaskSite,
    stop: i64,
    scratchpad: Scratchpad,
    writer: Option<crate::runtime::CustomWriter>,
    calls: Option<Arc<dyn crate::runtime::TaskCalls>>,
}

/// `spare` (the runtime of an earlier task of the run), to fill in for `task`: when nothing else holds
/// it and it served the same node with the same path and config source (no allocation, and the handles
/// the two tasks share are kept instead of counted again).
fn reusable<'r, S: State>(
    spare: &'r mut Runtime,
    ctx: &Ctx<'_, S>,
    task: &Task<S>,
    source: &Arc<dyn ConfigSource>,
) -> Option<&'r mut RuntimeInner> {
    let inner = Arc::get_mut(&mut spare.inner)?;
    let own = inner.own_config.as_ref()?;
    let fits = Arc::ptr_eq(&inner.node, &task.name)
        && Arc::ptr_eq(&own.path, &task.path)
        && Arc::ptr_eq(&own.source, source)
        && Arc::ptr_eq(&inner.null_resume, &ctx.null_resume);
    fits.then_some(inner)
}

/// Fills a [`reusable`] runtime in with `fresh` and the run's handles. Every field is set again but
/// those `reusable` found equal (the destructuring names them all, so a new field cannot be missed).
fn refill<S: State>(inner: &mut RuntimeInner, ctx: &Ctx<'_, S>, fresh: Fresh) {
    let RuntimeInner {
        node: _,
        config,
        own_config,
        observed,
        site,
        info,
        stop,
        scratchpad,
        writer,
        null_resume: _,
        context,
        store,
        calls,
        clock,
        node_error,
    } = inner;
    if let Some(own) = own_config {
        own.triggers = fresh.triggers;
    }
    *config = std::sync::OnceLock::new();
    *observed = fresh.observed;
    *site = fresh.site;
    *info = std::sync::OnceLock::new();
    *stop = fresh.stop;
    *scratchpad = Mutex::new(fresh.scratchpad);
    *writer = fresh.writer;
    context.clone_from(&ctx.options.context);
    store.clone_from(&ctx.store);
    *calls = fresh.calls;
    *clock = None;
    *node_error = None;
}

/// What the configs of a run's tasks share, taken from the run once (after its resume answers are
/// known): everything but each task's name, id, step, checkpoint, path and triggers.
struct RunConfigSource<S: State> {
    base: Arc<RunnableConfig>,
    run_ns: String,
    /// The run's sink, when it streams `messages`, `tools` or subgraphs.
    sink: Option<Sink<S>>,
    checkpointer: Option<Arc<dyn crate::checkpoint::Checkpointer>>,
    outer_parents: std::collections::BTreeMap<String, String>,
    store: Option<Arc<dyn crate::store::Store>>,
    resuming: bool,
    null_resume: Arc<Mutex<Option<Value>>>,
    resume_by_id: serde_json::Map<String, Value>,
    called_subgraphs: crate::pregel::parent::CalledSubgraphs,
}

/// The run's [`ConfigSource`].
fn config_source<S: State>(ctx: &Ctx<'_, S>) -> Arc<dyn ConfigSource> {
    let wanted =
        |s: &&Sink<S>| s.subgraphs || s.modes.has(StreamMode::Messages) || s.modes.has(StreamMode::Tools);
    Arc::new(RunConfigSource {
        base: Arc::clone(&ctx.config),
        run_ns: ctx.ns.clone(),
        sink: ctx.sink.filter(wanted).map(Sink::share),
        checkpointer: ctx.saver.as_ref().map(|s| Arc::clone(&s.checkpointer)),
        outer_parents: ctx.parent.as_ref().map(|p| p.parents.clone()).unwrap_or_default(),
        store: ctx.store.clone(),
        resuming: ctx.resuming,
        null_resume: Arc::clone(&ctx.null_resume),
        resume_by_id: ctx.resume_by_id.clone(),
        called_subgraphs: ctx.inner.called_subgraphs.clone(),
    })
}

impl<S: State> ConfigSource for RunConfigSource<S> {
    fn build(&self, task: &RuntimeInner, own: &TaskOwnConfig) -> RunnableConfig {
        let (name, step) = (&task.node, task.site.step);
        let own_ns = task_ns(name, &task.site.task_id);
        let mut parents = self.outer_parents.clone();
        if let Some(current) = task.site.address.as_ref().and_then(|c| c.checkpoint_id.clone()) {
            parents.insert(self.run_ns.clone(), current);
        }
        let (ns, node_ns) = if self.run_ns.is_empty() {
            (own_ns.clone(), name.to_string())
        } else {
            (format!("{}|{own_ns}", self.run_ns), format!("{}|{name}", self.run_ns))
        };
        let mut config = self.base.child(Some(format!("graph:step:{step}")));
        let metadata = task_metadata(&config, name, &own.path, &ns, step, &own.triggers);
        config.metadata = with_task_ns(metadata, &ns);
        let sink = self.sink.as_ref();
        if let Some(sink) = sink.filter(|s| s.modes.has(StreamMode::Messages)) {
            let messages = messages_sink_for(Arc::clone(&sink.send), Arc::clone(&sink.seen), ns.clone());
            listen(&mut config, messages.with_gate(sink.gate.clone()));
        }
        if let Some(sink) = sink.filter(|s| s.modes.has(StreamMode::Tools)) {
            listen(&mut config, tools_sink_for(Arc::clone(&sink.send), ns.clone()));
        }
        config.extensions.insert(ParentRun {
            stream: sink.filter(|s| s.subgraphs).map(|s| s.forward_for(own_ns)),
            checkpointer: self.checkpointer.clone(),
            ns,
            node_ns,
            store: self.store.clone(),
            parents,
            resuming: self.resuming,
            null_resume: Arc::clone(&self.null_resume),
            resume_by_id: self.resume_by_id.clone(),
            calls: Arc::default(),
            called: (self.called_subgraphs.clone(), Arc::clone(name)),
        });
        config
    }
}

/// The runtime of a functional-API task call made by the task that `parent` serves: the call's own name,
/// id and answers (`resume`, plus one given by id for its next interrupt), the parent's config, stream
/// writer, store and context.
pub(crate) fn for_call(
    parent: &Runtime,
    name: &Arc<str>,
    id: &Arc<str>,
    mut resume: Vec<Value>,
    resume_by_id: &serde_json::Map<String, Value>,
) -> Runtime {
    let mut resume_changed = false;
    if let Some(v) = resume_by_id.get(&interrupt_id(&task_ns(name, id), resume.len())) {
        resume.push(v.clone());
        resume_changed = true;
    }
    let site = TaskSite { task_id: Arc::clone(id).into(), attempt: 1, ..parent.inner.site.clone() };
    Runtime {
        inner: Arc::new(RuntimeInner {
            node: Arc::clone(name),
            config: std::sync::OnceLock::from(Box::new(parent.config().clone())),
            own_config: None,
            observed: parent.inner.observed,
            site,
            info: std::sync::OnceLock::new(),
            stop: parent.inner.stop,
            scratchpad: Mutex::new(Scratchpad { counter: 0, resume, resume_changed }),
            writer: parent.inner.writer.clone(),
            null_resume: Arc::clone(&parent.inner.null_resume),
            context: parent.inner.context.clone(),
            store: parent.inner.store.clone(),
            calls: None,
            clock: None,
            node_error: None,
        }),
    }
}

/// `rt`, freshly made for an error handler's task, with the failure it handles.
pub(crate) fn with_node_error(mut rt: Runtime, error: Arc<crate::runtime::NodeError>) -> Runtime {
    match Arc::get_mut(&mut rt.inner) {
        Some(inner) => {
            inner.node_error = Some(error);
            rt
        }
        None => {
            let mut copy = rebuild(&rt, rt.inner.site.clone(), rt.config().clone());
            if let Some(inner) = Arc::get_mut(&mut copy.inner) {
                inner.node_error = Some(error);
            }
            copy
        }
    }
}

pub(crate) fn with_attempt(rt: &Runtime, attempt: u32) -> Runtime {
    let site = TaskSite { attempt, ..rt.inner.site.clone() };
    rebuild(rt, site, rt.config().clone())
}

pub(crate) fn with_config(rt: &Runtime, config: RunnableConfig) -> Runtime {
    rebuild(rt, rt.inner.site.clone(), config)
}

/// The runtime of a timed attempt: `clock` records its progress, refreshed by heartbeats and (under
/// `RefreshOn::Auto`, through an event sink added to the config) by the events of the runs it makes.
pub(crate) fn with_clock(rt: &Runtime, clock: Arc<AttemptClock>) -> Runtime {
    let mut config = rt.config().clone();
    if clock.auto() {
        let touched = Arc::clone(&clock);
        let sink = EventSink::new(move |_| touched.touch());
        config.callbacks = Some(match config.callbacks.take() {
            Some(existing) => existing.and(sink),
            None => sink,
        });
    }
    let mut timed = rebuild(rt, rt.inner.site.clone(), config);
    if let Some(inner) = Arc::get_mut(&mut timed.inner) {
        inner.clock = Some(clock);
    }
    timed
}

pub(crate) fn rebuild(rt: &Runtime, site: TaskSite, config: RunnableConfig) -> Runtime {
    let pad = rt.inner.scratchpad.lock().map(|p| Scratchpad {
        counter: 0,
        resume: p.resume.clone(),
        resume_changed: p.resume_changed,
    });
    Runtime {
        inner: Arc::new(RuntimeInner {
            node: Arc::clone(&rt.inner.node),
            config: std::sync::OnceLock::from(Box::new(config)),
            own_config: None,
            observed: rt.inner.observed,
            site,
            info: std::sync::OnceLock::new(),
            stop: rt.inner.stop,
            scratchpad: Mutex::new(pad.unwrap_or_default()),
            writer: rt.inner.writer.clone(),
            null_resume: Arc::clone(&rt.inner.null_resume),
            context: rt.inner.context.clone(),
            store: rt.inner.store.clone(),
            // A retried node calls its tasks again from the first: finished ones return their results.
            calls: rt.inner.calls.as_ref().map(|c| c.restart()),
            clock: rt.inner.clock.clone(),
            node_error: rt.inner.node_error.clone(),
        }),
    }
}

/// Adds `sink` to the sinks that receive the events of the runs made under `config`.
fn listen(config: &mut RunnableConfig, sink: EventSink) {
    config.callbacks = Some(match config.callbacks.take() {
        Some(existing) => existing.and(sink),
        None => sink,
    });
}
