//! A scaled-out server (feature `scale`): several instances on one PostgreSQL and one Redis. Each test gets
//! a database of its own (dropped after) and a Redis key prefix of its own. Without PostgreSQL at
//! 127.0.0.1:5432 or Redis at 127.0.0.1:6379 (`WEFT_TEST_PG_ADMIN_URL`, `WEFT_TEST_REDIS_URL` override
//! them) the tests skip loudly, and fail in CI (`CI` set).
#![cfg(feature = "scale")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::open::Open;
use serde_json::{Value, json};
use sqlx::Connection as _;
use weft_graph::{CompiledGraph, END, JsonState, START, StateGraph};
use weft_server::{Server, ServerBuilder};

fn admin_url() -> String {
    std::env::var("WEFT_TEST_PG_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn redis_url() -> String {
    std::env::var("WEFT_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}

/// A database of one test, dropped when this goes.
struct Deployment {
    name: String,
    database_uri: String,
    prefix: String,
}

impl Deployment {
    /// An instance of the deployment.
    fn builder(&self) -> ServerBuilder {
        Server::builder().postgres(&self.database_uri).redis(redis_url()).redis_prefix(&self.prefix)
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&admin_url()).await.ok()?;
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.ok()
            })
        })
        .join();
    }
}

fn unreachable(what: &str) -> Option<Deployment> {
    weft_testenv::skip_or_fail(what, "unreachable", "`cargo xtask services` starts PostgreSQL and Redis");
    None
}

/// A fresh database and key prefix, or `None` (skipped loudly) when PostgreSQL or Redis is not there.
async fn deployment() -> Option<Deployment> {
    let connect =
        tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&admin_url())).await;
    let Ok(Ok(mut conn)) = connect else {
        return unreachable("PostgreSQL at 127.0.0.1:5432 cannot be reached");
    };
    let redis = redis_url();
    let addr = redis.trim_start_matches("redis://").trim_end_matches('/').to_owned();
    if tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_or(true, |c| c.is_err())
    {
        return unreachable("Redis at 127.0.0.1:6379 cannot be reached");
    }
    let name = format!("weft_scale_{}", uuid::Uuid::new_v4().simple());
    let sql = format!("CREATE DATABASE \"{name}\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
    let base = admin_url();
    let database_uri = format!("{}/{name}", base.rsplit_once('/').unwrap().0);
    Some(Deployment { prefix: format!("{name}:"), name, database_uri })
}

/// `a` (counted) → `wait` (sleeps `delay` seconds, counted) → `b`: what ran how often.
fn counted(a_runs: Arc<AtomicUsize>, waits: Arc<AtomicUsize>) -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(common::state());
    g.add_node("a", move |_: &JsonState| {
        a_runs.fetch_add(1, Ordering::SeqCst);
        json!({"items": ["a"]})
    });
    g.add_node("wait", move |s: Value| {
        let waits = Arc::clone(&waits);
        async move {
            waits.fetch_add(1, Ordering::SeqCst);
            let delay = s.get("delay").and_then(Value::as_f64).unwrap_or(0.0);
            tokio::time::sleep(Duration::from_secs_f64(delay)).await;
            Ok::<_, weft_runnable_core::Error>(json!({"items": ["slept"]}))
        }
    });
    g.add_node("b", |_: &JsonState| json!({"items": ["b"]}));
    g.add_edge(START, "a");
    g.add_edge("a", "wait");
    g.add_edge("wait", "b");
    g.add_edge("b", END);
    g.compile().unwrap()
}

async fn wait_for_status(addr: std::net::SocketAddr, thread_id: &str, run_id: &str, status: &str) -> Value {
    for _ in 0..300 {
        let run = common::get(addr, &format!("/threads/{thread_id}/runs/{run_id}")).await.json();
        if run["status"] == status {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("run {run_id} never became {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_starting_together_make_the_tables_once_and_share_the_records() {
    let Some(deployment) = deployment().await else { return };
    let builds = (0..3).map(|_| deployment.builder().graph("simple", common::simple()).build());
    let servers = futures::future::join_all(builds).await;
    let servers: Vec<_> = servers.into_iter().map(Result::unwrap).collect();
    let a = common::start(deployment.builder().graph("simple", common::simple())).await;
    let b = common::start(deployment.builder().graph("simple", common::simple())).await;
    drop(servers);
    let count = common::post(a.addr, "/assistants/count", json!({})).await.json();
    assert_eq!(count, json!(1), "one assistant for the graph, whatever the number of instances");
    let thread = common::thread(a.addr).await;
    let seen = common::get(b.addr, &format!("/threads/{thread}")).await;
    assert_eq!(seen.status, 200, "a thread made through one instance is there through another");
    let patched =
        common::send(b.addr, "PATCH", &format!("/threads/{thread}"), Some(br#"{"metadata": {"k": 1}}"#), &[])
            .await;
    assert_eq!(patched.status, 200);
    let read = common::get(a.addr, &format!("/threads/{thread}")).await.json();
    assert_eq!(read["metadata"]["k"], json!(1), "no instance reads a stale copy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_made_through_one_instance_streams_and_joins_through_another() {
    let Some(deployment) = deployment().await else { return };
    let graph = || counted(Arc::default(), Arc::default());
    let a = common::start(deployment.builder().graph("counted", graph())).await;
    let b = common::start(deployment.builder().graph("counted", graph())).await;
    let thread = common::thread(a.addr).await;
    let run = common::post(
        a.addr,
        &format!("/threads/{thread}/runs"),
        json!({"assistant_id": "counted", "input": {"delay": 0.3}, "stream_resumable": true}),
    )
    .await
    .json();
    let run_id = run["run_id"].as_str().unwrap();
    let joined = common::get(b.addr, &format!("/threads/{thread}/runs/{run_id}/join")).await.json();
    assert_eq!(joined["items"], json!(["a", "slept", "b"]));
    // A resumable run's events replay through any instance, from the start.
    let replay = common::send(
        a.addr,
        "GET",
        &format!("/threads/{thread}/runs/{run_id}/stream"),
        None,
        &[("Last-Event-ID", "-1")],
    )
    .await;
    assert!(replay.body.starts_with("event: metadata"), "{}", replay.body);
    assert!(replay.body.contains(r#""items":["a","slept","b"]"#), "{}", replay.body);
    let cancel = common::post(
        b.addr,
        &format!("/threads/{thread}/runs"),
        json!({"assistant_id": "counted", "input": {"delay": 30}}),
    )
    .await
    .json();
    let cancel_id = cancel["run_id"].as_str().unwrap();
    wait_for_status(a.addr, &thread, cancel_id, "running").await;
    let asked = common::post(a.addr, &format!("/threads/{thread}/runs/{cancel_id}/cancel"), json!({})).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    wait_for_status(b.addr, &thread, cancel_id, "interrupted").await;
}

/// A run that ends records the thread's state its graph handed back (no read of it at the end): what the
/// thread's `/state` reads from PostgreSQL's checkpoints, run after run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_records_the_state_the_checkpoints_hold() {
    let Some(deployment) = deployment().await else { return };
    let a =
        common::start(deployment.builder().graph("counted", counted(Arc::default(), Arc::default()))).await;
    let thread = common::thread(a.addr).await;
    for turn in 1..=2 {
        let run = common::post(
            a.addr,
            &format!("/threads/{thread}/runs/wait"),
            json!({"assistant_id": "counted", "input": {"delay": 0}}),
        )
        .await
        .json();
        assert_eq!(run["items"].as_array().map(Vec::len), Some(3 * turn), "{run}");
        let record = common::get(a.addr, &format!("/threads/{thread}")).await.json();
        let state = common::get(a.addr, &format!("/threads/{thread}/state")).await.json();
        assert_eq!(record["status"], "idle", "{record}");
        assert_eq!(record["values"], state["values"], "turn {turn}: {record} against {state}");
        assert_eq!(state["next"], json!([]));
        assert_eq!(record["interrupts"], json!({}), "{record}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_instance_dies_is_taken_over_from_its_last_checkpoint() {
    let Some(deployment) = deployment().await else { return };
    let (a_runs, waits) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // Instance A lives on a runtime of its own: shutting it down stops all its tasks at once, as a kill
    // would (its connections close, its leases are no longer renewed).
    let doomed = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let builder = deployment
        .builder()
        .graph("counted", counted(Arc::clone(&a_runs), Arc::clone(&waits)))
        .run_lease(Duration::from_millis(600));
    let a = doomed.spawn(async move { common::start(builder).await }).await.unwrap();
    let thread = common::thread(a.addr).await;
    let run = common::post(
        a.addr,
        &format!("/threads/{thread}/runs"),
        json!({"assistant_id": "counted", "input": {"delay": 2.0}, "durability": "sync"}),
    )
    .await
    .json();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    for _ in 0..100 {
        if waits.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(waits.load(Ordering::SeqCst), 1, "the run reached its slow step on A");
    std::mem::forget(a);
    doomed.shutdown_background();
    let b = common::start(
        deployment
            .builder()
            .graph("counted", counted(Arc::clone(&a_runs), Arc::clone(&waits)))
            .run_lease(Duration::from_millis(600)),
    )
    .await;
    let done = wait_for_status(b.addr, &thread, &run_id, "success").await;
    assert_eq!(done["status"], "success");
    let state = common::get(b.addr, &format!("/threads/{thread}/state")).await.json();
    assert_eq!(state["values"]["items"], json!(["a", "slept", "b"]), "the run's input is not applied twice");
    assert_eq!(a_runs.load(Ordering::SeqCst), 1, "a finished step is not run again");
    assert_eq!(waits.load(Ordering::SeqCst), 2, "the step in flight at the death runs again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_joined_through_another_instance_answers_as_soon_as_it_ends() {
    let Some(deployment) = deployment().await else { return };
    let a = common::start(deployment.builder().graph("simple", common::simple())).await;
    let b = common::start(deployment.builder().graph("simple", common::simple())).await;
    let thread = common::thread(a.addr).await;
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let run = common::post(
            a.addr,
            &format!("/threads/{thread}/runs"),
            json!({"assistant_id": "simple", "input": {"items": []}}),
        )
        .await
        .json();
        let run_id = run["run_id"].as_str().unwrap();
        let joined = common::get(b.addr, &format!("/threads/{thread}/runs/{run_id}/join")).await.json();
        assert!(joined["items"].as_array().is_some_and(|items| items.ends_with(&[json!("a"), json!("b")])));
        // The worker's last events go out at once: a join elsewhere does not wait for a timeout.
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "the run took {took:?} to join through another instance");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_stream_hears_the_runs_and_state_updates_made_through_another_instance() {
    let Some(deployment) = deployment().await else { return };
    let a = common::start(deployment.builder().graph("simple", common::simple())).await;
    let b = common::start(deployment.builder().graph("simple", common::simple())).await;
    let thread = common::thread(a.addr).await;
    let path = format!("/threads/{thread}/stream?stream_mode=run_modes&stream_mode=state_update");
    let mut heard = Open::get(b.addr, &path, &[]).await;
    assert_eq!(heard.status, 200);
    let mut run_ids = Vec::new();
    for _ in 0..2 {
        let run = common::post(
            a.addr,
            &format!("/threads/{thread}/runs"),
            json!({"assistant_id": "simple", "input": {"items": []}}),
        )
        .await
        .json();
        let run_id = run["run_id"].as_str().unwrap().to_owned();
        common::get(a.addr, &format!("/threads/{thread}/runs/{run_id}/join")).await;
        run_ids.push(run_id);
    }
    let updated =
        common::post(a.addr, &format!("/threads/{thread}/state"), json!({"values": {"items": ["x"]}})).await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    let events = heard.events(11).await;
    let names: Vec<&str> = events.iter().map(|(name, _, _)| name.as_str()).collect();
    let one_run = ["metadata", "values", "values", "values", "metadata"];
    assert_eq!(names[..5], one_run, "{events:?}");
    assert_eq!(names[5..10], one_run, "{events:?}");
    assert_eq!(names[10], "state_update", "{events:?}");
    for (i, run_id) in run_ids.iter().enumerate() {
        assert_eq!(events[i * 5].1, json!({"run_id": run_id, "attempt": 1}), "the run's first event");
        assert_eq!(events[i * 5 + 4].1, json!({"status": "run_done", "run_id": run_id}), "the run's end");
    }
    assert_eq!(events[10].1["thread_id"], json!(thread));
    assert_eq!(events[10].1["state"]["values"]["items"], json!(["a", "b", "a", "b", "x"]));
    // Every event once: what this instance and Redis both told of is not repeated.
    let rest = heard.quiet_for(Duration::from_millis(1500)).await;
    assert_eq!(common::open::parse(&rest).len(), 11, "{rest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_resumable_run_replays_through_an_instance_that_never_saw_it() {
    let Some(deployment) = deployment().await else { return };
    let a = common::start(deployment.builder().graph("simple", common::simple())).await;
    let thread = common::thread(a.addr).await;
    let body = json!({"assistant_id": "simple", "input": {"items": []}, "stream_resumable": true});
    let run = common::post(a.addr, &format!("/threads/{thread}/runs"), body).await.json();
    let run_id = run["run_id"].as_str().unwrap();
    wait_for_status(a.addr, &thread, run_id, "success").await;
    // An instance started after the run ended holds nothing of it: its events come from Redis.
    let b = common::start(deployment.builder().graph("simple", common::simple())).await;
    let path = format!("/threads/{thread}/runs/{run_id}/stream");
    let all = common::send(b.addr, "GET", &path, None, &[("Last-Event-ID", "-1")]).await;
    let events = common::open::parse(&all.body);
    let names: Vec<&str> = events.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(names, ["metadata", "values", "values", "values"], "{}", all.body);
    assert_eq!(events[3].1["items"], json!(["a", "b"]));
    let after_first = common::send(b.addr, "GET", &path, None, &[("Last-Event-ID", &events[0].2)]).await;
    assert_eq!(common::open::parse(&after_first.body).len(), 3, "{}", after_first.body);
    // So does the thread's stream through another such instance, then the run's end.
    let c = common::start(deployment.builder().graph("simple", common::simple())).await;
    let mut thread_stream =
        Open::get(c.addr, &format!("/threads/{thread}/stream"), &[("Last-Event-ID", "-")]).await;
    let replayed = thread_stream.events(5).await;
    let names: Vec<&str> = replayed.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(names, ["metadata", "values", "values", "values", "metadata"]);
    assert_eq!(replayed[4].1, json!({"status": "run_done", "run_id": run_id}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_instance_hands_its_run_to_another_at_once_without_running_a_step_twice() {
    let Some(deployment) = deployment().await else { return };
    let (a_runs, waits) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // A lease far longer than the test: only the drain's release can hand the run over in time.
    let lease = Duration::from_secs(30);
    let instance = || {
        deployment
            .builder()
            .graph("counted", counted(Arc::clone(&a_runs), Arc::clone(&waits)))
            .run_lease(lease)
    };
    let a = common::start(instance()).await;
    let thread = common::thread(a.addr).await;
    let body = json!({"assistant_id": "counted", "input": {"delay": 1.0}, "stream_mode": ["updates"],
                      "stream_resumable": true});
    let run = common::post(a.addr, &format!("/threads/{thread}/runs"), body).await.json();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    for _ in 0..250 {
        if waits.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(waits.load(Ordering::SeqCst), 1, "the run reached its slow step on A");
    let b = common::start(instance()).await;
    let stopped = std::time::Instant::now();
    drop(a); // A shuts down: it drains.
    let done = wait_for_status(b.addr, &thread, &run_id, "success").await;
    let took = stopped.elapsed();
    assert_eq!(done["status"], "success");
    assert!(took < Duration::from_secs(10), "taken over at once, not at the lease's end: {took:?}");
    let state = common::get(b.addr, &format!("/threads/{thread}/state")).await.json();
    assert_eq!(state["values"]["items"], json!(["a", "slept", "b"]));
    assert_eq!(a_runs.load(Ordering::SeqCst), 1, "a finished step is not run again");
    assert_eq!(waits.load(Ordering::SeqCst), 1, "the step in flight at the drain finished, and only once");
    // The run's stream, through B: each step's event once.
    let path = format!("/threads/{thread}/runs/{run_id}/stream");
    let replay = common::send(b.addr, "GET", &path, None, &[("Last-Event-ID", "-1")]).await;
    let updates: Vec<&str> =
        replay.body.split("\r\n\r\n").filter(|frame| frame.starts_with("event: updates")).collect();
    assert_eq!(updates.len(), 3, "{}", replay.body);
    for (frame, node) in updates.iter().zip(["\"a\"", "\"wait\"", "\"b\""]) {
        assert!(frame.contains(node), "{frame} is of {node}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_task_freezes_is_ended_by_the_watchdog_while_its_lease_is_renewed() {
    let Some(deployment) = deployment().await else { return };
    let stuck = Arc::new(AtomicUsize::new(0));
    // The lease is renewed every 100 ms, many times over while the run is stuck: the watchdog, not a
    // lapsed lease, ends it.
    let instance = || {
        deployment
            .builder()
            .graph("frozen", common::frozen(Arc::clone(&stuck)))
            .run_lease(Duration::from_millis(300))
            .run_watchdog(Some(Duration::from_millis(1500)))
    };
    let a = common::start(instance()).await;
    let b = common::start(instance()).await;
    let thread = common::thread(a.addr).await;
    let started = std::time::Instant::now();
    let streamed = tokio::time::timeout(
        Duration::from_secs(30),
        common::post(
            b.addr,
            &format!("/threads/{thread}/runs/stream"),
            json!({"assistant_id": "frozen", "input": {"delay": -1}, "stream_mode": ["values"]}),
        ),
    )
    .await
    .expect("the stream of a frozen run ends");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1500), "ended after {waited:?}, before the watchdog's time");
    let events = common::open::parse(&streamed.body);
    let (_, error, _) = events.iter().find(|(name, _, _)| name == "error").expect("an error event");
    assert_eq!(error["error"], "RunStalled", "{error}");
    assert!(error["message"].as_str().unwrap().contains("no progress"), "{error}");
    assert_eq!(stuck.load(Ordering::SeqCst), 1, "the run was not taken over by another worker");
    let (_, metadata, _) = events.first().expect("a metadata event");
    let run_id = metadata["run_id"].as_str().unwrap();
    let run = common::get(a.addr, &format!("/threads/{thread}/runs/{run_id}")).await.json();
    assert_eq!(run["status"], "error", "{run}");
    let state = common::get(a.addr, &format!("/threads/{thread}")).await.json();
    assert_ne!(state["status"], "busy", "{state}");
    // The thread is free: its next run runs at once and succeeds.
    let next = tokio::time::timeout(
        Duration::from_secs(30),
        common::post(
            a.addr,
            &format!("/threads/{thread}/runs/wait"),
            json!({"assistant_id": "frozen", "input": {"delay": 0}}),
        ),
    )
    .await
    .expect("the thread's next run ends");
    assert_eq!(next.status, 200, "{}", next.body);
    assert_eq!(next.json()["items"], json!(["a", "a", "done"]), "{}", next.body);
}

/// Thread TTLs, scaled out: two instances sweeping every 100 ms (one claims each sweep).
fn sweeping(deployment: &Deployment) -> ServerBuilder {
    deployment.builder().graph("simple", common::simple()).thread_ttl(weft_server::ThreadTtlConfig {
        sweep_interval: Duration::from_millis(100),
        ..weft_server::ThreadTtlConfig::default()
    })
}

async fn eventually_true<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

async fn ttl_thread(addr: std::net::SocketAddr, strategy: &str, runs: usize) -> String {
    let made = common::post(addr, "/threads", json!({"ttl": {"strategy": strategy, "ttl": 0.01}})).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let thread_id = made.json()["thread_id"].as_str().unwrap().to_owned();
    for _ in 0..runs {
        let path = format!("/threads/{thread_id}/runs/wait");
        let run = common::post(addr, &path, json!({"assistant_id": "simple", "input": {}})).await;
        assert_eq!(run.status, 200, "{}", run.body);
    }
    thread_id
}

async fn checkpoint_rows(deployment: &Deployment, thread_id: &str) -> i64 {
    let mut conn = sqlx::PgConnection::connect(&deployment.database_uri).await.unwrap();
    sqlx::query_scalar("SELECT count(*) FROM checkpoints WHERE thread_id = $1")
        .bind(thread_id)
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_thread_is_deleted_by_one_instance_for_all() {
    let Some(deployment) = deployment().await else { return };
    let a = common::start(sweeping(&deployment)).await;
    let b = common::start(sweeping(&deployment)).await;
    let thread_id = ttl_thread(a.addr, "delete", 1).await;
    assert!(checkpoint_rows(&deployment, &thread_id).await > 1);
    eventually_true("the thread is gone through the other instance", || async {
        common::get(b.addr, &format!("/threads/{thread_id}")).await.status == 404
    })
    .await;
    assert_eq!(common::get(a.addr, &format!("/threads/{thread_id}")).await.status, 404);
    assert_eq!(checkpoint_rows(&deployment, &thread_id).await, 0, "its checkpoints went with it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_keep_latest_thread_keeps_one_checkpoint_row() {
    let Some(deployment) = deployment().await else { return };
    let a = common::start(sweeping(&deployment)).await;
    let b = common::start(sweeping(&deployment)).await;
    let thread_id = ttl_thread(b.addr, "keep_latest", 3).await;
    assert!(checkpoint_rows(&deployment, &thread_id).await > 3);
    eventually_true("one checkpoint row left", || async {
        checkpoint_rows(&deployment, &thread_id).await == 1
    })
    .await;
    let thread = common::get(a.addr, &format!("/threads/{thread_id}")).await;
    assert_eq!(thread.status, 200, "the thread stays");
    assert_eq!(thread.json()["values"]["items"], json!(["a", "b", "a", "b", "a", "b"]));
    let path = format!("/threads/{thread_id}/runs/wait");
    let run = common::post(a.addr, &path, json!({"assistant_id": "simple", "input": {}})).await;
    assert_eq!(run.status, 200, "the thread goes on from its kept checkpoint: {}", run.body);
    assert_eq!(run.json()["items"].as_array().map(Vec::len), Some(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_whose_cancel_cannot_be_recorded_makes_no_new_run_and_says_why() {
    let Some(deployment) = deployment().await else { return };
    let graph = || counted(Arc::default(), Arc::default());
    let a = common::start(deployment.builder().graph("counted", graph())).await;
    let b = common::start(deployment.builder().graph("counted", graph())).await;
    let thread = common::thread(a.addr).await;
    let runs = format!("/threads/{thread}/runs");
    let first = common::post(a.addr, &runs, json!({"assistant_id": "counted", "input": {"delay": 3}})).await;
    let first = first.json()["run_id"].as_str().unwrap().to_owned();
    wait_for_status(a.addr, &thread, &first, "running").await;

    // The queue now refuses to record a cancel (leases are still renewed).
    let mut db = sqlx::PgConnection::connect(&deployment.database_uri).await.unwrap();
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_cancel() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'the queue refused the cancel'; END $$; \
         CREATE TRIGGER refuse_cancel BEFORE UPDATE OF cancel ON weft_server_queue \
         FOR EACH ROW WHEN (NEW.cancel IS NOT NULL) EXECUTE FUNCTION refuse_cancel();",
    )
    .execute(&mut db)
    .await
    .unwrap();
    for strategy in ["interrupt", "rollback"] {
        let body = json!({"assistant_id": "counted", "input": {"delay": 0}, "multitask_strategy": strategy});
        let refused = common::post(b.addr, &runs, body).await;
        assert_eq!(refused.status, 500, "{strategy}: {}", refused.body);
        assert!(refused.detail().contains("the run queue"), "{strategy}: {}", refused.detail());
        let listed = common::get(a.addr, &runs).await.json();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{strategy}: the new run was withdrawn: {listed}");
    }
    assert_eq!(wait_for_status(a.addr, &thread, &first, "running").await["run_id"], first.as_str());

    // The queue records cancels again: an interrupt stops the run in flight wherever it runs, and the new
    // run follows it.
    sqlx::raw_sql("DROP TRIGGER refuse_cancel ON weft_server_queue").execute(&mut db).await.unwrap();
    let body = json!({"assistant_id": "counted", "input": {"delay": 0}, "multitask_strategy": "interrupt"});
    let made = common::post(b.addr, &runs, body).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let next = made.json()["run_id"].as_str().unwrap().to_owned();
    wait_for_status(a.addr, &thread, &first, "interrupted").await;
    wait_for_status(b.addr, &thread, &next, "success").await;
}

/// `a` → `b` → `c`, each appending its name to `items` and counting its runs in `runs` (by node).
fn three_counted(runs: Arc<[AtomicUsize; 3]>) -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(common::state());
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        let runs = Arc::clone(&runs);
        g.add_node(name, move |_: &JsonState| {
            runs[i].fetch_add(1, Ordering::SeqCst);
            json!({"items": [name]})
        });
    }
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", "c");
    g.add_edge("c", END);
    g.compile().unwrap()
}

/// The greatest step of the thread's checkpoints, and how often the fault below refused one.
async fn stored(conn: &mut sqlx::PgConnection, thread: &str) -> (Option<i64>, i64) {
    sqlx::query_as(
        "SELECT (SELECT max((metadata ->> 'step')::bigint) FROM checkpoints WHERE thread_id = $1), \
         (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM weft_fault_hits)",
    )
    .bind(thread)
    .fetch_one(conn)
    .await
    .unwrap()
}

/// The run's last checkpoint is stored in the transaction that records its end (the end turn), so the two
/// go together: a fault injected in PostgreSQL refuses the thread's step-3 checkpoint (`c`'s, the last)
/// while it is on. The run is then never recorded ended (were the end recorded in a transaction of its
/// own, it would be, without its last checkpoint), and the step before is kept; once the fault is off,
/// the run, taken over after each failed end, ends with its last checkpoint, having run only its last
/// step again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_recorded_ended_only_with_its_last_checkpoint() {
    let Some(deployment) = deployment().await else { return };
    let runs: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let a = common::start(
        deployment
            .builder()
            .graph("three", three_counted(Arc::clone(&runs)))
            .run_lease(Duration::from_millis(300))
            .queue_poll(Duration::from_millis(100)),
    )
    .await;
    let thread = common::thread(a.addr).await;
    let mut conn = sqlx::PgConnection::connect(&deployment.database_uri).await.unwrap();
    // Each refusal advances a sequence, which the refused transaction's rollback does not undo.
    let fault = format!(
        "CREATE TABLE weft_fault (active BOOLEAN NOT NULL); INSERT INTO weft_fault VALUES (true); \
         CREATE SEQUENCE weft_fault_hits; \
         CREATE FUNCTION weft_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF NEW.thread_id = '{thread}' AND NEW.metadata ->> 'step' = '3' \
              AND (SELECT active FROM weft_fault) THEN \
             PERFORM nextval('weft_fault_hits'); \
             RAISE EXCEPTION 'injected: the last checkpoint cannot be stored'; \
           END IF; \
           RETURN NEW; \
         END $$; \
         CREATE TRIGGER weft_fault BEFORE INSERT ON checkpoints FOR EACH ROW EXECUTE FUNCTION weft_fault()"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(fault)).execute(&mut conn).await.unwrap();
    let body = json!({"assistant_id": "three", "input": {"items": []}});
    let run = common::post(a.addr, &format!("/threads/{thread}/runs"), body).await.json();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let path = format!("/threads/{thread}/runs/{run_id}");
    // Two ends refused: the run's own, and that of the worker that took it over.
    let mut hits = 0;
    for _ in 0..300 {
        let status = common::get(a.addr, &path).await.json()["status"].clone();
        let (step, refused) = stored(&mut conn, &thread).await;
        assert!(status == "pending" || status == "running", "recorded {status} without its last checkpoint");
        assert!(step.is_none_or(|s| s < 3), "the last checkpoint was stored despite the fault: {step:?}");
        hits = refused;
        if hits >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(hits >= 2, "the run's end was refused {hits} times");
    assert_eq!(stored(&mut conn, &thread).await.0, Some(2), "the step before the last is stored");
    sqlx::raw_sql("UPDATE weft_fault SET active = false").execute(&mut conn).await.unwrap();
    wait_for_status(a.addr, &thread, &run_id, "success").await;
    let (step, refused) = stored(&mut conn, &thread).await;
    assert_eq!(step, Some(3), "recorded ended, the run has its last checkpoint");
    let state = common::get(a.addr, &format!("/threads/{thread}/state")).await.json();
    let record = common::get(a.addr, &format!("/threads/{thread}")).await.json();
    assert_eq!(state["values"]["items"], json!(["a", "b", "c"]), "{state}");
    assert_eq!(record["values"], state["values"], "{record} against {state}");
    let counts: Vec<usize> = runs.iter().map(|n| n.load(Ordering::SeqCst)).collect();
    assert_eq!(&counts[..2], &[1, 1], "the steps stored before are not run again");
    assert_eq!(
        counts[2],
        usize::try_from(refused).unwrap() + 1,
        "`c` ran once per refused end, and once more"
    );
}
