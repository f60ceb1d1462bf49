//! Thread TTLs (embedded mode): a swept thread is deleted (`delete`) or keeps only its newest checkpoint
//! (`keep_latest`); activity restarts the clock; a thread with a run in flight is never swept.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_server::{ServerBuilder, ThreadTtlConfig, TtlStrategy};

/// A TTL of 0.01 minute is 0.6 s.
const SHORT: f64 = 0.01;

/// Sweeps every 50 ms (the sweeper's floor is 100 ms).
fn sweeping(builder: ServerBuilder, config: ThreadTtlConfig) -> ServerBuilder {
    builder.thread_ttl(ThreadTtlConfig { sweep_interval: Duration::from_millis(50), ..config })
}

async fn wait_run(addr: SocketAddr, thread_id: &str, input: Value) {
    let reply = common::post(
        addr,
        &format!("/threads/{thread_id}/runs/wait"),
        json!({"assistant_id": "simple", "input": input}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

async fn history(addr: SocketAddr, thread_id: &str) -> Vec<Value> {
    let reply = common::post(addr, &format!("/threads/{thread_id}/history"), json!({"limit": 1000})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json().as_array().cloned().unwrap_or_default()
}

/// Polls `check` every 50 ms until it holds, for at most 10 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_an_expired_thread_with_its_runs_and_checkpoints() {
    let server = common::start(sweeping(common::builder(), ThreadTtlConfig::default())).await;
    let addr = server.addr;
    let made = common::post(addr, "/threads", json!({"ttl": {"strategy": "delete", "ttl": SHORT}})).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let thread_id = made.json()["thread_id"].as_str().unwrap().to_owned();
    let kept = common::thread(addr).await;
    wait_run(addr, &thread_id, json!({})).await;
    wait_run(addr, &kept, json!({})).await;
    assert!(history(addr, &thread_id).await.len() > 1);
    eventually("the expired thread is deleted", || async {
        common::get(addr, &format!("/threads/{thread_id}")).await.status == 404
    })
    .await;
    let runs = common::get(addr, &format!("/threads/{thread_id}/runs")).await;
    assert_eq!(runs.status, 404, "its runs went with it: {}", runs.body);
    assert_eq!(
        common::get(addr, &format!("/threads/{kept}")).await.status,
        200,
        "a thread without a TTL stays"
    );
    assert!(history(addr, &kept).await.len() > 1, "with its checkpoints");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_latest_by_default_keeps_the_thread_with_only_its_newest_checkpoint() {
    let config = ThreadTtlConfig::from_langgraph_json(&json!({"checkpointer": {"ttl": {
        "strategy": "keep_latest", "default_ttl": SHORT
    }}}))
    .unwrap()
    .unwrap();
    let server = common::start(sweeping(common::builder(), config)).await;
    let addr = server.addr;
    let thread_id = common::thread(addr).await;
    for _ in 0..3 {
        wait_run(addr, &thread_id, json!({})).await;
    }
    let before = history(addr, &thread_id).await;
    assert!(before.len() > 3, "{} checkpoints", before.len());
    eventually("the thread keeps one checkpoint", || async { history(addr, &thread_id).await.len() == 1 })
        .await;
    let after = history(addr, &thread_id).await;
    assert_eq!(
        after[0]["checkpoint"]["checkpoint_id"], before[0]["checkpoint"]["checkpoint_id"],
        "the newest"
    );
    let thread = common::get(addr, &format!("/threads/{thread_id}")).await;
    assert_eq!(thread.status, 200);
    assert_eq!(thread.json()["values"]["items"], json!(["a", "b", "a", "b", "a", "b"]), "its state is whole");
    // The thread goes on from what it kept.
    wait_run(addr, &thread_id, json!({})).await;
    let state = common::get(addr, &format!("/threads/{thread_id}/state")).await.json();
    assert_eq!(state["values"]["items"].as_array().map(Vec::len), Some(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activity_restarts_the_clock() {
    let server = common::start(sweeping(common::builder(), ThreadTtlConfig::default())).await;
    let addr = server.addr;
    // 1.2 s of TTL, patched every 0.3 s for 2.4 s: never idle for its TTL.
    let made = common::post(addr, "/threads", json!({"ttl": {"strategy": "delete", "ttl": 0.02}})).await;
    let thread_id = made.json()["thread_id"].as_str().unwrap().to_owned();
    for i in 0..8 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let body = format!(r#"{{"metadata": {{"touch": {i}}}}}"#);
        let patched =
            common::send(addr, "PATCH", &format!("/threads/{thread_id}"), Some(body.as_bytes()), &[]).await;
        assert_eq!(patched.status, 200, "still there after {} ms: {}", (i + 1) * 300, patched.body);
    }
    eventually("the thread left idle is deleted", || async {
        common::get(addr, &format!("/threads/{thread_id}")).await.status == 404
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_with_a_run_in_flight_is_not_swept() {
    let config = ThreadTtlConfig { strategy: TtlStrategy::Delete, ..ThreadTtlConfig::default() };
    let server = common::start(sweeping(common::builder(), config)).await;
    let addr = server.addr;
    // 0.3 s of TTL; the run takes 2 s.
    let made = common::post(addr, "/threads", json!({"ttl": {"ttl": 0.005}})).await;
    let thread_id = made.json()["thread_id"].as_str().unwrap().to_owned();
    let run = common::post(
        addr,
        &format!("/threads/{thread_id}/runs"),
        json!({"assistant_id": "slow", "input": {"delay": 2}}),
    )
    .await;
    assert_eq!(run.status, 200, "{}", run.body);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let thread = common::get(addr, &format!("/threads/{thread_id}")).await;
    assert_eq!(thread.status, 200, "not swept while its run runs");
    assert_eq!(thread.json()["status"], "busy");
    eventually("swept once the run has ended and its TTL passed", || async {
        common::get(addr, &format!("/threads/{thread_id}")).await.status == 404
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_sets_a_ttl_and_a_bad_one_is_refused() {
    let server = common::start(sweeping(common::builder(), ThreadTtlConfig::default())).await;
    let addr = server.addr;
    let bad = common::post(addr, "/threads", json!({"ttl": {"strategy": "archive", "ttl": 5}})).await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    let thread_id = common::thread(addr).await;
    wait_run(addr, &thread_id, json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(history(addr, &thread_id).await.len() > 1, "no TTL, nothing swept");
    let body = json!({"ttl": {"strategy": "keep_latest", "ttl": SHORT}}).to_string();
    let patched =
        common::send(addr, "PATCH", &format!("/threads/{thread_id}"), Some(body.as_bytes()), &[]).await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    eventually("pruned to one checkpoint", || async { history(addr, &thread_id).await.len() == 1 }).await;
}

/// The `sweepable` mark of a thread in the records' table of the SQLite file `path`.
async fn sweepable(path: &std::path::Path, thread_id: &str) -> Option<i64> {
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
    let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    let mark =
        sqlx::query_scalar("SELECT sweepable FROM weft_server_records WHERE kind = 'thread' AND id = ?")
            .bind(thread_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    pool.close().await;
    mark
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_kept_with_its_latest_checkpoint_is_marked_in_the_table_until_it_changes() {
    let dir = std::env::temp_dir().join(format!("weft-server-swept-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("swept.db");
    let config = ThreadTtlConfig { strategy: TtlStrategy::KeepLatest, ..ThreadTtlConfig::default() };
    let server = common::start(sweeping(common::builder().sqlite(&path), config)).await;
    let addr = server.addr;
    let made =
        common::post(addr, "/threads", json!({"ttl": {"strategy": "keep_latest", "ttl": SHORT}})).await;
    let thread_id = made.json()["thread_id"].as_str().unwrap().to_owned();
    wait_run(addr, &thread_id, json!({})).await;
    assert_eq!(sweepable(&path, &thread_id).await, Some(1), "a thread with a TTL is for the sweeper");
    eventually("the thread keeps one checkpoint", || async { history(addr, &thread_id).await.len() == 1 })
        .await;
    // Marked once pruned: the sweeper's scans pass it by (and so would a restart's or another instance's).
    eventually("the pruned thread is marked", || async { sweepable(&path, &thread_id).await.is_none() })
        .await;
    // A change makes it the sweeper's again: pruned again once idle for its TTL.
    wait_run(addr, &thread_id, json!({})).await;
    assert!(history(addr, &thread_id).await.len() > 1);
    eventually("the changed thread is pruned again", || async { history(addr, &thread_id).await.len() == 1 })
        .await;
    eventually("and marked again", || async { sweepable(&path, &thread_id).await.is_none() }).await;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
