//! The server as an operator runs it, tested on the real binary (`weft-server-e2e`): one process per
//! SQLite file, drain on SIGTERM and SIGINT, connection limits.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod process;

use std::time::{Duration, Instant};

use process::{Scratch, Weft};

#[test]
fn a_second_process_on_the_same_file_is_refused_at_once_and_the_first_serves_on() {
    let scratch = Scratch::new("second");
    let db = scratch.path("server.db");
    let mut first = Weft::start(&db, &[]);
    first.wait_ready();
    let started = Instant::now();
    let second = Weft::start(&db, &[]).wait_exit(Duration::from_secs(5));
    let took = started.elapsed();
    assert!(!second.status.success(), "the second process must fail: {second:?}");
    assert!(took < Duration::from_secs(1), "refused within 1 s, took {took:?}");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains(&db.display().to_string()), "names the file: {stderr}");
    assert!(stderr.contains(&format!("pid {}", first.pid())), "names the holder: {stderr}");
    assert_eq!(first.get("/ok").0, 200, "the first process serves on");
    let thread = first.post("/threads", "{}");
    assert_eq!(thread.0, 200, "and writes: {}", thread.1);
}

#[test]
fn a_killed_holder_does_not_block_the_next_start() {
    let scratch = Scratch::new("killed");
    let db = scratch.path("server.db");
    let mut first = Weft::start(&db, &[]);
    first.wait_ready();
    let (status, thread) = first.post("/threads", "{}");
    assert_eq!(status, 200, "{thread}");
    first.kill();
    let mut next = Weft::start(&db, &[]);
    next.wait_ready();
    let id = process::field(&thread, "thread_id");
    assert_eq!(next.get(&format!("/threads/{id}")).0, 200, "the killed process's thread is there");
}

/// The `updates` events of a stream (the step each is of) and every event id, read to the stream's end.
fn read_to_end(sse: &mut process::Sse, ids: &mut Vec<String>, steps: &mut Vec<String>) -> process::End {
    loop {
        match sse.next_event() {
            Ok(event) => {
                if let Some(id) = event.id {
                    ids.push(id);
                }
                if event.name == "updates" {
                    let data: serde_json::Value = serde_json::from_str(&event.data).unwrap();
                    steps.extend(data.as_object().unwrap().keys().cloned());
                }
            }
            Err(end) => return end,
        }
    }
}

/// An event id as `(ms, seq)`.
fn id_key(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap();
    (ms.parse().unwrap(), seq.parse().unwrap())
}

#[cfg(unix)]
#[test]
fn sigterm_mid_run_drains_and_the_next_process_finishes_the_run_once() {
    let scratch = Scratch::new("drain");
    let db = scratch.path("server.db");
    let log = scratch.path("steps.log");
    let env = [("WEFT_CHAOS_LOG", log.as_path())];
    let mut first = Weft::start_with(&db, &[], &env);
    first.wait_ready();
    let thread_id = process::field(&first.post("/threads", "{}").1, "thread_id");
    let body = r#"{"assistant_id": "chaos", "input": {"items": [], "delay": 0.8},
                   "stream_mode": ["updates"], "stream_resumable": true}"#;
    let mut stream = first.stream("POST", &format!("/threads/{thread_id}/runs/stream"), Some(body), &[]);
    assert_eq!(stream.status, 200);
    let metadata = stream.next_event().unwrap();
    assert_eq!(metadata.name, "metadata");
    let run_id = process::field(&metadata.data, "run_id");
    let mut ids = vec![metadata.id.unwrap()];
    let mut steps = Vec::new();
    // Past `step_1`: `step_2` is in flight when the signal comes.
    while steps.is_empty() {
        let event = stream.next_event().unwrap();
        ids.extend(event.id);
        if event.name == "updates" {
            steps.push("step_1".to_owned());
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let signalled = Instant::now();
    first.signal("TERM");
    let end = read_to_end(&mut stream, &mut ids, &mut steps);
    let exited = first.wait_exit(Duration::from_secs(15));
    let took = signalled.elapsed();
    assert!(exited.status.success(), "a drained server exits cleanly: {exited:?}");
    assert!(took < Duration::from_secs(10), "exits within the shutdown grace (10 s), took {took:?}");
    assert_eq!(end, process::End::Clean, "the stream ends cleanly");
    assert_eq!(steps, ["step_1", "step_2"], "the step in flight finished before the drain");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged.lines().count(), 2, "{logged}");

    let mut next = Weft::start_with(&db, &[], &env);
    next.wait_ready();
    let last = ids.last().unwrap().clone();
    let path = format!("/threads/{thread_id}/runs/{run_id}/stream");
    let mut resumed = next.stream("GET", &path, None, &[("Last-Event-ID", &last)]);
    assert_eq!(resumed.status, 200);
    let end = read_to_end(&mut resumed, &mut ids, &mut steps);
    assert_eq!(end, process::End::Clean);
    assert_eq!(steps, ["step_1", "step_2", "step_3", "step_4"], "every step's event once, in order");
    assert!(ids.windows(2).all(|w| id_key(&w[0]) < id_key(&w[1])), "ids only increase: {ids:?}");
    let (_, run) = next.get(&format!("/threads/{thread_id}/runs/{run_id}"));
    assert_eq!(process::field(&run, "status"), "success", "{run}");
    let (_, state) = next.get(&format!("/threads/{thread_id}/state"));
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["values"]["items"], serde_json::json!(["step_1", "step_2", "step_3", "step_4"]));
    let logged = std::fs::read_to_string(&log).unwrap();
    let mut ran: Vec<&str> = logged.lines().filter_map(|l| l.split_whitespace().nth(1)).collect();
    ran.sort_unstable();
    assert_eq!(ran, ["step_1", "step_2", "step_3", "step_4"], "no finished step ran twice: {logged}");
}

#[cfg(unix)]
#[test]
fn sigint_stops_an_idle_server_at_once_and_cleanly() {
    let scratch = Scratch::new("sigint");
    let db = scratch.path("server.db");
    let mut weft = Weft::start(&db, &[]);
    weft.wait_ready();
    let signalled = Instant::now();
    weft.signal("INT");
    let exited = weft.wait_exit(Duration::from_secs(15));
    assert!(exited.status.success(), "{exited:?}");
    assert!(signalled.elapsed() < Duration::from_secs(2), "took {:?}", signalled.elapsed());
}
