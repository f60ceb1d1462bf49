//! The in-memory mode (`ServerBuilder::in_memory`, no database, as `langgraph dev` runs) through the
//! server's main flows: streamed runs, a pause and its resume, history and a fork, the store, a cron, a
//! busy thread refusing a second run. (The whole suite runs on it with `WEFT_SERVER_TEST_STORAGE=memory`.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{get, post, send, start, thread};
use serde_json::{Value, json};

fn server() -> weft_server::ServerBuilder {
    weft_server::Server::builder()
        .graph("simple", common::simple())
        .graph("hitl", common::hitl())
        .graph("slow", common::slow())
        .in_memory()
}

#[tokio::test]
async fn runs_pauses_history_forks_and_the_store_work_without_a_database() {
    let server = start(server()).await;
    let addr = server.addr;

    // A streamed run, and the thread's state and status after it.
    let tid = thread(addr).await;
    let body = json!({"assistant_id": "simple", "input": {"items": []}, "stream_mode": ["values"]});
    let r = post(addr, &format!("/threads/{tid}/runs/stream"), body).await;
    assert_eq!(r.status, 200);
    assert!(r.body.ends_with("event: values\r\ndata: {\"items\":[\"a\",\"b\"]}\r\n\r\n"), "{}", r.body);
    let thread_now = get(addr, &format!("/threads/{tid}")).await.json();
    assert_eq!(thread_now["status"], "idle");
    assert_eq!(thread_now["values"], json!({"items": ["a", "b"]}));
    let runs = get(addr, &format!("/threads/{tid}/runs")).await.json();
    assert_eq!(runs[0]["status"], "success", "{runs}");

    // History, newest first, and a fork from the first checkpoint with the run's input.
    let history = post(addr, &format!("/threads/{tid}/history"), json!({"limit": 10})).await.json();
    let history = history.as_array().unwrap();
    assert_eq!(history.len(), 4, "input, a, b, and the start");
    assert_eq!(history[0]["values"], json!({"items": ["a", "b"]}));
    let after_a = history[1]["checkpoint"].clone();
    assert_eq!(history[1]["values"], json!({"items": ["a"]}));
    let forked = post(
        addr,
        &format!("/threads/{tid}/state"),
        json!({"values": {"items": ["x"]}, "checkpoint": after_a, "as_node": "a"}),
    )
    .await;
    assert_eq!(forked.status, 200, "{}", forked.body);
    let state = get(addr, &format!("/threads/{tid}/state")).await.json();
    assert_eq!(state["values"], json!({"items": ["a", "x"]}));
    assert_eq!(state["next"], json!(["b"]));

    // A pause at an interrupt, then its resume.
    let tid = thread(addr).await;
    let paused =
        post(addr, &format!("/threads/{tid}/runs/wait"), json!({"assistant_id": "hitl", "input": {}}))
            .await
            .json();
    assert_eq!(paused["__interrupt__"][0]["value"], "approve?", "{paused}");
    assert_eq!(get(addr, &format!("/threads/{tid}")).await.json()["status"], "interrupted");
    let resumed = post(
        addr,
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "hitl", "command": {"resume": "yes"}}),
    )
    .await
    .json();
    assert_eq!(resumed, json!({"items": ["yes"]}));
    assert_eq!(get(addr, &format!("/threads/{tid}")).await.json()["status"], "idle");

    // The store.
    let put = json!({"namespace": ["notes"], "key": "k", "value": {"n": 1}});
    let r = send(addr, "PUT", "/store/items", Some(put.to_string().as_bytes()), &[]).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let item = get(addr, "/store/items?namespace=notes&key=k").await.json();
    assert_eq!(item["value"], json!({"n": 1}));

    // A cron is kept and found.
    let cron = post(addr, "/runs/crons", json!({"assistant_id": "simple", "schedule": "0 9 * * *"})).await;
    assert_eq!(cron.status, 200, "{}", cron.body);
    let found = post(addr, "/runs/crons/search", json!({})).await.json();
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");
}

#[tokio::test]
async fn a_busy_thread_refuses_a_second_run_and_enqueues_on_request() {
    let server = start(server()).await;
    let addr = server.addr;
    let tid = thread(addr).await;
    let slow = json!({"assistant_id": "slow", "input": {"delay": 0.5}});
    let first = post(addr, &format!("/threads/{tid}/runs"), slow.clone()).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let mut refused = slow.clone();
    refused["multitask_strategy"] = json!("reject");
    assert_eq!(post(addr, &format!("/threads/{tid}/runs"), refused).await.status, 409);
    let mut queued = slow;
    queued["multitask_strategy"] = json!("enqueue");
    queued["input"] = json!({"delay": 0});
    let second = post(addr, &format!("/threads/{tid}/runs"), queued).await.json();
    assert_eq!(second["status"], "pending", "{second}");
    let rid = second["run_id"].as_str().unwrap();
    let joined = get(addr, &format!("/threads/{tid}/runs/{rid}/join")).await.json();
    assert_eq!(joined["items"], json!(["slept", "b", "slept", "b"]), "{joined}");
    let runs = get(addr, &format!("/threads/{tid}/runs")).await.json();
    let statuses: Vec<&Value> = runs.as_array().unwrap().iter().map(|r| &r["status"]).collect();
    assert_eq!(statuses, [&json!("success"), &json!("success")]);
}
