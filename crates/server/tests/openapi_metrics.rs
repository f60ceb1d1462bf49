//! `/openapi.json` against the router (every documented method is served, every other method of a
//! documented path is refused with `405`), and `/metrics` counting runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{builder, get, post, send, start, thread};
use serde_json::json;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

#[tokio::test]
async fn the_document_and_the_router_agree() {
    let server = start(builder()).await;
    let doc = get(server.addr, "/openapi.json").await;
    assert_eq!(doc.status, 200);
    let doc = doc.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for expected in [
        "/runs/crons",
        "/runs/crons/{cron_id}",
        "/threads/{thread_id}/runs/crons",
        "/openapi.json",
        "/metrics",
    ] {
        assert!(paths.contains_key(expected), "{expected} is documented");
    }
    let id = uuid::Uuid::new_v4().to_string();
    for (path, operations) in paths {
        // Path parameters as ids that name nothing (a namespace or a checkpoint id: the same).
        let concrete: String = path
            .split('/')
            .map(|part| if part.starts_with('{') { id.as_str() } else { part })
            .collect::<Vec<_>>()
            .join("/");
        let documented: Vec<String> =
            operations.as_object().unwrap().keys().map(|m| m.to_ascii_uppercase()).collect();
        for method in METHODS {
            let body = matches!(method, "POST" | "PUT" | "PATCH").then_some(b"{\"__probe__\": 1}".as_slice());
            let r = send(server.addr, method, &concrete, body, &[]).await;
            if documented.iter().any(|m| m == method) {
                assert_ne!(r.status, 405, "{method} {path} is documented but not routed");
            } else {
                assert_eq!(r.status, 405, "{method} {path} is routed but not documented: {}", r.body);
            }
        }
    }
    // And a path the document does not name is not served at all.
    assert_eq!(get(server.addr, "/runs/crons/x/y").await.status, 404);
}

#[tokio::test]
async fn metrics_count_runs_by_how_they_ended() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    post(
        server.addr,
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "simple", "input": {"items": []}}),
    )
    .await;
    let r = get(server.addr, "/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    let lines: Vec<&str> = r.body.lines().collect();
    for line in [
        "weft_runs{status=\"pending\"} 0",
        "weft_runs{status=\"running\"} 0",
        "weft_runs_finished_total{status=\"success\"} 1",
        "weft_runs_finished_total{status=\"error\"} 0",
        "weft_run_duration_seconds_bucket{le=\"+Inf\"} 1",
        "weft_run_duration_seconds_count 1",
    ] {
        assert!(lines.contains(&line), "{line} missing in\n{}", r.body);
    }
}
