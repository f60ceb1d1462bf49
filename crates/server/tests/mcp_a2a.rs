//! `/mcp` (each assistant an MCP tool) and `/a2a/{assistant_id}` (each assistant an A2A agent) against a
//! real server: the protocols' happy paths, their errors, and authentication.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;

use async_trait::async_trait;
use common::{Reply, builder, send, start};
use serde_json::{Value, json};
use weft_graph::{ChannelKind, CompiledGraph, END, JsonState, START, StateGraph};
use weft_server::{Action, Auth, AuthContext, AuthError, AuthRequest, Filter, User};

const JSON: (&str, &str) = ("accept", "application/json, text/event-stream");

/// Answers the last message with `echo: <its content>`.
fn chat() -> CompiledGraph<JsonState> {
    let state = JsonState::builder().channel("messages", ChannelKind::Reducer).build();
    let mut g = StateGraph::with_initial(state);
    g.add_node("echo", |s: Value| async move {
        let last = s["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        let text = last["content"].as_str().unwrap_or_default().to_owned();
        Ok::<_, weft_runnable_core::Error>(
            json!({"messages": [{"type": "ai", "content": format!("echo: {text}")}]}),
        )
    });
    g.add_edge(START, "echo");
    g.add_edge("echo", END);
    g.compile().unwrap()
}

/// Fails every run.
fn boom() -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(common::state());
    g.add_node("fail", |_: Value| async move {
        Err::<Value, _>(weft_runnable_core::Error::InvalidInput("no good".into()))
    });
    g.add_edge(START, "fail");
    g.compile().unwrap()
}

fn server() -> weft_server::ServerBuilder {
    builder().graph("chat", chat()).graph("boom", boom())
}

async fn rpc_raw(addr: SocketAddr, path: &str, body: &[u8], headers: &[(&str, &str)]) -> Reply {
    send(addr, "POST", path, Some(body), headers).await
}

async fn rpc(addr: SocketAddr, path: &str, body: Value) -> Reply {
    rpc_raw(addr, path, body.to_string().as_bytes(), &[JSON]).await
}

async fn mcp(addr: SocketAddr, id: u64, method: &str, params: Value) -> Value {
    let reply =
        rpc(addr, "/mcp", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!((&body["jsonrpc"], &body["id"]), (&json!("2.0"), &json!(id)), "{body}");
    body
}

async fn assistant_id(addr: SocketAddr, graph_id: &str) -> String {
    let found = common::post(addr, "/assistants/search", json!({"graph_id": graph_id})).await.json();
    found[0]["assistant_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn mcp_initializes_lists_assistants_as_tools_and_calls_them() {
    let server = start(server()).await;
    let addr = server.addr;
    let init = mcp(addr, 1, "initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}})).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(init["result"]["capabilities"], json!({"tools": {"listChanged": false}}));
    assert_eq!(init["result"]["serverInfo"]["name"], "LangGraph");
    let newer = mcp(addr, 2, "initialize", json!({"protocolVersion": "2099-01-01"})).await;
    assert_eq!(newer["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(mcp(addr, 3, "ping", json!({})).await["result"], json!({}));

    let listed = mcp(addr, 4, "tools/list", json!({})).await["result"].clone();
    assert!(listed.get("nextCursor").is_none(), "{listed}");
    let tools = listed["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["boom", "chat", "hitl", "simple", "slow"]);
    let simple = tools.iter().find(|t| t["name"] == "simple").unwrap();
    assert_eq!(simple["title"], "simple");
    assert_eq!(simple["description"], "Tool based on the simple assistant");
    assert_eq!(simple["inputSchema"]["type"], "object");
    let properties = simple["inputSchema"]["properties"].as_object().unwrap();
    assert!(properties.contains_key("items") && properties.contains_key("delay"), "{simple}");
    assert_eq!(simple["annotations"]["openWorldHint"], true);

    // A call is a stateless run of the assistant, its result as Python writes it.
    let called = mcp(addr, 5, "tools/call", json!({"name": "simple", "arguments": {"items": ["x"]}})).await;
    let result = &called["result"];
    assert!(result.get("isError").is_none(), "{called}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(result["content"][0]["type"], "text");
    assert!(text.starts_with("{'items': ['x', 'a', 'b']"), "{text}");
    let chat = mcp(
        addr,
        6,
        "tools/call",
        json!({"name": "chat", "arguments": {"messages": [{"role": "human", "content": "hi"}]}}),
    )
    .await;
    let text = chat["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("'content': 'echo: hi'"), "{text}");
    // A run that fails is a tool error, not a protocol error.
    let failed = mcp(addr, 7, "tools/call", json!({"name": "boom", "arguments": {}})).await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert!(!failed["result"]["content"][0]["text"].as_str().unwrap().is_empty());
    // No thread was kept by the calls.
    assert_eq!(common::post(addr, "/threads/count", json!({})).await.json(), json!(0));
}

#[tokio::test]
async fn mcp_answers_bad_messages_with_typed_errors() {
    let server = start(server()).await;
    let addr = server.addr;
    let error = |reply: &Reply| reply.json()["error"].clone();
    let bad_json = rpc_raw(addr, "/mcp", b"{nope", &[JSON]).await;
    assert_eq!((bad_json.status, error(&bad_json)), (400, json!("Invalid JSON")));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let no_accept = rpc_raw(addr, "/mcp", init.as_bytes(), &[("accept", "text/html")]).await;
    assert_eq!(no_accept.status, 400);
    assert!(error(&no_accept).as_str().unwrap().starts_with("Accept header must include"));
    for (body, text) in [
        (json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]), "Invalid message format."),
        (
            json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
            "Invalid JSON-RPC message. Missing or invalid jsonrpc version.",
        ),
    ] {
        let reply = rpc(addr, "/mcp", body).await;
        assert_eq!((reply.status, error(&reply)), (400, json!(text)));
    }
    let neither = rpc(addr, "/mcp", json!({"jsonrpc": "2.0"})).await;
    assert_eq!(neither.status, 400);
    // Notifications and responses are taken without an answer.
    for body in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 9, "result": {}}),
    ] {
        let reply = rpc(addr, "/mcp", body).await;
        assert_eq!((reply.status, reply.body.as_str()), (202, ""));
    }
    let codes = [
        ("resources/list", json!({}), -32601, "Method not found: resources/list"),
        ("tools/call", json!({"name": "nope"}), -32602, "Unknown tool: nope"),
        ("tools/call", json!({}), -32602, "Unknown tool: None"),
        ("tools/list", json!([1]), -32602, "Invalid params: must be an object"),
    ];
    for (i, (method, params, code, message)) in codes.into_iter().enumerate() {
        let answer = mcp(addr, i as u64, method, params).await;
        assert_eq!(answer["error"], json!({"code": code, "message": message}), "{method}");
    }
    // A run the API refuses is invalid params, with its reason; arguments the graph cannot take fail the run.
    let refused = mcp(addr, 20, "tools/call", json!({"name": "simple", "arguments": {}, "context": 5})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(!refused["error"]["message"].as_str().unwrap().is_empty());
    let failed = mcp(addr, 22, "tools/call", json!({"name": "simple", "arguments": 5})).await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let numeric = rpc(addr, "/mcp", json!({"jsonrpc": "2.0", "id": 21, "method": 7})).await.json();
    assert_eq!(numeric["error"]["code"], -32601);
    assert_eq!(send(addr, "GET", "/mcp", None, &[JSON]).await.status, 405);
    assert_eq!(send(addr, "DELETE", "/mcp", None, &[JSON]).await.status, 404);
}

#[tokio::test]
async fn mcp_and_a2a_need_credentials_when_the_server_has_them() {
    let server = start(server().api_keys([("key-alice", "alice")])).await;
    let addr = server.addr;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    assert_eq!(rpc_raw(addr, "/mcp", ping.as_bytes(), &[JSON]).await.status, 401);
    let keyed = rpc_raw(addr, "/mcp", ping.as_bytes(), &[JSON, ("x-api-key", "key-alice")]).await;
    assert_eq!(keyed.status, 200);
    let listed = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let tools = rpc_raw(addr, "/mcp", listed.as_bytes(), &[JSON, ("x-api-key", "key-alice")]).await.json();
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 5, "{tools}");
    let path = "/a2a/00000000-0000-0000-0000-000000000000";
    assert_eq!(rpc_raw(addr, path, ping.as_bytes(), &[JSON]).await.status, 401);
    assert_eq!(send(addr, "GET", "/.well-known/agent-card.json?assistant_id=x", None, &[]).await.status, 401);
}

fn send_message(id: u64, message: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "message/send", "params": {"message": message}})
}

fn user_text(text: &str, context_id: Option<&str>) -> Value {
    let mut message =
        json!({"role": "user", "messageId": format!("m-{text}"), "parts": [{"kind": "text", "text": text}]});
    if let Some(context_id) = context_id {
        message["contextId"] = json!(context_id);
    }
    message
}

#[tokio::test]
async fn a2a_message_send_runs_the_assistant_on_the_context_and_tasks_read_back() {
    let server = start(server()).await;
    let addr = server.addr;
    let chat = assistant_id(addr, "chat").await;
    let path = format!("/a2a/{chat}");
    let first = rpc(addr, &path, send_message(1, user_text("hello", None))).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let task = first.json()["result"].clone();
    assert_eq!(task["kind"], "task", "{task}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["artifacts"][0]["name"], "Assistant Response");
    assert_eq!(task["artifacts"][0]["parts"], json!([{"kind": "text", "text": "echo: hello"}]));
    let context_id = task["contextId"].as_str().unwrap().to_owned();
    let task_id = task["id"].as_str().unwrap().to_owned();
    assert!(task_id.starts_with(&format!("{context_id}:")), "{task_id}");
    let roles: Vec<&Value> = task["history"].as_array().unwrap().iter().map(|m| &m["role"]).collect();
    assert_eq!(roles, [&json!("user"), &json!("agent")]);
    assert_eq!(task["history"][0]["messageId"], "m-hello");

    // The same context is the same thread: the second turn sees the first.
    let second = rpc(addr, &path, send_message(2, user_text("again", Some(&context_id)))).await.json();
    let task2 = &second["result"];
    assert_eq!(task2["contextId"], context_id.as_str());
    assert_eq!(task2["history"].as_array().unwrap().len(), 4, "{second}");
    assert_eq!(task2["artifacts"][0]["parts"][0]["text"], "echo: again");
    let limited = json!({"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {
        "message": user_text("third", Some(&context_id)), "configuration": {"historyLength": 1}}});
    assert_eq!(rpc(addr, &path, limited).await.json()["result"]["history"].as_array().unwrap().len(), 1);

    let got = rpc(
        addr,
        &path,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": task_id}}),
    )
    .await
    .json();
    assert_eq!(got["result"]["id"], task_id.as_str(), "{got}");
    assert_eq!(got["result"]["status"]["state"], "completed");
    // The 1.0 method names answer in 1.0 form.
    let v1 =
        rpc(addr, &path, json!({"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": task_id}}))
            .await
            .json();
    assert_eq!(v1["result"]["status"]["state"], "TASK_STATE_COMPLETED", "{v1}");
    let missing = format!("{context_id}:00000000-0000-0000-0000-000000000000");
    let unknown = rpc(
        addr,
        &path,
        json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {"id": missing}}),
    )
    .await
    .json();
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");

    // Data parts are input fields: a graph without messages takes them.
    let simple = assistant_id(addr, "simple").await;
    let data =
        json!({"role": "user", "messageId": "d", "parts": [{"kind": "data", "data": {"items": ["x"]}}]});
    let ran = rpc(addr, &format!("/a2a/{simple}"), send_message(7, data)).await.json();
    assert_eq!(ran["result"]["status"]["state"], "completed", "{ran}");
    let text = ran["result"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("{'items': ['x', 'a', 'b']"), "{text}");

    // A run that stops at an interrupt is a task that needs input, read back as one.
    let hitl = assistant_id(addr, "hitl").await;
    let data = json!({"role": "user", "messageId": "h", "parts": [{"kind": "data", "data": {"items": []}}]});
    let paused = rpc(addr, &format!("/a2a/{hitl}"), send_message(8, data)).await.json();
    assert_eq!(paused["result"]["status"]["state"], "input-required", "{paused}");
    assert_eq!(paused["result"]["artifacts"][0]["name"], "Interrupt");
    assert_eq!(paused["result"]["artifacts"][0]["parts"][0]["data"]["value"], "approve?");
    let paused_id = paused["result"]["id"].clone();
    let get = json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": {"id": paused_id}});
    let read = rpc(addr, &format!("/a2a/{hitl}"), get.clone()).await.json();
    assert_eq!(read["result"]["status"]["state"], "input-required", "{read}");
    // Another assistant's task is not found.
    assert_eq!(rpc(addr, &path, get).await.json()["error"]["code"], -32001);

    // A message to the task resumes it with its data part's `resume`; then the task is done.
    let resume = json!({"role": "user", "messageId": "r", "taskId": paused_id,
        "parts": [{"kind": "data", "data": {"resume": "yes"}}]});
    let resumed = rpc(addr, &format!("/a2a/{hitl}"), send_message(10, resume.clone())).await.json();
    assert_eq!(resumed["result"]["id"], paused_id, "{resumed}");
    assert_eq!(resumed["result"]["status"]["state"], "completed", "{resumed}");
    let text = resumed["result"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains("'yes'"), "{text}");
    let again = rpc(addr, &format!("/a2a/{hitl}"), send_message(11, resume)).await.json();
    assert_eq!(again["error"]["code"], -32004, "{again}");
    let nowhere =
        json!({"role": "user", "messageId": "n", "taskId": "nope", "parts": [{"kind": "text", "text": "x"}]});
    assert_eq!(rpc(addr, &path, send_message(12, nowhere)).await.json()["error"]["code"], -32001);
}

#[tokio::test]
async fn a2a_answers_bad_messages_and_unknown_assistants_with_typed_errors() {
    let server = start(server()).await;
    let addr = server.addr;
    let chat = assistant_id(addr, "chat").await;
    let simple = assistant_id(addr, "simple").await;
    let path = format!("/a2a/{chat}");
    let code = |reply: &Reply| {
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()["error"]["code"].clone()
    };
    assert_eq!(code(&rpc_raw(addr, &path, b"{nope", &[JSON]).await), -32700);
    assert_eq!(code(&rpc(addr, &path, json!([1])).await), -32600);
    assert_eq!(
        code(&rpc(addr, &path, json!({"jsonrpc": "1.0", "id": 1, "method": "message/send"})).await),
        -32600
    );
    assert_eq!(
        code(&rpc(addr, &path, json!({"jsonrpc": "2.0", "id": {}, "method": "message/send"})).await),
        -32600
    );
    assert_eq!(code(&rpc(addr, &path, json!({"jsonrpc": "2.0", "id": 1, "method": "nope"})).await), -32601);
    assert_eq!(
        code(
            &rpc(addr, &path, json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}))
                .await
        ),
        -32602
    );
    let no_id = json!({"role": "user", "parts": [{"kind": "text", "text": "x"}]});
    assert_eq!(code(&rpc(addr, &path, send_message(1, no_id)).await), -32602);
    let two_kinds = json!({"role": "user", "messageId": "m", "parts": [{"text": "x", "data": {}}]});
    assert_eq!(code(&rpc(addr, &path, send_message(1, two_kinds)).await), -32005);
    let bad_length = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": user_text("x", None), "configuration": {"historyLength": 11}}});
    assert_eq!(code(&rpc(addr, &path, bad_length).await), -32602);
    // Text needs a graph that takes messages.
    let refused = rpc(addr, &format!("/a2a/{simple}"), send_message(1, user_text("x", None))).await;
    assert_eq!(code(&refused), -32602);
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not support A2A conversational messages")
    );
    let unknown = "00000000-0000-0000-0000-000000000000";
    let missing = rpc(addr, &format!("/a2a/{unknown}"), send_message(1, user_text("x", None))).await;
    assert_eq!(
        missing.json()["error"],
        json!({"code": -32602, "message": format!("Assistant '{unknown}' not found")})
    );
    let not_uuid = rpc(addr, "/a2a/chat", send_message(1, user_text("x", None))).await;
    assert_eq!(not_uuid.json()["error"]["message"], "Invalid assistant ID: must be a UUID");
    // Streaming is not served: an error, never a hang.
    let stream = json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": user_text("x", None)}});
    let streamed =
        rpc_raw(addr, &path, stream.to_string().as_bytes(), &[("accept", "text/event-stream")]).await;
    assert_eq!(code(&streamed), -32004);
    let plain = rpc_raw(
        addr,
        &path,
        send_message(1, user_text("x", None)).to_string().as_bytes(),
        &[("accept", "text/html")],
    )
    .await;
    assert_eq!(plain.status, 400);
    assert_eq!(send(addr, "DELETE", &path, None, &[]).await.status, 405);
}

#[tokio::test]
async fn agent_cards_describe_each_assistant() {
    let server = start(server()).await;
    let addr = server.addr;
    let chat = assistant_id(addr, "chat").await;
    for path in [
        format!("/a2a/{chat}/.well-known/agent-card.json"),
        format!("/a2a/{chat}"),
        format!("/.well-known/agent-card.json?assistant_id={chat}"),
    ] {
        let reply = send(addr, "GET", &path, None, &[]).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        let card = reply.json();
        assert_eq!(card["name"], "chat");
        assert_eq!(card["url"], format!("http://{addr}/a2a/{chat}"));
        assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(card["defaultInputModes"], json!(["application/json", "text/plain"]));
        assert_eq!(card["skills"][0]["id"], format!("{chat}-main"));
        assert_eq!(card["skills"][0]["metadata"]["inputSchema"]["supportsA2A"], true);
    }
    let no_id = send(addr, "GET", "/.well-known/agent-card.json", None, &[]).await;
    assert_eq!((no_id.status, no_id.json()["error"]["code"].clone()), (400, json!(-32602)));
    let unknown =
        send(addr, "GET", "/a2a/00000000-0000-0000-0000-000000000000/.well-known/agent.json", None, &[])
            .await;
    assert_eq!(unknown.status, 400);
    // The assistant's metadata may name its modes; bad ones are a 400, never a 5xx.
    let made = common::post(
        addr,
        "/assistants",
        json!({"graph_id": "chat", "metadata": {"a2a": {"input_modes": ["text/plain"]}}}),
    )
    .await
    .json();
    let id = made["assistant_id"].as_str().unwrap();
    let card = send(addr, "GET", &format!("/a2a/{id}"), None, &[]).await.json();
    assert_eq!(card["defaultInputModes"], json!(["text/plain"]));
    let bad = common::post(
        addr,
        "/assistants",
        json!({"graph_id": "chat", "metadata": {"a2a": {"output_modes": []}}}),
    )
    .await
    .json();
    let bad_card =
        send(addr, "GET", &format!("/a2a/{}", bad["assistant_id"].as_str().unwrap()), None, &[]).await;
    assert_eq!(bad_card.status, 400);
}

/// Users by bearer token, each of a team that sees only its own records (and the graphs' assistants);
/// `reader` may not write.
#[derive(Debug)]
struct Teams;

#[async_trait]
impl Auth for Teams {
    async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<User, AuthError> {
        match request.bearer_token() {
            Some(token @ ("red" | "blue" | "reader")) => {
                let team = if token == "blue" { "blue" } else { "red" };
                Ok(User::new(token).with_field("team", json!(team)))
            }
            _ => Err(AuthError::unauthorized("who are you?")),
        }
    }

    async fn authorize(&self, ctx: &AuthContext<'_>, value: &mut Value) -> Result<Option<Filter>, AuthError> {
        let reads = matches!(ctx.action, Action::Read | Action::Search | Action::Get);
        if !reads && ctx.user.identity() == "reader" {
            return Err(AuthError::forbidden("Forbidden"));
        }
        let team = ctx.user.field("team").cloned().unwrap_or(Value::Null);
        if matches!(ctx.action, Action::Create | Action::CreateRun) {
            value["metadata"] = json!({"team": team});
        }
        Ok(Some(Filter::from_json(json!({"$or": [{"team": team}, {"created_by": "system"}]}))?))
    }
}

#[tokio::test]
async fn an_auth_hooks_filters_and_refusals_apply_to_tools_and_agents() {
    let server = start(server().auth(Teams)).await;
    let addr = server.addr;
    let red = [JSON, ("authorization", "Bearer red")];
    let blue = [JSON, ("authorization", "Bearer blue")];
    let reader = [JSON, ("authorization", "Bearer reader")];
    let made =
        send(addr, "POST", "/assistants", Some(br#"{"graph_id": "chat", "name": "red team chat"}"#), &red)
            .await;
    let red_id = made.json()["assistant_id"].as_str().unwrap().to_owned();
    let call = |id: u64, method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    };
    let names = |reply: Reply| -> Vec<String> {
        let tools = reply.json()["result"]["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    let list = call(1, "tools/list", json!({}));
    assert!(names(rpc_raw(addr, "/mcp", list.as_bytes(), &red).await).contains(&"red_team_chat".to_owned()));
    let blue_tools = names(rpc_raw(addr, "/mcp", list.as_bytes(), &blue).await);
    assert!(!blue_tools.contains(&"red_team_chat".to_owned()) && blue_tools.contains(&"chat".to_owned()));
    let use_it = call(2, "tools/call", json!({"name": "red_team_chat", "arguments": {"messages": []}}));
    let refused = rpc_raw(addr, "/mcp", use_it.as_bytes(), &blue).await.json();
    assert_eq!(refused["error"]["message"], "Unknown tool: red_team_chat", "{refused}");
    let used = rpc_raw(addr, "/mcp", use_it.as_bytes(), &red).await.json();
    assert!(used["result"]["content"][0]["text"].as_str().unwrap().contains("echo: "), "{used}");
    // A user who may not start runs gets the refusal as a JSON-RPC error, never a 5xx.
    let forbidden =
        rpc_raw(addr, "/mcp", call(3, "tools/call", json!({"name": "chat"})).as_bytes(), &reader).await;
    assert_eq!(
        (forbidden.status, forbidden.json()["error"]["code"].clone()),
        (200, json!(-32602)),
        "{}",
        forbidden.body
    );

    let a2a = format!("/a2a/{red_id}");
    let message = send_message(4, user_text("hi", None)).to_string();
    let theirs = rpc_raw(addr, &a2a, message.as_bytes(), &blue).await.json();
    assert_eq!(theirs["error"]["message"], format!("Assistant '{red_id}' not found"), "{theirs}");
    let ours = rpc_raw(addr, &a2a, message.as_bytes(), &red).await.json();
    assert_eq!(ours["result"]["status"]["state"], "completed", "{ours}");
    let card = send(addr, "GET", &format!("/a2a/{red_id}/.well-known/agent-card.json"), None, &blue).await;
    assert_eq!(card.status, 400);
    assert_eq!(
        send(addr, "GET", &format!("/a2a/{red_id}/.well-known/agent-card.json"), None, &red).await.status,
        200
    );
}
