//! Node error handlers (LangGraph's `error_handler=`): a failed node's error goes to its handler, saved
//! first with its source node; a run stopped in between resumes into the handler; graph-wide defaults,
//! overridden per node, not inherited by subgraphs.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Counter, CounterUpdate};
use futures::StreamExt as _;
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer, special};
use weft_graph::{
    Command, CompileConfig, GraphError, GraphInput, InMemorySaver, NodeConfig, NodeDefaults, RetryPolicy,
    Runtime, START, StateGraph, StreamData, StreamMode,
};
use weft_runnable_core::{Error, RunnableConfig};

type Calls = Arc<Mutex<Vec<String>>>;

fn push(calls: &Calls, name: &str) -> usize {
    let mut c = calls.lock().unwrap();
    c.push(name.to_owned());
    c.iter().filter(|n| *n == name).count()
}

fn count(calls: &Calls, name: &str) -> usize {
    calls.lock().unwrap().iter().filter(|n| *n == name).count()
}

/// A node that records its call and fails with `<name> failed`.
fn failing(
    name: &'static str,
    calls: &Calls,
) -> impl Fn(Counter) -> Result<CounterUpdate, Error> + Send + Sync + use<> {
    let calls = Arc::clone(calls);
    move |_: Counter| {
        push(&calls, name);
        Err(Error::msg(format!("{name} failed")))
    }
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn saved() -> (Arc<InMemorySaver>, CompileConfig) {
    let saver = Arc::new(InMemorySaver::new());
    (Arc::clone(&saver), CompileConfig::new().checkpointer(saver))
}

#[tokio::test]
async fn a_failed_node_goes_to_its_handler_which_is_told_the_failure_and_routes_on() {
    let calls = Calls::default();
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", |s: Counter, rt: Runtime| async move {
        let error = rt.node_error().unwrap();
        assert_eq!(error.node(), "a");
        assert_eq!(error.source().map(ToString::to_string).as_deref(), Some("a failed"));
        assert!(error.message().contains("a failed"), "{}", error.message());
        // The handler runs on the input the failed node had.
        Command::<Counter>::new().update(CounterUpdate::log(&format!("handled at {}", s.count))).goto("b")
    });
    g.add_node("b", |_: Counter| CounterUpdate::log("b"));
    g.add_edge(START, "a");
    let app = g.compile().unwrap();
    let modes = [StreamMode::Updates];
    let parts: Vec<_> =
        app.stream(CounterUpdate::count(7), &RunnableConfig::default(), &modes).collect::<Vec<_>>().await;
    let updated: Vec<String> = parts
        .iter()
        .filter_map(|p| match &p.as_ref().unwrap().data {
            StreamData::Updates { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(updated, ["__error_handler__a", "b"], "the failed node streams no update; its handler does");
    let out = app.invoke(CounterUpdate::count(7), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, ["handled at 7", "b"]);
    assert_eq!(count(&calls, "a"), 2, "once per run");
}

#[tokio::test]
async fn the_error_and_its_source_node_are_saved_in_one_write_before_the_handler_runs() {
    let (saver, config) = saved();
    let calls = Calls::default();
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let (reader, seen_by_handler) = (Arc::clone(&saver), Arc::clone(&seen));
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", move |_: Counter, rt: Runtime| {
        let (reader, seen) = (Arc::clone(&reader), Arc::clone(&seen_by_handler));
        async move {
            let thread_id = rt.execution_info().thread_id.clone().unwrap();
            let tuple = reader.get_tuple(&CheckpointConfig::thread(thread_id)).await.unwrap().unwrap();
            let writes = tuple.pending_writes.iter().map(|w| format!("{}={}", w.channel, w.value)).collect();
            seen.lock().unwrap().push(writes);
            CounterUpdate::log("handled")
        }
    });
    g.add_edge(START, "a");
    let out = g.compile_with(config).unwrap().invoke(CounterUpdate::count(1), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, ["handled"]);
    let seen = seen.lock().unwrap();
    let [writes] = seen.as_slice() else { panic!("the handler ran once: {seen:?}") };
    assert!(writes.iter().any(|w| w.starts_with("__error__=") && w.contains("a failed")), "{writes:?}");
    assert!(writes.contains(&format!("{}=\"a\"", special::ERROR_SOURCE_NODE)), "{writes:?}");
}

#[tokio::test]
async fn a_run_whose_handler_fails_resumes_into_the_handler_without_running_the_node_again() {
    let (_, config) = saved();
    let calls = Calls::default();
    let told: Arc<Mutex<Vec<(String, String, bool)>>> = Arc::default();
    let (handler_calls, handler_told) = (Arc::clone(&calls), Arc::clone(&told));
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", move |_: Counter, rt: &Runtime| {
        let error = rt.node_error().unwrap();
        let record = (error.node().to_owned(), error.message().to_owned(), error.source().is_some());
        handler_told.lock().unwrap().push(record);
        if push(&handler_calls, "handler") == 1 {
            return Err(Error::msg("handler failed"));
        }
        Ok(CounterUpdate::log("recovered"))
    });
    g.add_edge(START, "a");
    let app = g.compile_with(config).unwrap();
    let err = app.invoke(CounterUpdate::count(1), &thread("t")).await.unwrap_err();
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "__error_handler__a"), "{err}");
    // The failed task shows its error and is still to do (its handler is), as in LangGraph.
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.next, ["a"]);
    let [task] = state.tasks.as_slice() else { panic!("{:?}", state.tasks) };
    assert_eq!((task.name.as_str(), task.result.as_ref()), ("a", None));
    assert!(task.error.as_deref().is_some_and(|e| e.contains("a failed")), "{task:?}");
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, ["recovered"]);
    assert_eq!(
        (count(&calls, "a"), count(&calls, "handler")),
        (1, 2),
        "the node ran once, its handler twice"
    );
    let told = told.lock().unwrap();
    assert_eq!(told.len(), 2);
    assert!(told[0].2 && !told[1].2, "the live error, then the saved one: {told:?}");
    assert!(told.iter().all(|(node, message, _)| node == "a" && message.contains("a failed")), "{told:?}");
    assert_eq!(told[0].1, told[1].1, "the resumed handler is told the text the failure saved");
}

#[tokio::test]
async fn a_run_dropped_while_its_handler_runs_resumes_into_the_handler() {
    let (_, config) = saved();
    let calls = Calls::default();
    let started = Arc::new(tokio::sync::Notify::new());
    let (handler_calls, handler_started) = (Arc::clone(&calls), Arc::clone(&started));
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", move |_: Counter| {
        let (calls, started) = (Arc::clone(&handler_calls), Arc::clone(&handler_started));
        async move {
            if push(&calls, "handler") == 1 {
                // The process dies here: the run's future is dropped while the handler waits.
                started.notify_one();
                std::future::pending::<()>().await;
            }
            CounterUpdate::log("recovered")
        }
    });
    g.add_node("b", |_: Counter| CounterUpdate::log("b"));
    g.add_edge(START, "a").add_edge("a", "b");
    let app = g.compile_with(config).unwrap();
    let t = thread("t");
    tokio::select! {
        _ = app.invoke(CounterUpdate::count(1), &t) => panic!("the first run never ends"),
        () = started.notified() => {}
    }
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, ["recovered"], "the failed node's edge to b is not taken");
    assert_eq!((count(&calls, "a"), count(&calls, "handler")), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn the_nodes_retries_come_first_and_the_defaults_retry_the_handler() {
    let calls = Calls::default();
    let handler_calls = Arc::clone(&calls);
    let retry =
        |n| RetryPolicy::new().max_attempts(n).initial_interval(Duration::from_millis(5)).jitter(false);
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().retry(retry(2).retry_on(|_| true)));
    g.add_node_with("a", failing("a", &calls), NodeConfig::new().retry(retry(3).retry_on(|_| true)));
    g.add_error_handler("a", move |_: Counter, rt: &Runtime| {
        let attempt = rt.execution_info().attempt;
        push(&handler_calls, "handler");
        if attempt == 1 {
            Err(Error::msg("handler's first attempt"))
        } else {
            Ok(CounterUpdate::log("handled"))
        }
    });
    g.add_edge(START, "a");
    let out = g.compile().unwrap().invoke(CounterUpdate::count(1), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, ["handled"]);
    assert_eq!(*calls.lock().unwrap(), ["a", "a", "a", "handler", "handler"]);
}

#[tokio::test]
async fn the_default_handler_catches_nodes_without_their_own_and_a_nodes_own_wins() {
    let calls = Calls::default();
    let (own_calls, default_calls) = (Arc::clone(&calls), Arc::clone(&calls));
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().error_handler(move |_: Counter, rt: &Runtime| {
        let node = rt.node_error().unwrap().node().to_owned();
        push(&default_calls, &format!("default for {node}"));
        CounterUpdate::log(&format!("default handled {node}"))
    }));
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", move |_: Counter, rt: &Runtime| {
        push(&own_calls, "own");
        let node = rt.node_error().unwrap().node().to_owned();
        Command::<Counter>::new().update(CounterUpdate::log(&format!("own handled {node}"))).goto("b")
    });
    g.add_node("b", failing("b", &calls));
    g.add_edge(START, "a");
    let out = g.compile().unwrap().invoke(CounterUpdate::count(1), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, ["own handled a", "default handled b"]);
    assert_eq!(*calls.lock().unwrap(), ["a", "own", "b", "default for b"]);
}

#[tokio::test]
async fn a_handlers_failure_fails_the_run_even_with_a_default_handler() {
    let calls = Calls::default();
    let default_calls = Arc::clone(&calls);
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().error_handler(move |_: Counter| {
        push(&default_calls, "default");
        CounterUpdate::log("default")
    }));
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", |_: Counter| Err::<CounterUpdate, _>(Error::msg("handler failed")));
    g.add_edge(START, "a");
    let err =
        g.compile().unwrap().invoke(CounterUpdate::count(1), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "__error_handler__a"), "{err}");
    assert!(err.to_string().contains("handler failed"), "{err}");
    assert_eq!(*calls.lock().unwrap(), ["a"], "no handler handles a handler");
}

#[tokio::test]
async fn a_subgraph_does_not_inherit_its_parents_default_handler() {
    let calls = Calls::default();
    let mut sub = StateGraph::<Counter>::new();
    sub.add_node("inner", failing("inner", &calls));
    sub.add_edge(START, "inner");
    let handler_calls = Arc::clone(&calls);
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().error_handler(move |_: Counter, rt: &Runtime| {
        push(&handler_calls, &format!("handler for {}", rt.node_error().unwrap().node()));
        CounterUpdate::log("parent handled")
    }));
    g.add_node("sub", sub.compile().unwrap());
    g.add_edge(START, "sub");
    let out = g.compile().unwrap().invoke(CounterUpdate::count(1), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, ["parent handled"]);
    assert_eq!(*calls.lock().unwrap(), ["inner", "handler for sub"], "the subgraph's node had no handler");
}

#[tokio::test]
async fn an_interrupt_is_no_failure_and_reaches_no_handler() {
    let (_, config) = saved();
    let calls = Calls::default();
    let handler_calls = Arc::clone(&calls);
    let mut g = StateGraph::<Counter>::new();
    g.add_node("ask", |_: Counter, rt: &Runtime| -> weft_runnable_core::Result<CounterUpdate> {
        let answer: String = rt.interrupt("question")?;
        Ok(CounterUpdate::log(&answer))
    });
    g.add_error_handler("ask", move |_: Counter| {
        push(&handler_calls, "handler");
        CounterUpdate::log("handled")
    });
    g.add_edge(START, "ask");
    let out = g.compile_with(config).unwrap().invoke(CounterUpdate::count(1), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1);
    assert!(calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_failure_beside_a_finished_task_keeps_both_tasks_writes_in_task_order() {
    let calls = Calls::default();
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", |_: Counter| CounterUpdate::log("handled a"));
    g.add_node("b", |_: Counter| CounterUpdate::log("b"));
    g.add_node("c", |s: Counter| CounterUpdate::log(&format!("c saw {}", s.log.join(","))));
    g.add_edge(START, "a").add_edge(START, "b").add_edge("b", "c");
    let out = g.compile().unwrap().invoke(CounterUpdate::count(1), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, ["handled a", "b", "c saw handled a,b"]);
}

#[test]
fn an_error_handler_needs_a_node_and_the_default_handlers_name_free() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| CounterUpdate::log("a"));
    g.add_edge(START, "a");
    g.add_error_handler("ghost", |_: Counter| CounterUpdate::log("never"));
    assert!(matches!(g.compile(), Err(GraphError::UnknownErrorHandlerNode(n)) if n == "ghost"));

    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| CounterUpdate::log("a"));
    g.add_edge(START, "a");
    g.add_error_handler("a", |_: Counter| CounterUpdate::log("first"));
    g.add_error_handler("a", |_: Counter| CounterUpdate::log("second"));
    assert!(matches!(g.compile(), Err(GraphError::DuplicateNode(n)) if n == "__error_handler__a"));

    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().error_handler(|_: Counter| CounterUpdate::log("default")));
    g.add_node("__default_error_handler__", |_: Counter| CounterUpdate::log("mine"));
    g.add_edge(START, "__default_error_handler__");
    assert!(matches!(g.compile(), Err(GraphError::DuplicateNode(n)) if n == "__default_error_handler__"));
}

#[test]
fn handlers_are_reached_by_their_nodes_failures() {
    let calls = Calls::default();
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", failing("a", &calls));
    g.add_error_handler("a", |_: Counter| CounterUpdate::log("handled"));
    g.set_node_defaults(NodeDefaults::new().error_handler(|_: Counter| CounterUpdate::log("default")));
    g.add_node("b", failing("b", &calls));
    g.add_edge(START, "a").add_edge("a", "b");
    assert!(g.unreached_nodes().is_empty(), "{:?}", g.unreached_nodes());
}
