//! The server as an operator runs it, tested on the real binary (`weft-server-e2e`): one process per
//! SQLite file, drain on SIGTERM and SIGINT (also scaled out, where another instance takes the run
//! over), connection limits.

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

/// A resumable run of the chaos graph (four steps of 0.8 s) streamed from `weft`, read past its first
/// step and 0.2 s into its second.
struct Midway {
    thread_id: String,
    run_id: String,
    stream: process::Sse,
    ids: Vec<String>,
    steps: Vec<String>,
}

fn midway(weft: &Weft) -> Midway {
    let thread_id = process::field(&weft.post("/threads", "{}").1, "thread_id");
    let body = r#"{"assistant_id": "chaos", "input": {"items": [], "delay": 0.8},
                   "stream_mode": ["updates"], "stream_resumable": true}"#;
    let mut stream = weft.stream("POST", &format!("/threads/{thread_id}/runs/stream"), Some(body), &[]);
    assert_eq!(stream.status, 200);
    let metadata = stream.next_event().unwrap();
    assert_eq!(metadata.name, "metadata");
    let run_id = process::field(&metadata.data, "run_id");
    let mut ids = vec![metadata.id.unwrap()];
    let mut steps = Vec::new();
    // Past `step_1`: `step_2` is in flight when the caller signals.
    while steps.is_empty() {
        let event = stream.next_event().unwrap();
        ids.extend(event.id);
        if event.name == "updates" {
            steps.push("step_1".to_owned());
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    Midway { thread_id, run_id, stream, ids, steps }
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
    let Midway { thread_id, run_id, mut stream, mut ids, mut steps } = midway(&first);
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

/// A database of its own on the local PostgreSQL, dropped when this is; `None` (the test skipped, or
/// failed in CI) without `psql` or a reachable server.
#[cfg(all(unix, feature = "scale"))]
struct Database(String);

#[cfg(all(unix, feature = "scale"))]
impl Database {
    fn create(name: &str) -> Option<Self> {
        let made = psql(&format!("CREATE DATABASE {name}"));
        if let Err(why) = made {
            weft_testenv::skip_or_fail("PostgreSQL at 127.0.0.1:5432 and psql", &why, "start PostgreSQL");
            return None;
        }
        if std::net::TcpStream::connect(weft_testenv::redis_addr()).is_err() {
            weft_testenv::skip_or_fail("Redis", "it cannot be reached", "start redis-server");
            return None;
        }
        Some(Self(name.to_owned()))
    }

    fn uri(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.0)
    }
}

#[cfg(all(unix, feature = "scale"))]
impl Drop for Database {
    fn drop(&mut self) {
        let _ = psql(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.0));
    }
}

/// Runs `sql` on the local PostgreSQL's `postgres` database with `psql`.
#[cfg(all(unix, feature = "scale"))]
fn psql(sql: &str) -> Result<(), String> {
    let out = std::process::Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-q", "-c", sql])
        .output()
        .map_err(|e| format!("psql cannot be run: {e}"))?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()) }
}

/// Scaled out, a SIGTERMed instance drains at a superstep boundary and hands its run over: the other
/// instance runs the steps left, the client resumes there with `Last-Event-ID` and sees each event once.
#[cfg(all(unix, feature = "scale"))]
#[test]
fn scaled_out_sigterm_mid_run_hands_the_run_to_another_instance_that_finishes_it_once() {
    let name = format!("weft_lifecycle_{}", std::process::id());
    let Some(database) = Database::create(&name) else { return };
    let scratch = Scratch::new("scaled-drain");
    let log = scratch.path("steps.log");
    let (uri, redis, prefix) =
        (database.uri(), format!("redis://{}", weft_testenv::redis_addr()), format!("{name}:"));
    let log_path = log.display().to_string();
    let env = [
        ("DATABASE_URI", uri.as_str()),
        ("REDIS_URI", redis.as_str()),
        ("REDIS_KEY_PREFIX", prefix.as_str()),
        ("WEFT_CHAOS_LOG", log_path.as_str()),
    ];
    let mut first = Weft::start_scaled(&env);
    first.wait_ready();
    let mut other = Weft::start_scaled(&env);
    other.wait_ready();
    let Midway { thread_id, run_id, mut stream, mut ids, mut steps } = midway(&first);
    let (first_pid, signalled) = (first.pid().to_string(), Instant::now());
    first.signal("TERM");
    let end = read_to_end(&mut stream, &mut ids, &mut steps);
    let exited = first.wait_exit(Duration::from_secs(15));
    assert!(exited.status.success(), "a drained instance exits cleanly: {exited:?}");
    assert!(signalled.elapsed() < Duration::from_secs(10), "within the grace: {:?}", signalled.elapsed());
    assert_eq!(end, process::End::Clean, "the stream ends cleanly");
    assert_eq!(steps, ["step_1", "step_2"], "the step in flight finished before the drain");

    let last = ids.last().unwrap().clone();
    let path = format!("/threads/{thread_id}/runs/{run_id}/stream");
    let mut resumed = other.stream("GET", &path, None, &[("Last-Event-ID", &last)]);
    assert_eq!(resumed.status, 200);
    assert_eq!(read_to_end(&mut resumed, &mut ids, &mut steps), process::End::Clean);
    assert_eq!(steps, ["step_1", "step_2", "step_3", "step_4"], "every step's event once, in order");
    assert!(ids.windows(2).all(|w| id_key(&w[0]) < id_key(&w[1])), "ids only increase: {ids:?}");
    let (_, run) = other.get(&format!("/threads/{thread_id}/runs/{run_id}"));
    assert_eq!(process::field(&run, "status"), "success", "{run}");
    let logged = std::fs::read_to_string(&log).unwrap();
    let ran: Vec<(&str, &str)> = logged
        .lines()
        .filter_map(|l| l.split_whitespace().collect::<Vec<_>>().get(1..3).map(|f| (f[0], f[1])))
        .collect();
    let by_first: Vec<&str> =
        ran.iter().filter(|(_, pid)| *pid == first_pid).map(|(step, _)| *step).collect();
    let by_other: Vec<&str> =
        ran.iter().filter(|(_, pid)| *pid != first_pid).map(|(step, _)| *step).collect();
    assert_eq!((by_first, by_other), (vec!["step_1", "step_2"], vec!["step_3", "step_4"]), "{logged}");
    drop(other);
    drop(database);
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

/// The fewest file descriptors process `pid` holds over half a second: a connection a client has just
/// closed (the readiness probe's) stays open on the server's side until the server reads its end, so a
/// single look can count one that is about to go.
#[cfg(target_os = "linux")]
fn settled_fds(pid: u32) -> usize {
    let mut fewest = fds(pid);
    for _ in 0..25 {
        std::thread::sleep(Duration::from_millis(20));
        fewest = fewest.min(fds(pid));
    }
    fewest
}

#[test]
fn half_sent_request_heads_are_all_closed_by_the_header_timeout() {
    use std::io::Write;
    // 3,000 as the issue measured, when the file descriptor limit allows (this process and the server
    // each hold one per connection).
    const HEADS: usize = 3_000;
    let scratch = Scratch::new("heads");
    let db = scratch.path("server.db");
    // Ten seconds: a connect completes in the kernel once the accept queue has room, and a loaded machine
    // leaves part of 3,000 to the handshake's retransmissions (1 s, 3 s, 7 s after the connect), so the
    // server may accept the last ones seconds after the first; all must be held before any times out.
    let mut weft = Weft::start(&db, &["--header-timeout", "10", "--idle-timeout", "60"]);
    weft.wait_ready();
    #[cfg(target_os = "linux")]
    let baseline = settled_fds(weft.pid());
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
        let mut most = 0;
        while most < baseline + HEADS && opening.elapsed() < Duration::from_secs(9) {
            most = most.max(fds(weft.pid()));
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            most >= baseline + HEADS,
            "the heads were all held at once: at most {} of {HEADS} (opened in {opened:?})",
            most.saturating_sub(baseline)
        );
    }
    let deadline = sent + Duration::from_secs(25);
    let open = heads.iter_mut().map(|stream| closed_by(stream, deadline)).filter(|closed| !closed).count();
    assert_eq!(open, 0, "every half-sent head closed by the 10 s header timeout");
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

/// The resident memory of process `pid`, in bytes (`VmRSS`).
#[cfg(target_os = "linux")]
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// The words `long_reply`'s model streams (`w0 w1 … w49999`), as its chunks join up.
fn long_reply_text() -> String {
    (0..50_000).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")
}

/// A `messages` event's chunk text (the model's words have nothing to escape).
fn chunk_text(data: &str) -> &str {
    let rest = data.strip_prefix(r#"[{"content":""#).unwrap_or_else(|| panic!("not a text chunk: {data}"));
    &rest[..rest.find('"').unwrap()]
}

/// Reads a `messages-tuple` stream to its end, adding the chunks' text to `text`; the last event id read
/// and how the stream ended.
fn read_reply(sse: &mut process::Sse, text: &mut String, last_id: &mut Option<String>) -> process::End {
    loop {
        match sse.next_event() {
            Ok(event) => {
                if event.name == "messages" {
                    text.push_str(chunk_text(&event.data));
                }
                if let Some(id) = event.id {
                    *last_id = Some(id);
                }
            }
            Err(end) => return end,
        }
    }
}

/// How fast `/ok` must answer while 500 unread streams fill: the acceptance's 50 ms for an optimized server;
/// a debug build spends about ten times the CPU on each event it sends, and when the reply starts its 500
/// streams keep both cores of a 2-core machine busy for some 0.4 s, in which `/ok` took 12-90 ms there
/// (CI's test stage runs debug builds).
const OK_BOUND: Duration =
    if cfg!(debug_assertions) { Duration::from_millis(250) } else { Duration::from_millis(50) };

/// What the monitor saw while the streams were open: the highest RSS, the slowest `/ok`, how many samples.
#[derive(Debug, Default)]
struct Seen {
    max_rss: u64,
    slowest_ok: Duration,
    /// The `/ok` answers slower than [`OK_BOUND`].
    slow_ok: Vec<Duration>,
    samples: usize,
    failed_ok: usize,
}

/// Samples the server's RSS and times `GET /ok` every 40 ms until `stop`.
fn monitor(pid: u32, port: u16, stop: &std::sync::atomic::AtomicBool) -> Seen {
    let mut seen = Seen::default();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        #[cfg(target_os = "linux")]
        {
            seen.max_rss = seen.max_rss.max(rss(pid));
        }
        let _ = pid;
        let asked = Instant::now();
        let (status, _) = process::request(port, "GET", "/ok", None, &[]);
        let took = asked.elapsed();
        seen.slowest_ok = seen.slowest_ok.max(took);
        if took >= OK_BOUND {
            seen.slow_ok.push(took);
        }
        seen.failed_ok += usize::from(status != 200);
        seen.samples += 1;
        std::thread::sleep(Duration::from_millis(40));
    }
    seen
}

/// The issue's acceptance: 500 streams of one run's 50,000-word reply (`messages-tuple`, resumable) that
/// nobody reads while it streams. The server's memory stays bounded (each listener's backlog is capped,
/// the model's chunks do not queue ahead of the run's publisher) and it answers `/ok` at once throughout;
/// afterwards a client that reads gets the whole reply, resuming with `Last-Event-ID` where it was cut.
#[test]
fn five_hundred_unread_streams_of_a_long_reply_keep_memory_bounded_and_ok_fast() {
    const STREAMS: usize = 500;
    const RSS_LIMIT: u64 = 200 * 1024 * 1024;
    let scratch = Scratch::new("unread");
    let db = scratch.path("server.db");
    let mut weft = Weft::start(&db, &[]);
    weft.wait_ready();
    let thread_id = process::field(&weft.post("/threads", "{}").1, "thread_id");
    // The model starts after `delay`, once every stream is open; each stream replays from the first event
    // (`Last-Event-ID: -1`) should it open later.
    let body = r#"{"assistant_id": "long_reply", "input": {"delay": 3}, "stream_mode": ["messages-tuple"],
                   "stream_resumable": true}"#;
    let (status, run) = weft.post(&format!("/threads/{thread_id}/runs"), body);
    assert_eq!(status, 200, "{run}");
    let run_id = process::field(&run, "run_id");
    let path = format!("/threads/{thread_id}/runs/{run_id}/stream");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (pid, port) = (weft.pid(), weft.port);
    let (mut streams, seen, took) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| monitor(pid, port, &stop));
        let streams: Vec<process::Sse> =
            (0..STREAMS).map(|_| weft.stream("GET", &path, None, &[("Last-Event-ID", "-1")])).collect();
        let started = Instant::now();
        let deadline = started + Duration::from_secs(90);
        loop {
            let (_, run) = weft.get(&format!("/threads/{thread_id}/runs/{run_id}"));
            let status = process::field(&run, "status");
            if status != "pending" && status != "running" {
                assert_eq!(status, "success", "{run}");
                break;
            }
            assert!(Instant::now() < deadline, "the run did not end within 90 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        let took = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (streams, watcher.join().unwrap(), took)
    });
    // Printed for the record (nextest shows it with the test's output).
    eprintln!("monitor: {seen:?}, run took {took:?}");
    assert!(streams.iter().all(|s| s.status == 200), "every stream was opened");
    assert!(seen.samples >= 10, "sampled throughout the run ({took:?}): {seen:?}");
    assert_eq!(seen.failed_ok, 0, "{seen:?}");
    #[cfg(target_os = "linux")]
    assert!(seen.max_rss < RSS_LIMIT, "RSS peaked at {} MB: {seen:?}", seen.max_rss >> 20);
    assert!(seen.slowest_ok < OK_BOUND, "/ok took up to {:?}: {seen:?}", seen.slowest_ok);

    // Readers now: the first, a middle and the last stream, each to its end, resumed where it was cut.
    let expected = long_reply_text();
    let mut cut = 0;
    for at in [0, STREAMS / 2, STREAMS - 1] {
        let (mut text, mut last_id) = (String::new(), None);
        let mut end = read_reply(&mut streams[at], &mut text, &mut last_id);
        let mut resumes = 0;
        while end == process::End::Cut {
            assert!(resumes < 3, "stream {at} cut again on a replay");
            resumes += 1;
            let last = last_id.clone().expect("a cut stream had events before it was cut");
            let mut resumed = weft.stream("GET", &path, None, &[("Last-Event-ID", &last)]);
            assert_eq!(resumed.status, 200);
            end = read_reply(&mut resumed, &mut text, &mut last_id);
        }
        cut += usize::from(resumes > 0);
        assert_eq!(text.len(), expected.len(), "stream {at}: the whole reply, once ({resumes} resumes)");
        assert!(text == expected, "stream {at}: the reply's words in order");
    }
    // 43 MB of events against a 256 KiB backlog and the sockets' buffers: the unread streams were cut.
    assert!(cut > 0, "no stream was cut: the listeners' cap was not reached");
    drop(streams);
    assert_eq!(weft.get("/ok").0, 200);
}

/// Adds `count` copies of the file's one thread record (each with an id of its own and its number in its
/// metadata) to the server's records table, in one transaction, as a long-lived deployment's threads.
fn add_threads(db: &std::path::Path, count: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename(db);
        let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
        let sql = format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {count}) \
             INSERT INTO weft_server_records (kind, id, body, status, created_at, updated_at, sweepable) \
             SELECT 'thread', printf('00000000-0000-4000-8000-%012d', i), \
               json_set(seed.body, '$.thread_id', printf('00000000-0000-4000-8000-%012d', i), '$.metadata.n', i), \
               seed.status, seed.created_at, seed.updated_at, seed.sweepable \
             FROM n, (SELECT body, status, created_at, updated_at, sweepable FROM weft_server_records \
               WHERE kind = 'thread') AS seed"
        );
        let done = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&pool).await.unwrap();
        assert_eq!(done.rows_affected(), count);
        pool.close().await;
    });
}

#[cfg(target_os = "linux")]
#[test]
fn a_million_idle_threads_cost_no_memory_at_start_and_the_first_request_is_fast() {
    const THREADS: u64 = 1_000_000;
    const RSS_LIMIT: u64 = 100 * 1024 * 1024;
    let scratch = Scratch::new("million");
    let db = scratch.path("server.db");
    let mut first = Weft::start(&db, &[]);
    first.wait_ready();
    let (status, seed) = first.post("/threads", r#"{"metadata": {"seed": true}}"#);
    assert_eq!(status, 200, "{seed}");
    first.signal("TERM");
    assert!(first.wait_exit(Duration::from_secs(10)).status.success());
    let filling = Instant::now();
    add_threads(&db, THREADS - 1);
    eprintln!("{THREADS} threads in the file after {:?}", filling.elapsed());

    let started = Instant::now();
    let mut server = Weft::start(&db, &[]);
    // The first request answered: `/ok`, then a thread that was never in this process's memory.
    let port = server.port;
    let first_ok = loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && server.get("/ok").0 == 200 {
            break started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no answer within 30 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    server.wait_ready();
    let (status, thread) = server.get("/threads/00000000-0000-4000-8000-000000777777");
    assert_eq!(status, 200, "{thread}");
    assert!(thread.contains(r#""n":777777"#), "{thread}");
    eprintln!("a thread read after {:?}", started.elapsed());
    let (status, count) = server.post("/threads/count", "{}");
    eprintln!("counted after {:?}", started.elapsed());
    assert_eq!((status, count.trim()), (200, THREADS.to_string().as_str()));
    // A page of the newest (on an index: no scan of the million).
    let (status, page) = server.post("/threads/search", r#"{"limit": 10, "offset": 20}"#);
    assert_eq!(status, 200, "{page}");
    assert_eq!(page.matches("thread_id").count(), 10, "{page}");
    // A search by metadata: the database skips the rows that cannot match (one thread decoded, not a
    // million).
    let searching = Instant::now();
    let (status, found) = server.post("/threads/search", r#"{"metadata": {"n": 999999}}"#);
    assert_eq!(status, 200, "{found}");
    assert_eq!(found.matches("thread_id").count(), 1, "{found}");
    assert!(found.contains("00000000-0000-4000-8000-000000999999"), "{found}");
    eprintln!("searched by metadata in {:?}", searching.elapsed());
    let resident = rss(server.pid());
    assert!(first_ok < Duration::from_secs(1), "first request after {first_ok:?}");
    assert!(resident < RSS_LIMIT, "RSS after the restart and four requests: {} MB", resident >> 20);
    eprintln!("first request after {first_ok:?}; RSS {} MB", resident >> 20);
}
