//! Node timeouts and node defaults: a run timeout without retry, an idle timeout kept alive by heartbeats
//! and one that fires, a timed-out attempt retried, defaults applied graph-wide and overridden per node, a
//! subgraph not inheriting its parent's defaults (python/s_timeouts.py). The sleeps are real and short.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::graph::{
    NodeConfig, NodeDefaults, RefreshOn, RetryPolicy, RunOptions, Runtime, START, StreamMode, TimeoutPolicy,
};

use crate::kit::{Node, graph, input, log_state, saver};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    run_timeout_without_retry_fails_the_run,
    idle_timeout_is_kept_alive_by_heartbeats,
    idle_timeout_fires_without_progress,
    timed_out_attempt_is_retried_then_succeeds,
    node_defaults_apply_to_every_node_without_its_own,
    a_nodes_own_retry_policy_overrides_the_default,
    subgraph_does_not_inherit_its_parents_node_defaults,
];

/// The names of the node attempts made so far, in order.
type Tries = Arc<Mutex<Vec<String>>>;

const MS: Duration = Duration::from_millis(1);

/// `RetryPolicy(max_attempts=n, initial_interval=0.001, jitter=False)`, LangGraph's default `retry_on`.
fn quick_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new().max_attempts(max_attempts).initial_interval(MS).jitter(false)
}

/// A node's `timeout=<seconds>`.
fn run_timeout(secs: f64) -> Result<TimeoutPolicy, weft::graph::TimeoutPolicyError> {
    TimeoutPolicy::from_secs_f64(secs)
}

/// How many attempts of `name` were made.
fn count(tries: &Tries, name: &str) -> usize {
    tries.lock().map_or(0, |t| t.iter().filter(|n| *n == name).count())
}

fn names(tries: &Tries) -> Value {
    json!(tries.lock().map(|t| t.clone()).unwrap_or_default())
}

/// An async node that sleeps `sleep` in its first `slow_tries` attempts, recording each attempt.
fn sleeper(name: &str, tries: &Tries, slow_tries: usize, sleep: Duration) -> Node {
    use weft::graph::IntoNode as _;
    let name = name.to_owned();
    let tries = Arc::clone(tries);
    (move |_: Value, _rt: Runtime| {
        let (name, tries) = (name.clone(), Arc::clone(&tries));
        async move {
            if let Ok(mut t) = tries.lock() {
                t.push(name.clone());
            }
            let n = count(&tries, &name);
            if n <= slow_tries {
                tokio::time::sleep(sleep).await;
            }
            Ok::<_, weft::Error>(json!({"log": [format!("{name} after {n} tries")]}))
        }
    })
    .into_node()
}

fn run_timeout_without_retry_fails_the_run(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let tries = Tries::default();
        let mut g = graph(log_state());
        g.add_node_with(
            "slow",
            sleeper("slow", &tries, 1, 500 * MS),
            NodeConfig::new().timeout(run_timeout(0.05)?),
        );
        g.add_edge(START, "slow");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.note(json!({"op": "tries", "tries": tries.lock().map_or(0, |t| t.len())}));
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

/// A node that sleeps 50 ms `beats` times, calling `heartbeat` after each when `beat`.
fn worker(beats: u32, every: Duration, beat: bool) -> Node {
    use weft::graph::IntoNode as _;
    (move |_: Value, rt: Runtime| async move {
        if beat {
            for _ in 0..beats {
                tokio::time::sleep(every).await;
                rt.heartbeat();
            }
            Ok::<_, weft::Error>(json!({"log": [format!("worked {beats} beats")]}))
        } else {
            rt.heartbeat();
            tokio::time::sleep(every).await;
            Ok(json!({"log": ["never"]}))
        }
    })
    .into_node()
}

fn idle_timeout_is_kept_alive_by_heartbeats(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        let policy = TimeoutPolicy::idle(150 * MS)?.refresh_on(RefreshOn::Heartbeat);
        g.add_node_with("work", worker(4, 50 * MS, true), NodeConfig::new().timeout(policy));
        g.add_edge(START, "work");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        Ok(())
    })
}

fn idle_timeout_fires_without_progress(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        let policy = TimeoutPolicy::idle(50 * MS)?.refresh_on(RefreshOn::Heartbeat);
        g.add_node_with("work", worker(1, 500 * MS, false), NodeConfig::new().timeout(policy));
        g.add_edge(START, "work");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn timed_out_attempt_is_retried_then_succeeds(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let tries = Tries::default();
        let mut g = graph(log_state());
        let config = NodeConfig::new().timeout(run_timeout(0.05)?).retry(quick_retry(3));
        g.add_node_with("slow", sleeper("slow", &tries, 1, 500 * MS), config);
        g.add_edge(START, "slow");
        let app = g.compile_with(saver())?;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &modes, RunOptions::default()).await;
        rec.note(json!({"op": "tries", "tries": tries.lock().map_or(0, |t| t.len())}));
        Ok(())
    })
}

fn node_defaults_apply_to_every_node_without_its_own(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let tries = Tries::default();
        let mut g = graph(log_state());
        g.set_node_defaults(NodeDefaults::new().retry(quick_retry(3)).timeout(run_timeout(0.05)?));
        g.add_node("a", sleeper("a", &tries, 1, 500 * MS));
        g.add_node_with("b", sleeper("b", &tries, 1, 150 * MS), NodeConfig::new().timeout(run_timeout(0.5)?));
        g.add_edge(START, "a").add_edge("a", "b");
        let app = g.compile_with(saver())?;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &modes, RunOptions::default()).await;
        rec.note(json!({"op": "tries", "tries": names(&tries)}));
        Ok(())
    })
}

fn a_nodes_own_retry_policy_overrides_the_default(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let tries = Tries::default();
        let mut g = graph(log_state());
        g.set_node_defaults(NodeDefaults::new().retry(quick_retry(3)).timeout(run_timeout(0.05)?));
        g.add_node_with(
            "once",
            sleeper("once", &tries, 9, 500 * MS),
            NodeConfig::new().retry(quick_retry(1)),
        );
        g.add_edge(START, "once");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.note(json!({"op": "tries", "tries": names(&tries)}));
        Ok(())
    })
}

fn subgraph_does_not_inherit_its_parents_node_defaults(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Tries::default();
        let mut sub = graph(log_state());
        let seen = Arc::clone(&calls);
        sub.add_node("enter", move |_: Value, _rt: Runtime| {
            let seen = Arc::clone(&seen);
            async move {
                if let Ok(mut c) = seen.lock() {
                    c.push("enter".to_owned());
                }
                Ok::<_, weft::Error>(json!({"log": ["enter"]}))
            }
        });
        let seen = Arc::clone(&calls);
        sub.add_node("flaky", move |_: Value, _rt: Runtime| {
            let seen = Arc::clone(&seen);
            async move {
                if let Ok(mut c) = seen.lock() {
                    c.push("flaky".to_owned());
                }
                if count(&seen, "flaky") == 1 {
                    return Err(weft::Error::msg("first call"));
                }
                Ok(json!({"log": ["flaky"]}))
            }
        });
        sub.add_edge(START, "enter").add_edge("enter", "flaky");
        let mut g = graph(log_state());
        g.set_node_defaults(NodeDefaults::new().retry(quick_retry(3).retry_on(|_| true)));
        g.add_node("sub", sub.compile()?);
        g.add_edge(START, "sub");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.note(json!({"op": "calls", "calls": names(&calls)}));
        Ok(())
    })
}
