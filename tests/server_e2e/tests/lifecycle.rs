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

/// A raw connection to `port`, reads timing out after `timeout`.
fn raw(port: u16, timeout: Duration) -> std::net::TcpStream {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(timeout)).unwrap();
    stream
}

/// Whether the server closed `stream` by `deadline` (an end of stream or a reset; nothing sent).
fn closed_by(stream: &mut std::net::TcpStream, deadline: Instant) -> bool {
    use std::io::Read;
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left)).unwrap();
    let mut buf = [0u8; 256];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

/// The open file descriptors of process `pid`.
#[cfg(target_os = "linux")]
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

#[test]
fn half_sent_request_heads_are_all_closed_by_the_header_timeout() {
    use std::io::Write;
    // 3,000 as the issue measured, when the file descriptor limit allows (this process and the server
    // each hold one per connection).
    const HEADS: usize = 3_000;
    let scratch = Scratch::new("heads");
    let db = scratch.path("server.db");
    let mut weft = Weft::start(&db, &["--header-timeout", "5", "--idle-timeout", "60"]);
    weft.wait_ready();
    #[cfg(target_os = "linux")]
    let baseline = fds(weft.pid());
    let mut heads = Vec::with_capacity(HEADS);
    let opening = Instant::now();
    for _ in 0..HEADS {
        let mut stream = raw(weft.port, Duration::from_secs(5));
        stream.write_all(b"POST /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: k").unwrap();
        heads.push(stream);
    }
    let sent = Instant::now();
    let opened = opening.elapsed();
    let (status, _) = weft.get("/ok");
    assert_eq!(status, 200, "the server answers while the heads hang");
    #[cfg(target_os = "linux")]
    if opened < Duration::from_secs(4) {
        // A connect completes in the kernel's backlog; the server accepts it a moment later.
        let accepting = Instant::now();
        while fds(weft.pid()) < baseline + HEADS && accepting.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(fds(weft.pid()) >= baseline + HEADS, "the heads were accepted (opened in {opened:?})");
    }
    let deadline = sent + Duration::from_secs(15);
    let open = heads.iter_mut().map(|stream| closed_by(stream, deadline)).filter(|closed| !closed).count();
    assert_eq!(open, 0, "every half-sent head closed by the 5 s header timeout");
    #[cfg(target_os = "linux")]
    {
        let after = fds(weft.pid());
        assert!(after <= baseline + 10, "file descriptors back to the baseline: {baseline} then {after}");
    }
}

#[test]
fn a_declared_oversize_body_gets_413_at_once() {
    use std::io::{Read, Write};
    let scratch = Scratch::new("oversize");
    let db = scratch.path("server.db");
    let mut weft = Weft::start(&db, &[]);
    weft.wait_ready();
    let mut stream = raw(weft.port, Duration::from_secs(5));
    let started = Instant::now();
    stream
        .write_all(b"POST /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2147483648\r\n\r\n{")
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let took = started.elapsed();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("Request body too large"), "{answer}");
    assert!(took < Duration::from_secs(1), "at once, took {took:?}");
    assert_eq!(weft.get("/ok").0, 200);
}

#[test]
fn a_body_that_stops_arriving_gets_408_after_the_body_timeout() {
    use std::io::{Read, Write};
    let scratch = Scratch::new("body");
    let db = scratch.path("server.db");
    let mut weft = Weft::start(&db, &["--body-timeout", "1"]);
    weft.wait_ready();
    let mut stream = raw(weft.port, Duration::from_secs(10));
    let started = Instant::now();
    stream
        .write_all(b"POST /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"metadata\"")
        .unwrap();
    let mut answer = [0u8; 512];
    let n = stream.read(&mut answer).unwrap();
    let took = started.elapsed();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout_and_kept_alive_ones_serve_before_it() {
    use std::io::{Read, Write};
    let scratch = Scratch::new("idle");
    let db = scratch.path("server.db");
    let mut weft = Weft::start(&db, &["--idle-timeout", "1", "--header-timeout", "30"]);
    weft.wait_ready();
    // A connection that never sends a byte.
    let mut silent = raw(weft.port, Duration::from_secs(5));
    // A kept-alive one: two requests on it, then silence.
    let mut kept = raw(weft.port, Duration::from_secs(5));
    let ok = b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let mut buf = [0u8; 512];
    for _ in 0..2 {
        kept.write_all(ok).unwrap();
        let n = kept.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        std::thread::sleep(Duration::from_millis(500));
    }
    let started = Instant::now();
    assert!(closed_by(&mut silent, started + Duration::from_secs(5)), "a silent connection is closed");
    assert!(closed_by(&mut kept, started + Duration::from_secs(5)), "an idle kept-alive one too");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn connections_past_the_maximum_wait_until_one_closes() {
    use std::io::{Read, Write};
    let scratch = Scratch::new("max");
    let db = scratch.path("server.db");
    let mut weft = Weft::start(&db, &["--max-connections", "2"]);
    weft.wait_ready();
    // `wait_ready`'s connections are closed; give the server a moment to see it.
    std::thread::sleep(Duration::from_millis(200));
    let first = raw(weft.port, Duration::from_secs(5));
    let _second = raw(weft.port, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(200));
    let mut third = raw(weft.port, Duration::from_millis(700));
    third.write_all(b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut buf = [0u8; 512];
    let waited = third.read(&mut buf);
    assert!(waited.is_err(), "the third connection is not served while two are open: {waited:?}");
    drop(first);
    third.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = third.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "served once one closed");
}
