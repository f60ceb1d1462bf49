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
