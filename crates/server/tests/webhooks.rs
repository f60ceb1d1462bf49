//! Webhooks, against a receiver in the test: LangGraph's payload when a run ends, retries after failures,
//! and a receiver that is down or failing leaves the run alone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post as route_post;
use common::{builder, get, post, start, thread};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use weft_runnable_core::retry::{Backoff, Jitter};

/// What the receiver got, and the statuses it answers with in turn (200 once they run out).
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Value>>>,
    answers: Arc<Mutex<VecDeque<u16>>>,
}

async fn receive(State(r): State<Receiver>, body: String) -> StatusCode {
    r.got.lock().unwrap().push(serde_json::from_str(&body).unwrap_or(Value::Null));
    let status = r.answers.lock().unwrap().pop_front().unwrap_or(200);
    StatusCode::from_u16(status).unwrap()
}

/// Runs graph `graph` statelessly on `server` with `{"items": []}` and waits, its webhook at `hook`.
async fn wait_with_webhook(server: SocketAddr, graph: &str, hook: SocketAddr) {
    let body =
        json!({"assistant_id": graph, "input": {"items": []}, "webhook": format!("http://{hook}/hook")});
    post(server, "/runs/wait", body).await;
}

async fn receiver(answers: &[u16]) -> (SocketAddr, Receiver) {
    let r =
        Receiver { got: Arc::default(), answers: Arc::new(Mutex::new(answers.iter().copied().collect())) };
    let app = Router::new().route("/hook", route_post(receive)).with_state(r.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, r)
}

fn fast(b: weft_server::ServerBuilder) -> weft_server::ServerBuilder {
    b.allow_loopback_webhooks(true).webhook_backoff(
        Backoff::new(Duration::from_millis(10), Duration::from_millis(50)).with_jitter(Jitter::None),
    )
}

async fn calls(r: &Receiver, at_least: usize) -> Vec<Value> {
    for _ in 0..200 {
        if r.got.lock().unwrap().len() >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    r.got.lock().unwrap().clone()
}

#[tokio::test]
async fn a_finished_run_posts_langgraphs_payload() {
    let (hook, r) = receiver(&[]).await;
    let server = start(fast(builder())).await;
    let tid = thread(server.addr).await;
    let url = format!("http://{hook}/hook");
    let body =
        json!({"assistant_id": "simple", "input": {"items": []}, "webhook": url, "metadata": {"m": 1}});
    let out = post(server.addr, &format!("/threads/{tid}/runs/wait"), body).await;
    assert_eq!(out.json(), json!({"items": ["a", "b"]}));
    let got = calls(&r, 1).await;
    assert_eq!(got.len(), 1);
    let p = &got[0];
    assert_eq!(p["status"], "success");
    assert_eq!(p["thread_id"], json!(tid));
    assert_eq!(p["values"], json!({"items": ["a", "b"]}));
    assert_eq!(p["kwargs"]["webhook"], json!(url));
    assert_eq!(p["metadata"]["m"], 1);
    for key in ["run_id", "assistant_id", "created_at", "run_started_at", "run_ended_at", "webhook_sent_at"] {
        assert!(p[key].is_string(), "{key} in {p}");
    }
    assert!(p.get("error").is_none());
    assert!(p["run_started_at"].as_str() <= p["run_ended_at"].as_str());
}

#[tokio::test]
async fn a_stateless_or_failed_run_says_so() {
    let (hook, r) = receiver(&[]).await;
    let failing = {
        let mut g = weft_graph::StateGraph::with_initial(common::state());
        g.add_node("boom", |_: serde_json::Value| async move {
            Err::<Value, _>(weft_runnable_core::Error::InvalidInput("no good".into()))
        });
        g.add_edge(weft_graph::START, "boom");
        g.compile().unwrap()
    };
    let server = start(fast(builder().graph("fail", failing))).await;
    wait_with_webhook(server.addr, "simple", hook).await;
    let got = calls(&r, 1).await;
    assert_eq!(
        (got[0]["status"].clone(), got[0]["values"].clone()),
        (json!("success"), json!({"items": ["a", "b"]}))
    );
    wait_with_webhook(server.addr, "fail", hook).await;
    let got = calls(&r, 2).await;
    assert_eq!(got[1]["status"], "error");
    assert_eq!(got[1]["error"]["error"], "ValueError");
    assert!(got[1]["error"]["message"].as_str().unwrap().contains("no good"), "{}", got[1]);
}

#[tokio::test]
async fn failures_and_5xx_are_retried_with_backoff_4xx_is_not() {
    let (hook, r) = receiver(&[500, 503]).await;
    let server = start(fast(builder())).await;
    wait_with_webhook(server.addr, "simple", hook).await;
    let got = calls(&r, 3).await;
    assert_eq!(got.len(), 3, "two failures, then success");
    assert_eq!(got[0]["run_id"], got[2]["run_id"]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(r.got.lock().unwrap().len(), 3, "no call after the success");

    let (hook, r) = receiver(&[500, 500, 500, 500, 500]).await;
    let server = start(fast(builder()).webhook_attempts(3)).await;
    wait_with_webhook(server.addr, "simple", hook).await;
    calls(&r, 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.got.lock().unwrap().len(), 3, "three attempts, no more");

    let (hook, r) = receiver(&[404]).await;
    let server = start(fast(builder())).await;
    wait_with_webhook(server.addr, "simple", hook).await;
    calls(&r, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(r.got.lock().unwrap().len(), 1, "a 404 is not retried");
}

#[tokio::test]
async fn a_dead_receiver_does_not_touch_the_run() {
    // A port nothing listens on.
    let dead = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let server = start(
        builder()
            .allow_loopback_webhooks(true)
            .webhook_backoff(Backoff::new(Duration::from_secs(30), Duration::from_secs(30))),
    )
    .await;
    let tid = thread(server.addr).await;
    let body =
        json!({"assistant_id": "simple", "input": {"items": []}, "webhook": format!("http://{dead}/hook")});
    let started = std::time::Instant::now();
    let out = post(server.addr, &format!("/threads/{tid}/runs/wait"), body).await;
    assert_eq!(out.json(), json!({"items": ["a", "b"]}));
    assert!(started.elapsed() < Duration::from_secs(10), "the run does not wait for the webhook's retries");
    let runs = get(server.addr, &format!("/threads/{tid}/runs")).await.json();
    assert_eq!(runs[0]["status"], "success");
    assert_eq!(get(server.addr, &format!("/threads/{tid}")).await.json()["status"], "idle");
}

#[tokio::test]
async fn loopback_webhooks_are_refused_unless_allowed() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let body = json!({"assistant_id": "simple", "webhook": "http://127.0.0.1:9/hook"});
    let r = post(server.addr, &format!("/threads/{tid}/runs"), body).await;
    assert_eq!(r.status, 422);
    assert!(r.detail().starts_with("Webhook host blocked"), "{}", r.detail());
    let r =
        post(server.addr, "/runs", json!({"assistant_id": "simple", "webhook": "ftp://example.com/x"})).await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn an_allowed_name_is_called_at_the_address_it_resolved_to() {
    // `localhost` goes through the webhook client's checked resolver, which keeps the URL's port.
    let (hook, r) = receiver(&[]).await;
    let server = start(fast(builder())).await;
    let url = format!("http://localhost:{}/hook", hook.port());
    let body = json!({"assistant_id": "simple", "input": {"items": []}, "webhook": url});
    assert_eq!(post(server.addr, "/runs/wait", body).await.status, 200);
    let got = calls(&r, 1).await;
    assert_eq!(got.len(), 1, "the receiver was called once");
    assert_eq!(got[0]["status"], "success");
}
