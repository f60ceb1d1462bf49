//! A cancel that cannot be done is not dropped: under the `interrupt` and `rollback` strategies the new run
//! is not made while the runs in flight cannot be cancelled (the caller gets the failure, as LangGraph
//! answers), and a bulk cancel reports it. The failure: the database refuses to write one run's record.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::time::Duration;

use common::{get, post, start, thread};
use serde_json::{Value, json};

/// A fresh database file, its folder removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("weft-cancel-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn run_status(addr: std::net::SocketAddr, tid: &str, rid: &str) -> Value {
    get(addr, &format!("/threads/{tid}/runs/{rid}")).await.json()["status"].clone()
}

async fn wait_for(addr: std::net::SocketAddr, tid: &str, rid: &str, status: &str) {
    for _ in 0..200 {
        if run_status(addr, tid, rid).await == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {rid} never {status}: {}", run_status(addr, tid, rid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_flight_that_cannot_be_cancelled_keep_the_new_run_from_being_made() {
    let scratch = Scratch::new("inflight");
    let file = scratch.0.join("server.db");
    let builder = weft_server::Server::builder().graph("slow", common::slow()).sqlite(&file);
    let server = start(builder).await;
    let tid = thread(server.addr).await;
    let runs = format!("/threads/{tid}/runs");
    let first = post(server.addr, &runs, json!({"assistant_id": "slow", "input": {"delay": 2}})).await;
    let first = first.json()["run_id"].as_str().unwrap().to_owned();
    wait_for(server.addr, &tid, &first, "running").await;
    let queued = json!({"assistant_id": "slow", "input": {"delay": 0}, "multitask_strategy": "enqueue"});
    let queued = post(server.addr, &runs, queued).await.json()["run_id"].as_str().unwrap().to_owned();

    // The database now refuses to write the queued run's record: cancelling it fails.
    let url = format!("sqlite://{}", file.display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    for (when, row) in [("INSERT", "NEW"), ("UPDATE", "OLD"), ("DELETE", "OLD")] {
        let trigger = format!(
            "CREATE TRIGGER refuse_{when} BEFORE {when} ON weft_server_records WHEN {row}.id = '{queued}' \
             BEGIN SELECT RAISE(ABORT, 'the disk refused'); END"
        );
        sqlx::query(sqlx::AssertSqlSafe(trigger)).execute(&db).await.unwrap();
    }
    for strategy in ["interrupt", "rollback"] {
        let body = json!({"assistant_id": "slow", "input": {"delay": 0}, "multitask_strategy": strategy});
        let refused = post(server.addr, &runs, body).await;
        assert_eq!(refused.status, 500, "{strategy}: {}", refused.body);
        assert!(refused.detail().contains("the disk refused"), "{strategy}: {}", refused.detail());
        let listed = get(server.addr, &runs).await.json();
        let ids: Vec<&str> =
            listed.as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), 2, "{strategy}: the new run was withdrawn: {listed}");
        assert!(ids.contains(&first.as_str()) && ids.contains(&queued.as_str()));
    }
    assert_eq!(run_status(server.addr, &tid, &first).await, "running", "the run in flight was not stopped");
    assert_eq!(run_status(server.addr, &tid, &queued).await, "pending");
    // A bulk cancel says so too, after cancelling what it can.
    let bulk = post(server.addr, "/runs/cancel", json!({"status": "pending"})).await;
    assert_eq!(bulk.status, 500, "{}", bulk.body);
    assert!(bulk.detail().contains("the disk refused"), "{}", bulk.detail());

    // The database writes again: the run in flight ends as it would have, then the queued one runs.
    for when in ["INSERT", "UPDATE", "DELETE"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP TRIGGER refuse_{when}"))).execute(&db).await.unwrap();
    }
    wait_for(server.addr, &tid, &first, "success").await;
    wait_for(server.addr, &tid, &queued, "success").await;
}
