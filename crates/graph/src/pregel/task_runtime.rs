//! The runtime a task's node sees: its config, resume values, stream writer and parent-run link.

use crate::pregel::emit::{messages_sink_for, task_metadata, tools_sink_for, with_task_ns};
use crate::pregel::run::Ctx;
use crate::pregel::saved::SavedWrites;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use weft_runnable_core::{EventSink, RunnableConfig};

use crate::timeout::AttemptClock;

use crate::pregel::parent::ParentRun;
use crate::pregel::task::Task;
use crate::runtime::{Runtime, RuntimeInner, Scratchpad, TaskSite, interrupt_id, task_ns};
use crate::state::State;
use crate::stream::{StreamData, StreamMode, StreamPart};

pub(crate) fn make_runtime<S: State>(
    ctx: &Ctx<'_, S>,
    task: &Task<S>,
    saved: &SavedWrites,
    step: i64,
    stop: i64,
    triggers: Vec<String>,
    calls: Option<Arc<dyn crate::runtime::TaskCalls>>,
) -> Runtime {
    let messages_sink = ctx.sink.filter(|s| s.modes.has(StreamMode::Messages));
    let tools = ctx.sink.filter(|s| s.modes.has(StreamMode::Tools)).map(|s| Arc::clone(&s.send));
    let observed = ctx.config.callbacks.is_some() || messages_sink.is_some() || tools.is_some();
    let address = ctx.saver.as_ref().map(|s| Arc::clone(s.current_config()));

    // Everything the task's config needs, captured cheaply (shared handles); strings and maps are made if
    // the node asks for its config.
    let builder: crate::runtime::ConfigBuilder = {
        let base = Arc::clone(&ctx.config);
        let (name, path, id, run_ns) =
            (Arc::clone(&task.name), Arc::clone(&task.path), Arc::clone(&task.id), ctx.ns.clone());
        let messages =
            messages_sink.map(|sink| (Arc::clone(&sink.send), Arc::clone(&sink.seen), sink.gate.clone()));
        let stream = ctx.sink.filter(|s| s.subgraphs).map(|s| s.forward_for(task_ns(&name, &id)));
        let checkpointer = ctx.saver.as_ref().map(|s| Arc::clone(&s.checkpointer));
        let current = address.clone();
        let outer_parents = ctx.parent.as_ref().map(|p| p.parents.clone()).unwrap_or_default();
        let (store, resuming, null_resume) = (ctx.store.clone(), ctx.resuming, Arc::clone(&ctx.null_resume));
        // Most runs answer nothing by id: an empty map is made, not cloned (cloning costs even when empty).
        let resume_by_id =
            if ctx.resume_by_id.is_empty() { serde_json::Map::new() } else { ctx.resume_by_id.clone() };
        let called = (ctx.inner.called_subgraphs.clone(), Arc::clone(&task.name));
        Box::new(move || {
            let own_ns = task_ns(&name, &id);
            let mut parents = outer_parents;
            if let Some(current) = current.and_then(|c| c.checkpoint_id.clone()) {
                parents.insert(run_ns.clone(), current);
            }
            let (ns, node_ns) = if run_ns.is_empty() {
                (own_ns.clone(), name.to_string())
            } else {
                (format!("{run_ns}|{own_ns}"), format!("{run_ns}|{name}"))
            };
            let mut config = base.child(Some(format!("graph:step:{step}")));
            let metadata = task_metadata(&config, &name, &path, &ns, step, &triggers);
            config.metadata = with_task_ns(metadata, &ns);
            if let Some((send, seen, gate)) = messages {
                listen(&mut config, messages_sink_for(send, seen, ns.clone()).with_gate(gate));
            }
            if let Some(send) = &tools {
                listen(&mut config, tools_sink_for(Arc::clone(send), ns.clone()));
            }
            config.extensions.insert(ParentRun {
                stream,
                checkpointer,
                ns,
                node_ns,
                store,
                parents,
                resuming,
                null_resume,
                resume_by_id,
                calls: Arc::default(),
                called: called.clone(),
            });
            config
        })
    };
    let writer = ctx.sink.filter(|s| s.modes.has(StreamMode::Custom)).map(|sink| {
        let send = Arc::clone(&sink.send);
        let node = task.name.to_string();
        Arc::new(move |value: Value| {
            send(StreamPart { ns: Vec::new(), data: StreamData::Custom { node: node.clone(), value } });
        }) as crate::runtime::CustomWriter
    });
    let mut resume = saved.resume_values(&task.id);
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
    Runtime {
        inner: Arc::new(RuntimeInner {
            node: Arc::clone(&task.name),
            config: std::sync::OnceLock::new(),
            config_builder: Mutex::new(Some(builder)),
            observed,
            site: TaskSite { address, thread_id, ns, task_id: Arc::clone(&task.id), attempt: 1, step },
            info: std::sync::OnceLock::new(),
            stop,
            scratchpad: Mutex::new(Scratchpad { counter: 0, resume, resume_changed }),
            writer,
            null_resume: Arc::clone(&ctx.null_resume),
            context: ctx.options.context.clone(),
            store: ctx.store.clone(),
            calls,
            clock: None,
            node_error: None,
        }),
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
    let site = TaskSite { task_id: Arc::clone(id), attempt: 1, ..parent.inner.site.clone() };
    Runtime {
        inner: Arc::new(RuntimeInner {
            node: Arc::clone(name),
            config: std::sync::OnceLock::from(parent.config().clone()),
            config_builder: Mutex::new(None),
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
            config: std::sync::OnceLock::from(config),
            config_builder: Mutex::new(None),
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
