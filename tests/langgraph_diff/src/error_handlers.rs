//! Node error handlers: a handler told the failure that goes on with a Command, a handler run after the
//! node's retries and retried itself, a node's own handler beside the graph's default one, a subgraph that
//! does not inherit its parent's default handler, a Send task's handler given its packet, and a run stopped
//! between the failure and the handler's end (the handler fails once) that resumes into the handler
//! without running the node again (python/s_error_handlers.py).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::graph::{
    Command, GraphInput, IntoNode as _, JsonState, NodeConfig, NodeDefaults, NodeError, NodeOutput,
    RetryPolicy, RunOptions, Runtime, START, Send, StreamMode,
};

use crate::kit::{Node, graph, input, len, log_state, saver, upd};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    error_handler_gets_the_failure_and_goes_on_with_a_command,
    error_handler_runs_after_the_retries_and_is_retried_itself,
    a_nodes_own_error_handler_overrides_the_default,
    subgraph_does_not_inherit_its_parents_error_handler,
    run_stopped_before_the_handler_ends_resumes_into_the_handler,
    error_handler_of_a_send_task_gets_its_packet,
];

/// The names of the calls made so far, in order.
type Calls = Arc<Mutex<Vec<String>>>;

fn push(calls: &Calls, name: &str) -> usize {
    let Ok(mut c) = calls.lock() else { return 0 };
    c.push(name.to_owned());
    c.iter().filter(|n| *n == name).count()
}

fn count(calls: &Calls, name: &str) -> usize {
    calls.lock().map_or(0, |c| c.iter().filter(|n| *n == name).count())
}

fn names(calls: &Calls) -> Value {
    json!(calls.lock().map(|c| c.clone()).unwrap_or_default())
}

/// `RetryPolicy(max_attempts=n, initial_interval=0.001, jitter=False, retry_on=NodeFailure)`.
fn quick_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new()
        .max_attempts(max_attempts)
        .initial_interval(Duration::from_millis(1))
        .jitter(false)
        .retry_on(|_| true)
}

/// A node that records its call and fails with `<name> went wrong`.
fn failing(name: &str, calls: &Calls) -> Node {
    let (name, calls) = (name.to_owned(), Arc::clone(calls));
    (move |_: &JsonState| -> weft::Result<Value> {
        push(&calls, &name);
        Err(weft::Error::msg(format!("{name} went wrong")))
    })
    .into_node()
}

/// What a handler reports of the failure it handles: the node, and whether the node's message is in the
/// error it was given (`True`, in Python's words).
fn told(rt: &Runtime) -> String {
    let error: Option<&NodeError> = rt.node_error();
    let node = error.map(NodeError::node).unwrap_or_default();
    let has_message = error.is_some_and(|e| e.message().contains("went wrong"));
    format!("{node} ({})", if has_message { "True" } else { "False" })
}

fn after() -> Node {
    (|s: &JsonState| json!({"log": [format!("after saw {}", len(s, "log"))]})).into_node()
}

fn goto(log: String, node: &str) -> NodeOutput<JsonState> {
    NodeOutput::Command(Command::new().update(upd(json!({"log": [log]}))).goto(node))
}

fn error_handler_gets_the_failure_and_goes_on_with_a_command(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Calls::default();
        let mut g = graph(log_state());
        g.add_node("fetch", failing("fetch", &calls));
        let seen = Arc::clone(&calls);
        g.add_error_handler("fetch", move |_: &JsonState, rt: &Runtime| {
            push(&seen, "handler");
            goto(format!("handled {}", told(rt)), "after")
        });
        g.add_node("after", after());
        g.add_edge(START, "fetch");
        let app = g.compile_with(saver())?;
        let modes = [StreamMode::Updates, StreamMode::Values, StreamMode::Tasks];
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &modes, RunOptions::default()).await;
        rec.note(json!({"op": "calls", "calls": names(&calls)}));
        rec.state(&app, &thread("t"), false).await;
        rec.saved(&app, "t", &["versions_seen", "updated_channels"]).await;
        Ok(())
    })
}

fn error_handler_runs_after_the_retries_and_is_retried_itself(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Calls::default();
        let mut g = graph(log_state());
        g.set_node_defaults(NodeDefaults::new().retry(quick_retry(2)));
        g.add_node_with("flaky", failing("flaky", &calls), NodeConfig::new().retry(quick_retry(3)));
        let seen = Arc::clone(&calls);
        g.add_error_handler("flaky", move |_: &JsonState, rt: &Runtime| -> weft::Result<Value> {
            if push(&seen, "handler") == 1 {
                return Err(weft::Error::msg("handler's first attempt"));
            }
            let attempts = count(&seen, "flaky");
            Ok(json!({"log": [format!("handled {} after {attempts} attempts", told(rt))]}))
        });
        g.add_edge(START, "flaky");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.note(json!({"op": "calls", "calls": names(&calls)}));
        Ok(())
    })
}

fn a_nodes_own_error_handler_overrides_the_default(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Calls::default();
        let mut g = graph(log_state());
        let seen = Arc::clone(&calls);
        g.set_node_defaults(NodeDefaults::new().error_handler(move |_: &JsonState, rt: &Runtime| {
            push(&seen, "default");
            json!({"log": [format!("default handler: {}", told(rt))]})
        }));
        g.add_node("a", failing("a", &calls));
        let seen = Arc::clone(&calls);
        g.add_error_handler("a", move |_: &JsonState, rt: &Runtime| {
            push(&seen, "own");
            goto(format!("own handler: {}", told(rt)), "b")
        });
        g.add_node("b", failing("b", &calls));
        g.add_edge(START, "a");
        let app = g.compile_with(saver())?;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &modes, RunOptions::default()).await;
        rec.note(json!({"op": "calls", "calls": names(&calls)}));
        rec.saved(&app, "t", &["versions_seen", "updated_channels"]).await;
        Ok(())
    })
}

fn subgraph_does_not_inherit_its_parents_error_handler(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Calls::default();
        let mut sub = graph(log_state());
        sub.add_node("inner", failing("inner", &calls));
        sub.add_edge(START, "inner");
        let mut g = graph(log_state());
        let seen = Arc::clone(&calls);
        g.set_node_defaults(NodeDefaults::new().error_handler(move |_: &JsonState, rt: &Runtime| {
            let node = rt.node_error().map(NodeError::node).unwrap_or_default().to_owned();
            push(&seen, &format!("handler for {node}"));
            json!({"log": [format!("parent handled {}", told(rt))]})
        }));
        g.add_node("sub", sub.compile()?);
        g.add_edge(START, "sub");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.note(json!({"op": "calls", "calls": names(&calls)}));
        Ok(())
    })
}

fn run_stopped_before_the_handler_ends_resumes_into_the_handler(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Calls::default();
        let mut g = graph(log_state());
        g.add_node("fetch", failing("fetch", &calls));
        let seen = Arc::clone(&calls);
        g.add_error_handler(
            "fetch",
            move |_: &JsonState, rt: &Runtime| -> weft::Result<NodeOutput<JsonState>> {
                if push(&seen, "handler") == 1 {
                    return Err(weft::Error::msg("handler stopped"));
                }
                Ok(goto(format!("recovered {}", told(rt)), "after"))
            },
        );
        g.add_node("after", after());
        g.add_edge(START, "fetch");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        let fields = ["versions_seen", "updated_channels"];
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.state(&app, &t, false).await;
        rec.saved(&app, "t", &fields).await;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, GraphInput::Resume, &t, &modes, RunOptions::default()).await;
        rec.note(json!({"op": "calls", "calls": names(&calls)}));
        rec.state(&app, &t, false).await;
        rec.saved(&app, "t", &fields).await;
        Ok(())
    })
}

fn error_handler_of_a_send_task_gets_its_packet(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Calls::default();
        let mut g = graph(log_state());
        let seen = Arc::clone(&calls);
        g.add_node("w", move |p: Value| -> weft::Result<Value> {
            let topic = p["topic"].as_str().unwrap_or_default().to_owned();
            push(&seen, &format!("w {topic}"));
            if topic == "bad" {
                return Err(weft::Error::msg("w went wrong"));
            }
            Ok(json!({"log": [format!("w {topic}")]}))
        });
        let seen = Arc::clone(&calls);
        g.add_error_handler("w", move |p: Value, rt: Runtime| {
            push(&seen, "handler");
            let topic = p["topic"].as_str().unwrap_or_default().to_owned();
            let log = format!("handled {topic}: {}", told(&rt));
            async move { json!({"log": [log]}) }
        });
        g.set_conditional_entry_point(
            |_: &JsonState| ["ok", "bad"].map(|t| Send::new("w", json!({"topic": t}))).to_vec(),
            None,
        );
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        let mut sorted: Vec<String> = calls.lock().map(|c| c.clone()).unwrap_or_default();
        sorted.sort();
        rec.note(json!({"op": "calls", "calls": sorted}));
        rec.saved(&app, "t", &["versions_seen", "updated_channels"]).await;
        Ok(())
    })
}
