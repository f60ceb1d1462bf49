//! Records paged from the database: a SQLite server that keeps two threads and two finished runs in
//! memory answers searches, counts, pages, gets and run lists exactly as the in-memory mode (which keeps
//! everything) does, before and after a restart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;

use common::{get, post, start};
use serde_json::{Value, json};

const THREADS: usize = 30;

fn thread_id(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// Makes the threads (in order, each with its number and parity in its metadata) and a finished run on
/// every third one.
async fn populate(addr: SocketAddr) {
    for n in 0..THREADS {
        let body = json!({
            "thread_id": thread_id(n),
            "metadata": {"n": n, "even": n % 2 == 0, "name": format!("o'brien {n}"), "a.b": n % 3, "tags": ["x", n]}
        });
        let made = post(addr, "/threads", body).await;
        assert_eq!(made.status, 200, "{}", made.body);
        if n % 3 == 0 {
            let run = json!({"assistant_id": "simple", "input": {"items": [n.to_string()]}});
            let done = post(addr, &format!("/threads/{}/runs/wait", thread_id(n)), run).await;
            assert_eq!(done.status, 200, "{}", done.body);
        }
        // Distinct creation times, so that the order by time is the order made on both servers.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// What a search answers: the ids in order, and the pagination headers.
async fn search(addr: SocketAddr, body: Value) -> (Vec<String>, Option<String>, Option<String>) {
    let reply = post(addr, "/threads/search", body.clone()).await;
    assert_eq!(reply.status, 200, "{body}: {}", reply.body);
    let ids = reply.thread_ids();
    (
        ids,
        reply.header("x-pagination-total").map(str::to_owned),
        reply.header("x-pagination-next").map(str::to_owned),
    )
}

/// Everything the scenario reads, in order: searches, counts, the threads and their runs.
async fn observe(addr: SocketAddr) -> Vec<Value> {
    let mut seen = Vec::new();
    let searches = [
        json!({}),
        json!({"limit": 7, "offset": 5}),
        json!({"limit": 7, "offset": 28}),
        json!({"limit": 100, "sort_order": "asc"}),
        json!({"limit": 5, "sort_by": "thread_id", "sort_order": "asc", "offset": 3}),
        json!({"limit": 5, "sort_by": "updated_at"}),
        json!({"limit": 40, "sort_by": "status"}),
        json!({"limit": 4, "offset": 2, "metadata": {"even": true}}),
        json!({"metadata": {"n": 7}}),
        json!({"metadata": {"n": 8, "even": true}}),
        json!({"metadata": {"n": 8, "even": false}}),
        json!({"metadata": {"name": "o'brien 5"}}),
        json!({"metadata": {"a.b": 2}, "limit": 3}),
        json!({"metadata": {"tags": [12]}}),
        json!({"metadata": {"n": 3.0}}),
        json!({"status": "idle", "limit": 2, "metadata": {"even": false}}),
        json!({"limit": 3, "values": {"items": ["3", "a", "b"]}}),
        json!({"ids": [thread_id(4), thread_id(9), thread_id(99)], "sort_order": "asc"}),
        json!({"limit": 1, "offset": 1000}),
    ];
    for body in searches {
        let (ids, total, next) = search(addr, body.clone()).await;
        seen.push(json!({"search": body, "ids": ids, "total": total, "next": next}));
    }
    for body in [json!({}), json!({"metadata": {"even": false}}), json!({"status": "idle"})] {
        let count = post(addr, "/threads/count", body.clone()).await;
        seen.push(json!({"count": body, "answer": count.json()}));
    }
    for n in 0..THREADS {
        let thread = get(addr, &format!("/threads/{}", thread_id(n))).await.json();
        let runs = get(addr, &format!("/threads/{}/runs", thread_id(n))).await.json();
        let statuses: Vec<Value> = runs.as_array().unwrap().iter().map(|r| r["status"].clone()).collect();
        seen.push(
            json!({"n": n, "metadata": thread["metadata"], "values": thread["values"], "runs": statuses}),
        );
    }
    seen
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn a_server_keeping_two_records_answers_as_one_keeping_all() {
    let dir = std::env::temp_dir().join(format!("weft-server-paged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("paged.db");
    let paged = || common::builder().sqlite(&path).record_cache(2);

    let expected = runtime().block_on(async {
        let whole = start(common::builder().in_memory()).await;
        populate(whole.addr).await;
        observe(whole.addr).await
    });
    // Each server's runtime goes with it, and with it the file's lock.
    let got = runtime().block_on(async {
        let server = start(paged()).await;
        populate(server.addr).await;
        observe(server.addr).await
    });
    assert_eq!(expected.len(), got.len());
    for (e, g) in expected.iter().zip(&got) {
        assert_eq!(e, g);
    }
    // After a restart (nothing but the assistants, crons and live runs read at start): the same answers.
    let restarted = runtime().block_on(async {
        let server = start(paged()).await;
        observe(server.addr).await
    });
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(restarted, expected);
}
