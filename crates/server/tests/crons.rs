//! Crons over HTTP: made, found, counted, changed and deleted as LangGraph's server does it, refused with
//! clear `422`s, and firing on their schedule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::time::Duration;

use common::{builder, get, post, send, start, thread};
use serde_json::{Value, json};
use weft_server::default_assistant_id;

async fn patch(addr: std::net::SocketAddr, path: &str, body: Value) -> common::Reply {
    send(addr, "PATCH", path, Some(body.to_string().as_bytes()), &[]).await
}

async fn delete(addr: std::net::SocketAddr, path: &str) -> common::Reply {
    send(addr, "DELETE", path, None, &[]).await
}

#[tokio::test]
async fn a_cron_has_langgraphs_shape_and_is_found_counted_changed_and_deleted() {
    let server = start(builder()).await;
    let addr = server.addr;
    let assistant_id = default_assistant_id("simple");
    let r = post(
        addr,
        "/runs/crons",
        json!({"assistant_id": "simple", "schedule": "0 9 * * *", "input": {"items": []}, "metadata": {"team": "a"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let cron = r.json();
    let cron_id = cron["cron_id"].as_str().unwrap().to_owned();
    assert_eq!(cron["assistant_id"], json!(assistant_id));
    assert_eq!(cron["thread_id"], Value::Null);
    assert_eq!(cron["user_id"], "", "no authentication: LangGraph's anonymous user");
    assert_eq!(cron["on_run_completed"], "delete");
    assert_eq!(cron["enabled"], true);
    assert_eq!(cron["schedule"], "0 9 * * *");
    assert_eq!(cron["metadata"], json!({"team": "a"}));
    assert!(cron["next_run_date"].as_str().unwrap().ends_with("T09:00:00+00:00"), "{cron}");
    assert_eq!(cron["payload"]["assistant_id"], json!(assistant_id));
    assert_eq!(cron["payload"]["config"]["configurable"]["cron_id"], json!(cron_id));
    assert_eq!(cron["payload"]["input"], json!({"items": []}));

    let tid = thread(addr).await;
    let r = post(
        addr,
        &format!("/threads/{tid}/runs/crons"),
        json!({"assistant_id": assistant_id, "schedule": "*/5 * * * *", "enabled": false, "metadata": {"team": "b"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let on_thread = r.json();
    assert_eq!(on_thread["thread_id"], json!(tid));
    assert_eq!(on_thread["on_run_completed"], Value::Null);
    let thread_cron_id = on_thread["cron_id"].as_str().unwrap().to_owned();

    let all = post(addr, "/runs/crons/search", json!({})).await;
    assert_eq!(all.header("x-pagination-total"), Some("2"));
    let ids: Vec<Value> = all.json().as_array().unwrap().iter().map(|c| c["cron_id"].clone()).collect();
    assert_eq!(ids, [json!(thread_cron_id), json!(cron_id)], "newest first");
    let by_thread = post(addr, "/runs/crons/search", json!({"thread_id": tid})).await.json();
    assert_eq!(by_thread.as_array().unwrap().len(), 1);
    let enabled = post(addr, "/runs/crons/search", json!({"enabled": true})).await.json();
    assert_eq!(enabled[0]["cron_id"], json!(cron_id));
    let picked = post(
        addr,
        "/runs/crons/search",
        json!({"select": ["cron_id", "schedule"], "sort_by": "created_at", "sort_order": "asc"}),
    )
    .await
    .json();
    assert_eq!(picked[0], json!({"cron_id": cron_id, "schedule": "0 9 * * *"}));
    assert_eq!(post(addr, "/runs/crons/count", json!({})).await.json(), json!(2));
    assert_eq!(post(addr, "/runs/crons/count", json!({"metadata": {"team": "b"}})).await.json(), json!(1));
    assert_eq!(post(addr, "/runs/crons/count", json!({"assistant_id": assistant_id})).await.json(), json!(2));

    let changed = patch(
        addr,
        &format!("/runs/crons/{cron_id}"),
        json!({"schedule": "30 10 * * *", "metadata": {"more": 1}, "input": {"items": ["x"]}, "end_time": "2099-01-01T00:00:00+00:00"}),
    )
    .await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    let changed = changed.json();
    assert!(changed["next_run_date"].as_str().unwrap().ends_with("T10:30:00+00:00"), "{changed}");
    assert_eq!(changed["metadata"], json!({"team": "a", "more": 1}));
    assert_eq!(changed["payload"]["input"], json!({"items": ["x"]}));
    assert_eq!(changed["payload"]["config"]["configurable"]["cron_id"], json!(cron_id));
    assert_eq!(changed["end_time"], "2099-01-01T00:00:00+00:00");
    let cleared = patch(addr, &format!("/runs/crons/{cron_id}"), json!({"end_time": null})).await.json();
    assert_eq!(cleared["end_time"], Value::Null);
    assert_eq!(get(addr, &format!("/runs/crons/{cron_id}")).await.json()["schedule"], "30 10 * * *");

    assert_eq!(delete(addr, &format!("/runs/crons/{cron_id}")).await.status, 204);
    assert_eq!(delete(addr, &format!("/runs/crons/{cron_id}")).await.status, 404);
    assert_eq!(get(addr, &format!("/runs/crons/{cron_id}")).await.status, 404);
    assert_eq!(post(addr, "/runs/crons/count", json!({})).await.json(), json!(1));
    assert_eq!(get(addr, "/info").await.json()["flags"]["crons"], true);
}

#[tokio::test]
async fn bad_crons_are_refused_with_clear_reasons() {
    let server = start(builder()).await;
    let addr = server.addr;
    let r = post(addr, "/runs/crons", json!({"assistant_id": "simple", "schedule": "61 * * * *"})).await;
    assert_eq!(r.status, 422);
    assert!(r.detail().starts_with("Invalid cron schedule: '61 * * * *'. Reason: "), "{}", r.detail());
    let r = post(addr, "/runs/crons", json!({"assistant_id": "simple", "schedule": "0 0 31 2 *"})).await;
    assert_eq!(r.status, 422, "a schedule that never fires");
    let r = post(
        addr,
        "/runs/crons",
        json!({"assistant_id": "simple", "schedule": "* * * * *", "timezone": "Mars/Base"}),
    )
    .await;
    assert_eq!(
        (r.status, r.detail()),
        (
            422,
            "Invalid timezone: 'Mars/Base'. Use IANA timezone format (e.g. 'America/New_York').".to_owned()
        )
    );
    let r = post(addr, "/runs/crons", json!({"assistant_id": "simple"})).await;
    assert_eq!(r.status, 422);
    assert!(r.detail().starts_with("\"schedule\" is a required property"), "{}", r.detail());
    let r = post(addr, "/runs/crons", json!({"assistant_id": "nope", "schedule": "* * * * *"})).await;
    assert_eq!(r.status, 422);
    assert!(r.detail().starts_with("Invalid assistant: 'nope'"), "{}", r.detail());
    let missing = uuid::Uuid::new_v4();
    let r = post(addr, "/runs/crons", json!({"assistant_id": missing, "schedule": "* * * * *"})).await;
    assert_eq!((r.status, r.detail()), (404, format!("Assistant '{missing}' not found")));
    let r = post(
        addr,
        &format!("/threads/{missing}/runs/crons"),
        json!({"assistant_id": "simple", "schedule": "* * * * *"}),
    )
    .await;
    assert_eq!(r.status, 404);
    assert!(r.detail().starts_with(&format!("Thread with ID '{missing}' not found")), "{}", r.detail());
    let r =
        post(addr, "/threads/nope/runs/crons", json!({"assistant_id": "simple", "schedule": "* * * * *"}))
            .await;
    assert_eq!((r.status, r.detail()), (422, "Invalid thread ID: must be a UUID".to_owned()));
    let r = post(
        addr,
        "/runs/crons",
        json!({"assistant_id": "simple", "schedule": "* * * * *", "end_time": "soon"}),
    )
    .await;
    assert_eq!(r.status, 422);
    let r = post(
        addr,
        "/runs/crons",
        json!({"assistant_id": "simple", "schedule": "* * * * *", "on_run_completed": "archive"}),
    )
    .await;
    assert_eq!(r.status, 422);
    let r = post(
        addr,
        "/runs/crons",
        json!({"assistant_id": "simple", "schedule": "* * * * *", "webhook": "http://localhost:1/hook"}),
    )
    .await;
    assert_eq!(r.status, 422, "loopback webhooks are refused by default");
    assert_eq!(post(addr, "/runs/crons/search", json!({"assistant_id": "simple"})).await.status, 422);
    assert_eq!(post(addr, "/runs/crons/search", json!({"select": ["secret"]})).await.status, 422);
    assert_eq!(post(addr, "/runs/crons/count", json!({"thread_id": "x"})).await.status, 422);
    assert_eq!(get(addr, "/runs/crons/not-a-uuid").await.status, 422);
    assert_eq!(patch(addr, &format!("/runs/crons/{missing}"), json!({"enabled": false})).await.status, 404);
    let made =
        post(addr, "/runs/crons", json!({"assistant_id": "simple", "schedule": "* * * * *"})).await.json();
    let path = format!("/runs/crons/{}", made["cron_id"].as_str().unwrap());
    let r = patch(addr, &path, json!({})).await;
    assert_eq!((r.status, r.detail()), (400, "Request body cannot be empty".to_owned()));
    assert_eq!(patch(addr, &path, json!({"schedule": "nope"})).await.status, 422);
    assert_eq!(get(addr, &path).await.json()["schedule"], "* * * * *", "a refused patch changes nothing");
}

#[tokio::test]
async fn a_cron_fires_on_its_schedule() {
    let server = start(builder()).await;
    let addr = server.addr;
    let tid = thread(addr).await;
    // Every second (croniter's sixth field).
    let r = post(
        addr,
        &format!("/threads/{tid}/runs/crons"),
        json!({"assistant_id": "simple", "schedule": "* * * * * *", "input": {"items": []}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let cron_id = r.json()["cron_id"].as_str().unwrap().to_owned();
    let mut runs = Value::Null;
    for _ in 0..100 {
        runs = get(addr, &format!("/threads/{tid}/runs")).await.json();
        if runs.as_array().is_some_and(|r| r.iter().any(|run| run["status"] == "success")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done = runs.as_array().unwrap().iter().find(|run| run["status"] == "success").expect("a run");
    assert_eq!(done["kwargs"]["config"]["configurable"]["cron_id"], json!(cron_id));
    assert_eq!(done["assistant_id"], json!(default_assistant_id("simple")));
    // Deleted, it fires no more.
    assert_eq!(delete(addr, &format!("/runs/crons/{cron_id}")).await.status, 204);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = get(addr, &format!("/threads/{tid}/runs?limit=100")).await.json().as_array().unwrap().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = get(addr, &format!("/threads/{tid}/runs?limit=100")).await.json().as_array().unwrap().len();
    assert_eq!(before, after);
}
