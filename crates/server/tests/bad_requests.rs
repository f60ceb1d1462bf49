//! Bad requests get LangGraph's status codes and `{"detail": ...}` texts, and leave nothing saved.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{builder, get, post, post_raw, send, start, thread};
use serde_json::json;

#[tokio::test]
async fn malformed_and_mistyped_bodies_are_422_with_the_validators_text() {
    let server = start(builder()).await;
    let r = post_raw(server.addr, "/runs/wait", b"{not json").await;
    assert_eq!((r.status, r.detail()), (422, "Invalid JSON in request body".to_owned()));
    assert_eq!(r.header("content-type"), Some("application/json"));

    let r = post(server.addr, "/runs/wait", json!({"input": {}})).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.detail(),
        "\"assistant_id\" is a required property\n\nFailed validating \"required\" in \
         schema[\"components\"][\"schemas\"][\"RunCreateStateless\"]\n\nOn instance:\n    {\"input\":{}}"
    );
    let r = post(
        server.addr,
        "/runs/stream",
        json!({"assistant_id": "simple", "stream_mode": ["values", "nope"]}),
    )
    .await;
    assert_eq!(r.status, 422);
    assert!(
        r.detail().starts_with(
            "[\"values\",\"nope\"] is not valid under any of the schemas listed in the 'anyOf' keyword"
        ),
        "{}",
        r.detail()
    );
    let r = post(server.addr, "/threads", json!({"metadata": []})).await;
    assert_eq!(r.status, 422);
    assert!(r.detail().starts_with("[] is not of type \"object\"\n\nFailed validating \"type\" in schema[\"properties\"][\"metadata\"]"), "{}", r.detail());
    let r = post(server.addr, "/store/items/search", json!({"limit": "ten"})).await;
    assert_eq!(
        (r.status, r.detail().lines().next().unwrap().to_owned()),
        (422, "\"ten\" is not of type \"integer\"".to_owned())
    );
}

#[tokio::test]
async fn unknown_assistants_threads_runs_and_routes() {
    let server = start(builder()).await;
    let r = post(server.addr, "/runs/wait", json!({"assistant_id": "nope"})).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.detail(),
        "Invalid assistant: 'nope'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: simple, hitl, slow"
    );
    let missing = "00000000-0000-0000-0000-000000000000";
    let r =
        post(server.addr, &format!("/threads/{missing}/runs/wait"), json!({"assistant_id": "simple"})).await;
    assert_eq!((r.status, r.detail()), (404, "Thread or assistant not found.".to_owned()));
    let r = get(server.addr, &format!("/threads/{missing}")).await;
    assert_eq!((r.status, r.detail()), (404, format!("Thread with ID {missing} not found")));
    let r = get(server.addr, "/threads/abc").await;
    assert_eq!((r.status, r.detail()), (422, "Invalid thread ID: must be a UUID".to_owned()));
    let tid = thread(server.addr).await;
    let r = get(server.addr, &format!("/threads/{tid}/runs/{missing}")).await;
    assert_eq!((r.status, r.detail()), (404, "Run not found".to_owned()));
    let r = post(server.addr, "/assistants", json!({"graph_id": "nope"})).await;
    assert_eq!(
        (r.status, r.detail()),
        (404, "Graph 'nope' not found. Expected one of: ['hitl', 'simple', 'slow']".to_owned())
    );
    let r = get(server.addr, "/no/such/route").await;
    assert_eq!((r.status, r.json()), (404, json!({"detail": "Not Found"})));
    let r = send(server.addr, "PUT", "/threads", Some(b"{}"), &[]).await;
    assert_eq!((r.status, r.detail()), (405, "Method Not Allowed".to_owned()));
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let server = start(builder().max_body_bytes(64)).await;
    let big = json!({"assistant_id": "simple", "input": {"items": ["x".repeat(100)]}});
    let r = post(server.addr, "/runs/wait", big).await;
    assert_eq!((r.status, r.detail()), (413, "Request body too large (limit: 64 bytes)".to_owned()));
}

#[tokio::test]
async fn resume_rules_and_configuration_conflicts() {
    let server = start(builder()).await;
    let r =
        post(server.addr, "/runs/wait", json!({"assistant_id": "hitl", "command": {"resume": "x"}})).await;
    assert_eq!((r.status, r.detail()), (400, "You must provide a thread_id when resuming.".to_owned()));
    let body = json!({"assistant_id": "simple", "config": {"configurable": {"a": 1}}, "context": {"b": 2}});
    let r = post(server.addr, "/runs/wait", body).await;
    assert_eq!(r.status, 400);
    assert!(r.detail().starts_with("Cannot specify both configurable and context."), "{}", r.detail());
    let tid = thread(server.addr).await;
    let r = post(server.addr, &format!("/threads/{tid}/state"), json!({"values": {"items": ["x"]}})).await;
    assert_eq!(r.status, 400);
    assert!(r.detail().contains("has no assigned graph ID"), "{}", r.detail());
}

#[tokio::test]
async fn a_rejected_run_on_a_busy_thread_saves_nothing() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let first = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "slow", "input": {"delay": 0.5}}),
    )
    .await;
    assert_eq!(first.status, 200);
    let r = post(
        server.addr,
        &format!("/threads/{tid}/runs"),
        json!({"assistant_id": "slow", "input": {}, "multitask_strategy": "reject"}),
    )
    .await;
    assert_eq!(
        (r.status, r.detail()),
        (409, "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.".to_owned())
    );
    let runs = get(server.addr, &format!("/threads/{tid}/runs")).await.json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let r = post(server.addr, &format!("/threads/{tid}/state"), json!({"values": {}})).await;
    assert_eq!(r.status, 409, "no state update while a run is in flight");
    let first_id = first.json()["run_id"].as_str().unwrap().to_owned();
    let joined = get(server.addr, &format!("/threads/{tid}/runs/{first_id}/join")).await;
    assert_eq!(joined.json(), json!({"items": ["slept", "b"], "delay": 0.5}));
}

#[tokio::test]
async fn a_thread_and_an_assistant_that_exist_are_not_made_twice() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let r = post(server.addr, "/threads", json!({"thread_id": tid})).await;
    assert_eq!((r.status, r.detail()), (409, format!("Thread with ID {tid} already exists")));
    let count = post(server.addr, "/threads/count", json!({})).await.json();
    assert_eq!(count, json!(1));
    let a = post(server.addr, "/assistants", json!({"graph_id": "simple"})).await.json();
    let id = a["assistant_id"].as_str().unwrap();
    let r = post(server.addr, "/assistants", json!({"graph_id": "simple", "assistant_id": id})).await;
    assert_eq!((r.status, r.detail()), (409, format!("Assistant {id} already exists")));
    let r = post(server.addr, "/assistants/count", json!({"graph_id": "simple"})).await;
    assert_eq!(r.json(), json!(2), "the graph's own assistant and the one made");
}

#[tokio::test]
async fn graph_ids_are_registered_once() {
    let err = weft_server::Server::builder()
        .graph("g", common::simple())
        .graph("g", common::simple())
        .in_memory()
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, weft_server::ServerError::DuplicateGraph(ref id) if id == "g"), "{err}");
    let err =
        weft_server::Server::builder().graph("", common::simple()).in_memory().build().await.unwrap_err();
    assert!(matches!(err, weft_server::ServerError::InvalidGraphId(_)), "{err}");
}

#[tokio::test]
async fn browsers_get_langgraphs_cors_answers() {
    let server = start(builder()).await;
    let preflight = [
        ("Origin", "http://studio.example"),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "content-type,x-api-key"),
    ];
    let r = send(server.addr, "OPTIONS", "/threads", None, &preflight).await;
    assert_eq!((r.status, r.body.as_str()), (200, "OK"));
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("access-control-allow-headers"), Some("content-type,x-api-key"));
    assert!(r.header("access-control-allow-methods").is_some_and(|m| m.contains("PATCH")));
    let r = send(server.addr, "GET", "/ok", None, &[("Origin", "http://studio.example")]).await;
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert!(r.header("access-control-expose-headers").is_some_and(|h| h.contains("x-pagination-total")));
    let r = get(server.addr, "/ok").await;
    assert_eq!(r.header("access-control-allow-origin"), None, "no CORS headers without an Origin");
}

#[tokio::test]
async fn threads_are_found_by_their_values() {
    let server = start(builder()).await;
    let tid = thread(server.addr).await;
    let other = thread(server.addr).await;
    post(
        server.addr,
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "simple", "input": {"items": ["needle"]}}),
    )
    .await;
    let found = post(server.addr, "/threads/search", json!({"values": {"items": ["needle"]}})).await;
    assert_eq!(found.header("x-pagination-total"), Some("1"));
    assert_eq!(found.thread_ids(), [tid], "not {other}, which has no values");
}

#[tokio::test]
async fn searches_select_fields_and_refuse_unknown_ones() {
    let server = start(builder()).await;
    let addr = server.addr;
    let t = thread(addr).await;
    post(addr, &format!("/threads/{t}/runs/wait"), json!({"assistant_id": "simple", "input": {"items": []}}))
        .await;
    let found = post(addr, "/threads/search", json!({"ids": [t], "select": ["thread_id", "status"]})).await;
    assert_eq!(found.json(), json!([{"thread_id": t, "status": "idle"}]));
    let found = post(addr, "/assistants/search", json!({"graph_id": "simple", "select": ["graph_id"]})).await;
    assert_eq!(found.json(), json!([{"graph_id": "simple"}]));
    let runs = get(addr, &format!("/threads/{t}/runs?select=status&select=run_id")).await.json();
    let keys: Vec<&String> = runs[0].as_object().unwrap().keys().collect();
    assert_eq!((keys.len(), runs[0]["status"].clone()), (2, json!("success")), "{runs}");
    // Without a selection, every field.
    assert!(get(addr, &format!("/threads/{t}/runs")).await.json()[0]["kwargs"].is_object());

    let r = post(addr, "/threads/search", json!({"select": ["thread_id", "nope"]})).await;
    assert_eq!(r.status, 422);
    assert!(
        r.detail().starts_with("\"nope\" is not one of \"thread_id\", \"created_at\" or 7 other"),
        "{}",
        r.detail()
    );
    let r = post(addr, "/assistants/count", json!({"select": "name"})).await;
    assert!(r.detail().starts_with("\"name\" is not of type \"array\""), "{}", r.detail());
    let r = get(addr, &format!("/threads/{t}/runs?select=nope&select=status")).await;
    assert_eq!(r.status, 422);
    assert!(
        r.detail().starts_with("Invalid select columns: ['nope']. Expected: {'run_id', 'thread_id'"),
        "{}",
        r.detail()
    );
}

#[tokio::test]
async fn threads_made_with_supersteps_apply_them_or_say_why_not() {
    let server = start(builder()).await;
    let addr = server.addr;
    let steps = json!([
        {"updates": [{"values": {"items": ["a"]}, "as_node": "a"}]},
        {"updates": [{"values": {"items": ["x"]}, "as_node": "a"}, {"values": {"items": ["y"]}, "as_node": "a"}]},
    ]);
    let made = post(addr, "/threads", json!({"metadata": {"graph_id": "simple"}, "supersteps": steps})).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let thread = made.json();
    assert_eq!(
        (thread["status"].clone(), thread["values"].clone()),
        (json!("interrupted"), json!({"items": ["a", "x", "y"]}))
    );
    let t = thread["thread_id"].as_str().unwrap();
    let state = get(addr, &format!("/threads/{t}/state")).await.json();
    assert_eq!(state["next"], json!(["b"]));
    let history = get(addr, &format!("/threads/{t}/history?limit=10")).await.json();
    assert_eq!(history.as_array().map(Vec::len), Some(2), "one checkpoint per superstep: {history}");
    let done =
        post(addr, &format!("/threads/{t}/runs/wait"), json!({"assistant_id": "simple", "input": null}))
            .await;
    assert_eq!(done.json()["items"], json!(["a", "x", "y", "b"]));

    // A command is not taken yet, and nothing is made.
    let command = json!([{"updates": [{"command": {"goto": "b"}, "as_node": "a"}]}]);
    let r = post(addr, "/threads", json!({"metadata": {"graph_id": "simple"}, "supersteps": command})).await;
    assert_eq!(
        (r.status, r.detail().starts_with("Commands in supersteps are not supported")),
        (422, true),
        "{}",
        r.body
    );
    let count = post(addr, "/threads/count", json!({})).await.json();
    assert_eq!(count, json!(1));
    // Without a graph the thread is made; the 201 says why its state is not.
    let bare = json!([{"updates": [{"values": {"items": ["z"]}, "as_node": "a"}]}]);
    let r = post(addr, "/threads", json!({"supersteps": bare})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(
        r.detail().contains("was created, but there were problems updating the state: Thread '"),
        "{}",
        r.detail()
    );
    assert_eq!(post(addr, "/threads/count", json!({})).await.json(), json!(2));
    let unknown = json!([{"updates": [{"values": {"items": ["z"]}, "as_node": "nowhere"}]}]);
    let r = post(addr, "/threads", json!({"metadata": {"graph_id": "simple"}, "supersteps": unknown})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post(addr, "/threads", json!({"supersteps": [{"updates": "x"}]})).await;
    assert_eq!(r.status, 422, "{}", r.body);
}

#[tokio::test]
async fn graph_drawings_take_xray_as_langgraph_does() {
    let mut outer = weft_graph::StateGraph::with_initial(common::state());
    outer.add_node("sub", common::simple());
    outer.add_edge(weft_graph::START, "sub");
    let server = start(builder().graph("nested", outer.compile().unwrap())).await;
    let ids = |r: &common::Reply| -> Vec<String> {
        r.json()["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap().to_owned()).collect()
    };
    let made = post(server.addr, "/assistants", json!({"graph_id": "nested"})).await.json();
    let path = format!("/assistants/{}/graph", made["assistant_id"].as_str().unwrap());
    let r = get(server.addr, &path).await;
    assert_eq!((r.status, ids(&r)), (200, vec!["__start__".into(), "sub".into(), "__end__".into()]));
    for xray in ["true", "1"] {
        let r = get(server.addr, &format!("{path}?xray={xray}")).await;
        assert_eq!(r.status, 200);
        assert_eq!(ids(&r), ["__start__", "__end__", "sub:a", "sub:b"]);
        let json = r.json();
        assert_eq!(json["nodes"][2]["data"]["name"], json!("sub:a"));
        assert_eq!(
            json["edges"],
            json!([
                {"source": "__start__", "target": "sub:a"},
                {"source": "sub:b", "target": "__end__"},
                {"source": "sub:a", "target": "sub:b"}
            ])
        );
    }
    for bad in ["maybe", "0", "-1"] {
        let r = get(server.addr, &format!("{path}?xray={bad}")).await;
        assert_eq!((r.status, r.detail()), (422, "Invalid xray value".to_owned()));
    }
}

#[tokio::test]
async fn enums_bounds_and_far_delays_are_422_and_every_form_of_an_id_is_one_id() {
    let server = start(builder()).await;
    let id = thread(server.addr).await;
    let run = |extra: serde_json::Value| {
        let mut body = json!({"assistant_id": "simple", "input": {}});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let on_thread = format!("/threads/{id}/runs");
    for (path, extra, first_line) in [
        (
            on_thread.as_str(),
            json!({"multitask_strategy": "x"}),
            "\"x\" is not one of \"reject\", \"rollback\" or 2 other candidates",
        ),
        (on_thread.as_str(), json!({"if_not_exists": "x"}), "\"x\" is not one of \"create\" or \"reject\""),
        (
            on_thread.as_str(),
            json!({"interrupt_before": 3}),
            "3 is not valid under any of the schemas listed in the 'anyOf' keyword",
        ),
        ("/runs", json!({"durability": "x"}), "\"x\" is not one of \"sync\", \"async\" or \"exit\""),
        ("/runs", json!({"on_completion": "x"}), "\"x\" is not one of \"delete\" or \"keep\""),
        ("/runs/stream", json!({"on_disconnect": "x"}), "\"x\" is not one of \"cancel\" or \"continue\""),
        ("/runs", json!({"config": {"tags": "x"}}), "\"x\" is not of type \"array\""),
    ] {
        let r = post(server.addr, path, run(extra.clone())).await;
        let detail = r.detail();
        assert_eq!((r.status, detail.lines().next().unwrap()), (422, first_line), "{path} {extra}");
    }
    for far in [1e19, 1e300, 2.6e11] {
        let r = post(server.addr, &on_thread, run(json!({"after_seconds": far}))).await;
        assert_eq!(r.status, 422, "{far}");
        assert!(r.detail().contains("before the year 10000"), "{}", r.detail());
    }
    let r = post(server.addr, "/runs", run(json!({"multitask_strategy": 3, "if_not_exists": []}))).await;
    assert_eq!(r.status, 200, "a stateless run ignores what only a run on a thread has: {}", r.detail());
    for bound in [json!({"limit": 0}), json!({"limit": 1001}), json!({"offset": -1})] {
        for path in ["/threads/search", "/assistants/search", "/runs/crons/search"] {
            assert_eq!(post(server.addr, path, bound.clone()).await.status, 422, "{path} {bound}");
        }
    }
    let r = get(server.addr, &format!("/threads/{id}/runs?limit=-1&offset=-1")).await;
    assert_eq!(r.status, 200);
    for form in [id.to_uppercase(), format!("urn:uuid:{id}"), format!("%7B{id}%7D"), id.replace('-', "")] {
        let r = get(server.addr, &format!("/threads/{form}")).await;
        assert_eq!(r.status, 200, "{form}");
        assert_eq!(r.json()["thread_id"], json!(id));
    }
    let upper = "6F1E1D70-5A3B-4C2D-9E8F-0A1B2C3D4E5F";
    let r = post(server.addr, "/threads", json!({"thread_id": upper})).await;
    assert_eq!(r.json()["thread_id"], json!(upper.to_lowercase()));
    let r = post(server.addr, "/threads", json!({"thread_id": format!("urn:uuid:{upper}")})).await;
    assert_eq!(r.status, 409, "the same thread, written differently");
}
