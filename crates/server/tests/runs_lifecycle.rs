//! Runs through their life: SSE framing, the status the SDK reads after a stream, stateless threads that
//! go away, a client that disconnects, and a run a stopped server left unfinished.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{builder, get, post, start, thread};
use serde_json::{Value, json};
use weft_graph::{END, JsonState, START, StateGraph};
use weft_server::ServerBuilder;

#[tokio::test]
async fn a_stream_is_crlf_framed_starts_with_metadata_and_ends_without_an_end_event() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let body =
        json!({"assistant_id": "simple", "input": {"items": []}, "stream_mode": ["values", "updates"]});
    let r = post(server.addr, &format!("/threads/{tid}/runs/stream"), body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream; charset=utf-8"));
    let location = r.header("location").unwrap().to_owned();
    let run_path = r.header("content-location").unwrap().to_owned();
    assert_eq!(location, format!("{run_path}/stream"));
    let run_id = run_path.rsplit('/').next().unwrap();
    let frames: Vec<&str> = r.body.split("\r\n\r\n").filter(|f| !f.is_empty()).collect();
    assert_eq!(frames[0], format!("event: metadata\r\ndata: {{\"run_id\":\"{run_id}\",\"attempt\":1}}"));
    let names: Vec<&str> =
        frames.iter().map(|f| f.lines().next().unwrap().trim_start_matches("event: ")).collect();
    assert_eq!(names, ["metadata", "values", "updates", "values", "updates", "values"]);
    assert!(!r.body.contains("\n\n"), "every line ends in CRLF");
    assert_eq!(frames[5], "event: values\r\ndata: {\"items\":[\"a\",\"b\"]}");
    // What the SDK asks after a stream closes without an end event.
    let run = get(server.addr, &run_path).await.json();
    assert_eq!(run["status"], "success");
}

#[tokio::test]
async fn resumable_runs_replay_with_ids_and_others_do_not() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let run = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "simple", "input": {}, "stream_resumable": true}),
    )
    .await
    .json();
    let rid = run["run_id"].as_str().unwrap();
    get(server.addr, &format!("/threads/{tid}/runs/{rid}/join")).await;
    let replay = common::send(
        server.addr,
        "GET",
        &format!("/threads/{tid}/runs/{rid}/stream"),
        None,
        &[("Last-Event-ID", "-1")],
    )
    .await;
    let frames: Vec<&str> = replay.body.split("\r\n\r\n").filter(|f| !f.is_empty()).collect();
    assert_eq!(frames.len(), 3, "metadata and two values: {}", replay.body);
    assert!(
        frames.iter().all(|f| f.lines().nth(2).is_some_and(|l| l.starts_with("id: "))),
        "{}",
        replay.body
    );
    let plain =
        post(server.addr, &format!("/threads/{tid}/runs"), json!({"assistant_id": "simple", "input": {}}))
            .await
            .json();
    let pid = plain["run_id"].as_str().unwrap();
    get(server.addr, &format!("/threads/{tid}/runs/{pid}/join")).await;
    let replay = common::send(
        server.addr,
        "GET",
        &format!("/threads/{tid}/runs/{pid}/stream"),
        None,
        &[("Last-Event-ID", "-1")],
    )
    .await;
    assert_eq!((replay.status, replay.body.as_str()), (200, ""), "a finished run that kept nothing");
}

#[tokio::test]
async fn a_stateless_run_takes_its_thread_with_it() {
    let server = start(builder()).await;
    let r =
        post(server.addr, "/runs/wait", json!({"assistant_id": "simple", "input": {"items": ["s"]}})).await;
    assert_eq!(r.json(), json!({"items": ["s", "a", "b"]}));
    let thread_path = r.header("content-location").unwrap().rsplitn(3, '/').nth(2).unwrap().to_owned();
    assert_eq!(get(server.addr, &thread_path).await.status, 404, "{thread_path}");
    let kept = post(
        server.addr,
        "/runs/wait",
        json!({"assistant_id": "simple", "input": {}, "on_completion": "keep"}),
    )
    .await;
    let kept_path = kept.header("content-location").unwrap().rsplitn(3, '/').nth(2).unwrap().to_owned();
    let thread = get(server.addr, &kept_path).await.json();
    assert_eq!(thread["values"], json!({"items": ["a", "b"]}), "on_completion keep");
}

#[tokio::test]
async fn a_client_that_leaves_cancels_a_run_with_on_disconnect_cancel() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let body = json!({"assistant_id": "slow", "input": {"delay": 30}, "on_disconnect": "cancel"});
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "POST /threads/{tid}/runs/stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.to_string().len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 512];
    let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("200 OK"));
    drop(stream);
    for _ in 0..200 {
        let runs = get(server.addr, &format!("/threads/{tid}/runs")).await.json();
        if runs[0]["status"] == "interrupted" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the run was not cancelled when its client left");
}

/// Calls of the recovery test's slow node.
static CALLS: AtomicUsize = AtomicUsize::new(0);

/// `first`, then `stuck`, whose first call (counted in `calls`) never returns in time (its server is
/// stopped meanwhile); later calls return at once.
fn stuck_once(calls: &'static AtomicUsize) -> weft_graph::CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(common::state());
    g.add_node("first", |_: &JsonState| json!({"items": ["first"]}));
    g.add_node("stuck", move |_: Value| async move {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok::<_, weft_runnable_core::Error>(json!({"items": ["stuck"]}))
    });
    g.add_edge(START, "first");
    g.add_edge("first", "stuck");
    g.add_edge("stuck", END);
    g.compile().unwrap()
}

/// Starts a server, runs graph `g` with `input` on a new thread and waits until the run reaches its
/// `stuck` node (counted in `calls`); returns the thread and run ids, the run still going.
async fn run_until_stuck(server: ServerBuilder, calls: &AtomicUsize, input: Value) -> (String, String) {
    let s = start(server).await;
    let tid = thread(s.addr).await;
    let run = post(s.addr, &format!("/threads/{tid}/runs"), json!({"assistant_id": "g", "input": input}))
        .await
        .json();
    for _ in 0..400 {
        if calls.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the run reached its slow node");
    (tid, run["run_id"].as_str().unwrap().to_owned())
}

#[test]
fn a_run_a_stopped_server_left_running_finishes_after_a_restart_from_its_checkpoint() {
    let dir = std::env::temp_dir().join(format!("weft-server-recovery-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("server.db");
    let server = || weft_server::Server::builder().graph("g", stuck_once(&CALLS)).sqlite(&db);
    let (tid, rid) = tokio::runtime::Runtime::new().unwrap().block_on(run_until_stuck(
        server(),
        &CALLS,
        json!({"items": ["in"]}),
    ));
    // The runtime is gone: so is the run's worker, mid-node, as in a crash.
    let (state, run) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s = start(server()).await;
        let joined = get(s.addr, &format!("/threads/{tid}/runs/{rid}/join")).await.json();
        let run = get(s.addr, &format!("/threads/{tid}/runs/{rid}")).await.json();
        (joined, run)
    });
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(run["status"], "success", "{run}");
    assert_eq!(
        state,
        json!({"items": ["in", "first", "stuck"]}),
        "the input applied once, `first` not run again"
    );
}

/// Calls of the unreadable-head test's slow node.
static STUCK_CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_restarted_run_that_cannot_read_its_threads_head_fails_saying_so() {
    let dir = std::env::temp_dir().join(format!("weft-server-head-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("server.db");
    let server = || weft_server::Server::builder().graph("g", stuck_once(&STUCK_CALLS)).sqlite(&db);
    let (tid, rid) =
        tokio::runtime::Runtime::new().unwrap().block_on(run_until_stuck(server(), &STUCK_CALLS, json!({})));
    // Stopped mid-run; then the checkpoints cannot be read (their table is gone).
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&db);
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        sqlx::query("ALTER TABLE checkpoints RENAME TO checkpoints_gone").execute(&pool).await.unwrap();
        pool.close().await;
    });
    let run = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s = start(server()).await;
        let joined = get(s.addr, &format!("/threads/{tid}/runs/{rid}/join")).await;
        assert_eq!(joined.status, 200, "{}", joined.body);
        (joined.json(), get(s.addr, &format!("/threads/{tid}/runs/{rid}")).await.json())
    });
    std::fs::remove_dir_all(&dir).unwrap();
    let (joined, run) = run;
    assert_eq!(run["status"], "error", "{run}");
    let error = &joined["__error__"];
    assert_eq!(error["error"], "CheckpointError", "{joined}");
    assert!(error["message"].as_str().unwrap().contains("cannot read the head of thread"), "{joined}");
    assert_eq!(STUCK_CALLS.load(Ordering::SeqCst), 1, "the run did not start over from its input");
}

#[tokio::test]
async fn quiet_streams_send_heartbeats_and_waits_send_newlines() {
    let server = start(builder().keep_alive(Duration::from_millis(100))).await;
    let tid = thread(server.addr).await;
    let body = json!({"assistant_id": "slow", "input": {"delay": 0.45}, "stream_mode": "updates"});
    let r = post(server.addr, &format!("/threads/{tid}/runs/stream"), body).await;
    let beats = r.body.matches(": heartbeat\r\n\r\n").count();
    assert!(beats >= 2, "heartbeats while `wait` sleeps: {:?}", r.body);
    assert!(r.body.starts_with("event: metadata\r\n"), "{:?}", r.body);
    assert!(r.body.ends_with("event: updates\r\ndata: {\"b\":{\"items\":[\"b\"]}}\r\n\r\n"), "{:?}", r.body);
    let r = post(
        server.addr,
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "slow", "input": {"delay": 0.45}}),
    )
    .await;
    assert!(r.body.starts_with("\n\n"), "newlines while the run goes on: {:?}", r.body);
    assert_eq!(
        r.json()["delay"],
        json!(0.45),
        "then the answer, which JSON parsers read past the whitespace"
    );
}

#[tokio::test]
async fn a_run_with_after_seconds_waits_pending_then_runs() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let run = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "simple", "input": {}, "after_seconds": 0.4}),
    )
    .await
    .json();
    let rid = run["run_id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let early = get(server.addr, &format!("/threads/{tid}/runs/{rid}")).await.json();
    assert_eq!(early["status"], "pending", "{early}");
    let joined = get(server.addr, &format!("/threads/{tid}/runs/{rid}/join")).await.json();
    assert_eq!(joined, json!({"items": ["a", "b"]}));
    let done = get(server.addr, &format!("/threads/{tid}/runs/{rid}")).await.json();
    assert_eq!(done["status"], "success");
}

#[tokio::test]
async fn deleting_a_thread_stops_its_run_and_nothing_comes_back() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let run = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "slow", "input": {"delay": 30}}),
    )
    .await
    .json();
    let rid = run["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        if get(server.addr, &format!("/threads/{tid}/runs/{rid}")).await.json()["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = common::send(server.addr, "DELETE", &format!("/threads/{tid}"), None, &[]).await;
    assert_eq!(r.status, 204);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(server.addr, &format!("/threads/{tid}")).await.status, 404);
    let searched = post(server.addr, "/threads/search", json!({})).await.json();
    assert_eq!(searched, json!([]), "the stopped run did not bring its thread back");
    let count = post(server.addr, "/threads/count", json!({})).await.json();
    assert_eq!(count, json!(0));
}

#[tokio::test]
async fn a_shutdown_does_not_wait_past_its_grace_for_open_streams() {
    let server = builder().shutdown_grace(Duration::from_millis(200)).build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve_with_shutdown(listener, async {
        let _ = stopped.await;
    }));
    let tid = thread(addr).await;
    // A stream of a run that would go on for a minute.
    let body = json!({"assistant_id": "slow", "input": {"delay": 60}}).to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST /threads/{tid}/runs/stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 256];
    tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await.unwrap();
    stop.send(()).unwrap();
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("the server stopped")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "stopped after its grace: {:?}", started.elapsed());
}

/// Waits until the run's record says `status`.
async fn wait_for_status(addr: std::net::SocketAddr, tid: &str, rid: &str, status: &str) {
    for _ in 0..300 {
        if get(addr, &format!("/threads/{tid}/runs/{rid}")).await.json()["status"] == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {rid} never became {status}");
}

#[tokio::test]
async fn a_run_on_a_free_thread_is_running_as_soon_as_it_is_made_and_the_next_one_waits() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let first = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "slow", "input": {"delay": 0.5}}),
    )
    .await
    .json();
    assert_eq!(first["status"], "pending", "a creation answers with the run as made, as LangGraph does");
    let first_id = first["run_id"].as_str().unwrap().to_owned();
    let stored = get(server.addr, &format!("/threads/{tid}/runs/{first_id}")).await.json();
    assert_eq!(stored["status"], "running", "stored running in the transaction that made it");
    assert_eq!(get(server.addr, &format!("/threads/{tid}")).await.json()["status"], "busy");
    let second = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "slow", "input": {"delay": 0}, "multitask_strategy": "enqueue"}),
    )
    .await
    .json();
    let second_id = second["run_id"].as_str().unwrap().to_owned();
    let queued = get(server.addr, &format!("/threads/{tid}/runs/{second_id}")).await.json();
    assert_eq!(queued["status"], "pending", "a busy thread's next run waits");
    wait_for_status(server.addr, &tid, &second_id, "success").await;
    let first_done = get(server.addr, &format!("/threads/{tid}/runs/{first_id}")).await.json();
    assert_eq!(first_done["status"], "success");
    let values = get(server.addr, &format!("/threads/{tid}/state")).await.json()["values"].clone();
    assert_eq!(values["items"], json!(["slept", "b", "slept", "b"]));
}

#[tokio::test]
async fn a_rolled_back_run_leaves_the_thread_where_it_found_it() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let done = post(
        server.addr,
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "simple", "input": {}}),
    )
    .await
    .json();
    assert_eq!(done["items"], json!(["a", "b"]));
    let before = get(server.addr, &format!("/threads/{tid}/state")).await.json();
    let run = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "slow", "input": {"delay": 30, "items": ["input"]}}),
    )
    .await
    .json();
    let rid = run["run_id"].as_str().unwrap().to_owned();
    // Until the run has saved its input, a rollback has nothing of the run's to walk back over.
    for _ in 0..300 {
        let now = get(server.addr, &format!("/threads/{tid}/state")).await.json();
        if now["values"]["items"] == json!(["a", "b", "input"]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = post(server.addr, &format!("/threads/{tid}/runs/{rid}/cancel?action=rollback"), json!({})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    for _ in 0..300 {
        if get(server.addr, &format!("/threads/{tid}/runs/{rid}")).await.status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        get(server.addr, &format!("/threads/{tid}/runs/{rid}")).await.status,
        404,
        "rolled back: gone"
    );
    let after = get(server.addr, &format!("/threads/{tid}/state")).await.json();
    assert_eq!(after["values"], before["values"], "the run's writes are undone");

    // A thread that had no checkpoint before the run has none after it.
    let fresh = thread(server.addr).await;
    let run = post(
        server.addr,
        &format!("/threads/{fresh}/runs"),
        json!({"assistant_id": "slow", "input": {"delay": 30}}),
    )
    .await
    .json();
    let rid = run["run_id"].as_str().unwrap().to_owned();
    for _ in 0..300 {
        let history = post(server.addr, &format!("/threads/{fresh}/history"), json!({})).await.json();
        if history.as_array().is_some_and(|h| !h.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r =
        post(server.addr, &format!("/threads/{fresh}/runs/{rid}/cancel?action=rollback"), json!({})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    for _ in 0..300 {
        if get(server.addr, &format!("/threads/{fresh}/runs/{rid}")).await.status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let history = post(server.addr, &format!("/threads/{fresh}/history"), json!({})).await.json();
    assert_eq!(history, json!([]), "every checkpoint of the run is gone");
}

#[tokio::test]
async fn a_root_value_graph_takes_its_bare_value_as_input_as_langgraph_does() {
    use weft_graph::root::{Append, RootState};
    let mut g = StateGraph::<RootState<Vec<Value>, Append>>::new();
    g.add_node("n", |_: Vec<Value>| vec![json!("n")]);
    g.add_edge(START, "n");
    let server = start(builder().graph("root", g.compile().unwrap())).await;
    let tid = thread(server.addr).await;
    let path = format!("/threads/{tid}/runs/wait");
    let done = post(server.addr, &path, json!({"assistant_id": "root", "input": ["x"]})).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.json(), json!(["x", "n"]));
    // An object is a value like any other (here not a list: the run fails, as in LangGraph).
    let failed =
        post(server.addr, &path, json!({"assistant_id": "root", "input": {"__root__": ["y"]}})).await;
    assert!(failed.json()["__error__"]["error"].is_string(), "{}", failed.body);
    let state = get(server.addr, &format!("/threads/{tid}/state")).await.json();
    assert_eq!(state["values"], json!(["x", "n"]));
}

/// Graphs whose user code panics: `boom` a node (after `a`), `routed` the router after `a`, `reduced` a
/// reducer (on `b`'s write, after `a`).
fn panicking() -> ServerBuilder {
    let mut nodes = StateGraph::with_initial(common::state());
    nodes.add_node("a", |_: &JsonState| json!({"items": ["a"]}));
    nodes.add_node("boom", |_: &JsonState| -> Value { panic!("the node gave up") });
    nodes.add_edge(START, "a");
    nodes.add_edge("a", "boom");
    let mut routed = StateGraph::with_initial(common::state());
    routed.add_node("a", |_: &JsonState| json!({"items": ["a"]}));
    routed.add_conditional_edges(
        "a",
        |_: &JsonState| -> &'static str { panic!("the router gave up") },
        [END],
    );
    routed.add_edge(START, "a");
    // A reducer that panics: caught by the server, not the engine.
    let fragile = JsonState::builder()
        .channel("items", weft_graph::ChannelKind::Reducer)
        .reducer("fragile", |_: &mut Value, _: Value| -> Result<(), String> { panic!("the reducer gave up") })
        .build();
    let mut reduced = StateGraph::with_initial(fragile);
    reduced.add_node("a", |_: &JsonState| json!({"items": ["a"], "fragile": 0})); // the first value is set
    reduced.add_node("b", |_: &JsonState| json!({"fragile": 1}));
    reduced.add_edge(START, "a");
    reduced.add_edge("a", "b");
    builder()
        .graph("boom", nodes.compile().unwrap())
        .graph("routed", routed.compile().unwrap())
        .graph("reduced", reduced.compile().unwrap())
}

#[tokio::test]
async fn a_panic_in_a_node_router_or_reducer_fails_its_run_and_the_server_goes_on() {
    let server = start(panicking()).await;
    let cases = [
        ("boom", "panicked: the node gave up", json!(["boom"])),
        // The node's writes are kept with the router's error, and its task counts as finished.
        ("routed", "panicked: the router gave up", json!([])),
        ("reduced", "the run panicked: the reducer gave up", json!(["b"])),
    ];
    for (graph, message, next) in cases {
        let tid = thread(server.addr).await;
        let body = json!({"assistant_id": graph, "input": {}, "stream_mode": ["values"]});
        // A panic that escaped would leave the stream open (and the run `running`): bounded here.
        let path = format!("/threads/{tid}/runs/stream");
        let streamed = post(server.addr, &path, body);
        let r = tokio::time::timeout(Duration::from_secs(10), streamed).await.expect("the stream ends");
        assert_eq!(r.status, 200, "{}", r.body);
        let events = common::open::parse(&r.body);
        let (name, error, _) = events.last().unwrap();
        assert_eq!(name, "error", "{graph}: {events:?}");
        assert!(error["message"].as_str().unwrap().contains(message), "{graph}: {error}");
        // The run and its thread say so; nothing is left running.
        let run_path = r.header("content-location").unwrap();
        assert_eq!(get(server.addr, run_path).await.json()["status"], "error", "{graph}");
        let thread = get(server.addr, &format!("/threads/{tid}")).await.json();
        assert_eq!(thread["status"], "error", "{graph}: {thread}");
        // What ran before the panic is the thread's state; the failed task is next.
        let state = get(server.addr, &format!("/threads/{tid}/state")).await.json();
        assert_eq!(state["values"]["items"], json!(["a"]), "{graph}: {state}");
        assert_eq!(state["next"], next, "{graph}: {state}");
    }
    // The same server streams the next run.
    let tid = thread(server.addr).await;
    let done = post(
        server.addr,
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "simple", "input": {}}),
    )
    .await;
    assert_eq!(done.json()["items"], json!(["a", "b"]), "{}", done.body);
}

#[tokio::test]
async fn a_run_stuck_without_progress_is_ended_by_the_watchdog_and_frees_its_thread() {
    let stuck = std::sync::Arc::new(AtomicUsize::new(0));
    let server = common::storage(
        weft_server::Server::builder()
            .graph("frozen", common::frozen(std::sync::Arc::clone(&stuck)))
            .run_watchdog(Some(Duration::from_millis(500))),
    );
    let server = start(server).await;
    let tid = thread(server.addr).await;
    let body = json!({"assistant_id": "frozen", "input": {"delay": -1}, "stream_mode": ["updates"]});
    let streamed = tokio::time::timeout(
        Duration::from_secs(20),
        post(server.addr, &format!("/threads/{tid}/runs/stream"), body),
    )
    .await
    .expect("the stream of a stuck run ends");
    let events = common::open::parse(&streamed.body);
    let names: Vec<&str> = events.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(names, ["metadata", "updates", "error"], "{}", streamed.body);
    assert_eq!(events[2].1["error"], "RunStalled", "{}", streamed.body);
    assert_eq!(stuck.load(Ordering::SeqCst), 1);
    let run_path = streamed.header("content-location").unwrap().to_owned();
    assert_eq!(get(server.addr, &run_path).await.json()["status"], "error");
    assert_ne!(get(server.addr, &format!("/threads/{tid}")).await.json()["status"], "busy");
    let next = post(
        server.addr,
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "frozen", "input": {"delay": 0}}),
    )
    .await;
    assert_eq!(next.json()["items"], json!(["a", "a", "done"]), "{}", next.body);
}

#[tokio::test]
async fn the_watchdog_counts_from_a_runs_start_not_from_when_a_listener_first_waited_for_it() {
    let stuck = std::sync::Arc::new(AtomicUsize::new(0));
    let server = common::storage(
        weft_server::Server::builder()
            .graph("frozen", common::frozen(std::sync::Arc::clone(&stuck)))
            .graph("slow", common::slow())
            .run_watchdog(Some(Duration::from_millis(600))),
    );
    let server = start(server).await;
    let tid = thread(server.addr).await;
    let runs = format!("/threads/{tid}/runs");
    // The first run holds the thread until the watchdog ends it; the second (a step of 0.2 s, well within
    // the watchdog) waits behind it, listened to all along.
    let first =
        post(server.addr, &runs, json!({"assistant_id": "frozen", "input": {"delay": -1}})).await.json();
    let second = post(
        server.addr,
        &runs,
        json!({"assistant_id": "slow", "input": {"delay": 0.2}, "multitask_strategy": "enqueue"}),
    )
    .await
    .json();
    let second_id = second["run_id"].as_str().unwrap();
    assert_eq!(second["status"], "pending", "{second}");
    let streamed = tokio::time::timeout(
        Duration::from_secs(20),
        get(server.addr, &format!("{runs}/{second_id}/stream")),
    )
    .await
    .expect("the stream of the waiting run ends");
    let first_id = first["run_id"].as_str().unwrap();
    assert_eq!(get(server.addr, &format!("{runs}/{first_id}")).await.json()["status"], "error");
    let second = get(server.addr, &format!("{runs}/{second_id}")).await.json();
    assert_eq!(second["status"], "success", "{second}: {}", streamed.body);
    assert!(!streamed.body.contains("RunStalled"), "{}", streamed.body);
}
