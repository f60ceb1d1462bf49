//! Node timeouts: run and idle timeouts per attempt, heartbeats and automatic progress, the typed
//! timeout error, its retries, and bad policies.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Counter, CounterUpdate};
use weft_graph::{
    CompiledGraph, GraphError, NodeConfig, NodeTimeoutError, RefreshOn, RetryPolicy, Runtime, START,
    StateGraph, TimeoutKind, TimeoutPolicy,
};
use weft_runnable_core::{Error, RunnableConfig};

const MS: Duration = Duration::from_millis(1);

/// What the node does in each attempt: sleep `steps` times for `every`, calling `progress` after each.
#[derive(Clone, Copy)]
enum Signal {
    Nothing,
    Heartbeat,
    CustomWrite,
}

/// A graph of one async node, `slow`, whose attempts each make `steps` steps of `every` (signalling
/// progress after each as `signal` says); `fast_from` is the first attempt that finishes at once.
fn slow_graph(
    config: NodeConfig,
    steps: u32,
    every: Duration,
    signal: Signal,
    fast_from: u32,
    attempts: Arc<Mutex<Vec<u32>>>,
) -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    let node = move |_: Counter, rt: Runtime| {
        let attempts = Arc::clone(&attempts);
        async move {
            let attempt = rt.execution_info().attempt;
            attempts.lock().unwrap().push(attempt);
            if attempt < fast_from {
                for i in 0..steps {
                    tokio::time::sleep(every).await;
                    match signal {
                        Signal::Nothing => {}
                        Signal::Heartbeat => rt.heartbeat(),
                        Signal::CustomWrite => rt.write(&i),
                    }
                }
            }
            Ok::<_, Error>(CounterUpdate::log("done"))
        }
    };
    g.add_node_with("slow", node, config);
    g.add_edge(START, "slow");
    g.compile().unwrap()
}

fn timeout_of(err: &GraphError) -> &NodeTimeoutError {
    err.node_timeout().unwrap_or_else(|| panic!("not a node timeout: {err:?}"))
}

async fn run(app: &CompiledGraph<Counter>) -> Result<Vec<String>, GraphError> {
    app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.map(|o| o.value.log)
}

fn quick_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new().max_attempts(max_attempts).initial_interval(100 * MS).jitter(false)
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_run_timeout_fails_with_a_typed_timeout_error() {
    let policy = TimeoutPolicy::run(1000 * MS).unwrap();
    let app =
        slow_graph(NodeConfig::new().timeout(policy), 1, 10_000 * MS, Signal::Nothing, 99, Arc::default());
    let started = tokio::time::Instant::now();
    let err = run(&app).await.unwrap_err();
    assert_eq!(started.elapsed(), 1000 * MS, "the attempt is cancelled when the timeout fires");
    let timeout = timeout_of(&err);
    assert_eq!(
        (timeout.node.as_str(), timeout.kind, timeout.timeout, timeout.run_timeout, timeout.idle_timeout),
        ("slow", TimeoutKind::Run, 1000 * MS, Some(1000 * MS), None)
    );
    assert_eq!(timeout.elapsed, 1000 * MS);
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "slow"));
    assert_eq!(
        err.to_string(),
        "node 'slow' of graph 'LangGraph' failed at step 1: node 'slow' exceeded its run timeout of 1.000s \
         (elapsed: 1.000s)"
    );
}

#[tokio::test(start_paused = true)]
async fn an_attempt_without_progress_fails_at_its_idle_timeout() {
    let policy = TimeoutPolicy::idle(500 * MS).unwrap();
    let app =
        slow_graph(NodeConfig::new().timeout(policy), 1, 10_000 * MS, Signal::Nothing, 99, Arc::default());
    let err = run(&app).await.unwrap_err();
    let timeout = timeout_of(&err);
    assert_eq!((timeout.kind, timeout.timeout, timeout.elapsed), (TimeoutKind::Idle, 500 * MS, 500 * MS));
    assert_eq!(
        timeout.to_string(),
        "node 'slow' exceeded its idle timeout of 0.500s without making progress (elapsed: 0.500s)"
    );
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_an_idle_timeout_from_firing() {
    let policy = TimeoutPolicy::idle(500 * MS).unwrap();
    let app =
        slow_graph(NodeConfig::new().timeout(policy), 8, 400 * MS, Signal::Heartbeat, 99, Arc::default());
    let started = tokio::time::Instant::now();
    assert_eq!(run(&app).await.unwrap(), ["done"]);
    assert_eq!(started.elapsed(), 3200 * MS, "eight steps of 400 ms, each under the idle timeout");
}

#[tokio::test(start_paused = true)]
async fn heartbeats_refresh_only_the_idle_timeout_never_the_run_timeout() {
    let policy = TimeoutPolicy::run(2000 * MS).unwrap().with_idle(500 * MS).unwrap();
    let app =
        slow_graph(NodeConfig::new().timeout(policy), 10, 400 * MS, Signal::Heartbeat, 99, Arc::default());
    let err = run(&app).await.unwrap_err();
    let timeout = timeout_of(&err);
    assert_eq!((timeout.kind, timeout.elapsed), (TimeoutKind::Run, 2000 * MS));
    assert_eq!((timeout.run_timeout, timeout.idle_timeout), (Some(2000 * MS), Some(500 * MS)));
}

#[tokio::test(start_paused = true)]
async fn custom_stream_writes_are_progress_under_auto_refresh_only() {
    let auto = TimeoutPolicy::idle(500 * MS).unwrap();
    let app =
        slow_graph(NodeConfig::new().timeout(auto), 5, 400 * MS, Signal::CustomWrite, 99, Arc::default());
    assert_eq!(
        run(&app).await.unwrap(),
        ["done"],
        "a custom write refreshes the idle timeout, streamed or not"
    );

    let strict = auto.refresh_on(RefreshOn::Heartbeat);
    let app =
        slow_graph(NodeConfig::new().timeout(strict), 5, 400 * MS, Signal::CustomWrite, 99, Arc::default());
    let err = run(&app).await.unwrap_err();
    assert_eq!((timeout_of(&err).kind, timeout_of(&err).elapsed), (TimeoutKind::Idle, 500 * MS));

    let app =
        slow_graph(NodeConfig::new().timeout(strict), 5, 400 * MS, Signal::Heartbeat, 99, Arc::default());
    assert_eq!(run(&app).await.unwrap(), ["done"], "a heartbeat refreshes it under either setting");
}

/// A subgraph of three nodes of 400 ms each, run by a parent node with an idle timeout of 500 ms: the
/// subgraph's nodes starting and ending are the parent node's progress.
#[tokio::test(start_paused = true)]
async fn the_runs_a_node_makes_are_its_progress_under_auto_refresh() {
    let mut inner = StateGraph::<Counter>::new();
    for name in ["a", "b", "c"] {
        inner.add_node(name, move |_: Counter| async move {
            tokio::time::sleep(400 * MS).await;
            Ok::<_, Error>(CounterUpdate::log(name))
        });
    }
    inner.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c");
    let inner = inner.compile().unwrap();
    let parent = |refresh_on| {
        let policy = TimeoutPolicy::idle(500 * MS).unwrap().refresh_on(refresh_on);
        let mut g = StateGraph::<Counter>::new();
        g.add_node_with("sub", inner.clone(), NodeConfig::new().timeout(policy));
        g.add_edge(START, "sub");
        g.compile().unwrap()
    };
    assert_eq!(run(&parent(RefreshOn::Auto)).await.unwrap(), ["a", "b", "c"]);
    let err = run(&parent(RefreshOn::Heartbeat)).await.unwrap_err();
    assert_eq!((timeout_of(&err).kind, timeout_of(&err).node.as_str()), (TimeoutKind::Idle, "sub"));
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_retried_by_the_nodes_retry_policy() {
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let config = NodeConfig::new().timeout(TimeoutPolicy::run(1000 * MS).unwrap()).retry(quick_retry(3));
    let app = slow_graph(config, 1, 10_000 * MS, Signal::Nothing, 3, Arc::clone(&attempts));
    let started = tokio::time::Instant::now();
    assert_eq!(run(&app).await.unwrap(), ["done"]);
    assert_eq!(*attempts.lock().unwrap(), [1, 2, 3]);
    assert_eq!(started.elapsed(), (1000 + 100 + 1000 + 200) * MS, "each attempt has its own clock");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_not_retried_without_a_policy_or_when_the_policy_excludes_it() {
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let config = NodeConfig::new().timeout(TimeoutPolicy::run(1000 * MS).unwrap());
    let app = slow_graph(config, 1, 10_000 * MS, Signal::Nothing, 3, Arc::clone(&attempts));
    timeout_of(&run(&app).await.unwrap_err());
    assert_eq!(*attempts.lock().unwrap(), [1]);

    let attempts = Arc::new(Mutex::new(Vec::new()));
    let not_timeouts = quick_retry(3).retry_on(|e| e.downcast_custom::<NodeTimeoutError>().is_none());
    let config = NodeConfig::new().timeout(TimeoutPolicy::run(1000 * MS).unwrap()).retry(not_timeouts);
    let app = slow_graph(config, 1, 10_000 * MS, Signal::Nothing, 3, Arc::clone(&attempts));
    timeout_of(&run(&app).await.unwrap_err());
    assert_eq!(*attempts.lock().unwrap(), [1]);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_finishes_in_time_is_untouched() {
    let policy = TimeoutPolicy::run(1000 * MS).unwrap().with_idle(500 * MS).unwrap();
    let app = slow_graph(NodeConfig::new().timeout(policy), 1, 450 * MS, Signal::Nothing, 99, Arc::default());
    assert_eq!(run(&app).await.unwrap(), ["done"]);
}

#[test]
fn timeouts_that_are_not_positive_are_refused() {
    let zero = TimeoutPolicy::run(Duration::ZERO).unwrap_err();
    assert_eq!(
        (zero.field, zero.to_string().as_str()),
        ("run_timeout", "run_timeout must be greater than 0 (got 0ns)")
    );
    assert_eq!(TimeoutPolicy::idle(Duration::ZERO).unwrap_err().field, "idle_timeout");
    let ok = TimeoutPolicy::run(MS).unwrap();
    assert_eq!(ok.with_idle(Duration::ZERO).unwrap_err().field, "idle_timeout");
    assert_eq!(TimeoutPolicy::idle(MS).unwrap().with_run(Duration::ZERO).unwrap_err().field, "run_timeout");
    for secs in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let err = TimeoutPolicy::from_secs_f64(secs).unwrap_err();
        assert_eq!(err.field, "run_timeout", "{secs}");
    }
    assert_eq!(
        TimeoutPolicy::from_secs_f64(-1.0).unwrap_err().to_string(),
        "run_timeout must be greater than 0 (got -1)"
    );
    assert_eq!(TimeoutPolicy::from_secs_f64(0.25).unwrap().run_timeout(), Some(250 * MS));
}

#[test]
fn a_sync_node_with_a_timeout_does_not_compile() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node_with(
        "sync",
        |_: Counter| CounterUpdate::log("x"),
        NodeConfig::new().timeout(TimeoutPolicy::run(MS).unwrap()),
    );
    g.add_edge(START, "sync");
    let err = g.compile().unwrap_err();
    assert!(matches!(&err, GraphError::SyncNodeTimeout(node) if node == "sync"), "{err:?}");
    assert_eq!(
        err.to_string(),
        "node timeouts are only supported for async nodes because a sync function cannot be cancelled while it \
         runs; node 'sync' is sync"
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_inside_a_subgraph_reaches_the_caller_as_a_node_timeout() {
    let inner = slow_graph(
        NodeConfig::new().timeout(TimeoutPolicy::run(200 * MS).unwrap()),
        1,
        10_000 * MS,
        Signal::Nothing,
        99,
        Arc::default(),
    );
    let mut g = StateGraph::<Counter>::new();
    g.add_node("sub", inner);
    g.add_edge(START, "sub");
    let err = run(&g.compile().unwrap()).await.unwrap_err();
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "sub"), "{err}");
    let timeout = timeout_of(&err);
    assert_eq!((timeout.node.as_str(), timeout.kind, timeout.elapsed), ("slow", TimeoutKind::Run, 200 * MS));
}

#[tokio::test]
async fn a_heartbeat_without_a_timeout_does_nothing() {
    let app = slow_graph(NodeConfig::new(), 2, MS, Signal::Heartbeat, 99, Arc::default());
    assert_eq!(run(&app).await.unwrap(), ["done"]);
}

/// A timed node that asks twice: its interrupts pause the run and its answers resume it, as for a node
/// without a timeout.
#[tokio::test]
async fn a_timed_node_pauses_and_resumes_like_any_other() {
    let mut g = StateGraph::<Counter>::new();
    let ask = |_: Counter, rt: Runtime| async move {
        let first: String = rt.interrupt("first?")?;
        let second: String = rt.interrupt("second?")?;
        Ok::<_, Error>(CounterUpdate::log(&format!("{first}+{second}")))
    };
    g.add_node_with("ask", ask, NodeConfig::new().timeout(TimeoutPolicy::run(60_000 * MS).unwrap()));
    g.add_edge(START, "ask");
    let saver = Arc::new(weft_graph::InMemorySaver::new());
    let app = g.compile_with(weft_graph::CompileConfig::new().checkpointer(saver)).unwrap();
    let thread = RunnableConfig::default().with_configurable("thread_id", "t");
    let paused = app.invoke(CounterUpdate::default(), &thread).await.unwrap();
    assert_eq!(paused.interrupts[0].value, "first?");
    let paused = app.invoke(weft_graph::Command::<Counter>::resume("one"), &thread).await.unwrap();
    assert_eq!(paused.interrupts[0].value, "second?");
    let done = app.invoke(weft_graph::Command::<Counter>::resume("two"), &thread).await.unwrap();
    assert_eq!(done.value.log, ["one+two"]);
}

/// An entrypoint calling a task that takes `steps` steps of 60 ms (heartbeating after each when
/// `heartbeat`) on its runs before run `fast_from`, under `policy` and up to `attempts` attempts.
fn task_app(
    policy: TimeoutPolicy,
    steps: u32,
    heartbeat: bool,
    fast_from: u32,
    attempts: u32,
) -> CompiledGraph<weft_graph::func::FuncState<i64, i64>> {
    let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let slow = weft_graph::func::task("slow_task", move |x: i64| {
        let run = runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        async move {
            let rt = weft_graph::func::runtime().unwrap();
            if run < fast_from {
                for _ in 0..steps {
                    tokio::time::sleep(60 * MS).await;
                    if heartbeat {
                        rt.heartbeat();
                    }
                }
            }
            Ok(x + 1)
        }
    })
    .with_timeout(policy)
    .with_retry(RetryPolicy::new().max_attempts(attempts).initial_interval(10 * MS).jitter(false));
    weft_graph::func::entrypoint("main", move |x: i64, _: Option<i64>, _rt| {
        let slow = slow.clone();
        async move { slow.call(x).await }
    })
    .compile()
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_task_past_its_timeout_fails_with_a_timeout_naming_the_task() {
    let app = task_app(TimeoutPolicy::run(100 * MS).unwrap(), 10, false, 99, 1);
    let err = app.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    let timeout = timeout_of(&err);
    assert_eq!(
        (timeout.node.as_str(), timeout.kind, timeout.elapsed),
        ("slow_task", TimeoutKind::Run, 100 * MS)
    );
}

#[tokio::test(start_paused = true)]
async fn a_task_that_heartbeats_outlives_its_idle_timeout_and_a_timed_out_task_is_retried() {
    let idle = TimeoutPolicy::idle(100 * MS).unwrap();
    let app = task_app(idle, 10, true, 99, 1);
    assert_eq!(app.invoke(1, &RunnableConfig::default()).await.unwrap().value.value(), Some(&2));

    let err = task_app(idle, 10, false, 99, 1).invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(timeout_of(&err).kind, TimeoutKind::Idle);

    let retried = task_app(idle, 10, false, 2, 2);
    assert_eq!(retried.invoke(1, &RunnableConfig::default()).await.unwrap().value.value(), Some(&2));
}
