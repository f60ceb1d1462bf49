//! The MCP client against the protocol's reference server, `@modelcontextprotocol/server-everything`
//! (pinned in `tests/mcp/node`), over stdio and Streamable HTTP: tools of every kind, progress, errors,
//! prompts, resources, timeouts and a server killed mid-call. See `mcp_common` for how it is found.

#![cfg(feature = "mcp")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod mcp_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_common::{HttpServer, everything, kill9, stdio, wait_gone};
use serde_json::{Value, json};
use weft_integrations::mcp::{
    Connection, McpError, McpSession, MultiServerMcpClient, Progress, ResourceData,
};
use weft_runnable_core::{Content, Error, Runnable, RunnableConfig, Tool, ToolCall, ToolOutput, ToolStatus};

async fn session(script: &std::path::Path) -> McpSession {
    McpSession::connect("everything", &stdio(script)).await.unwrap()
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall { name: name.into(), args, id: Some("call_1".into()) }
}

async fn tool(session: &McpSession, name: &str) -> weft_integrations::mcp::McpTool {
    session.tools().await.unwrap().into_iter().find(|t| Tool::name(t) == name).unwrap()
}

#[tokio::test]
async fn lists_the_reference_tools_with_their_schemas() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let tools = session.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in
        ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation", "get-structured-content"]
    {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let echo = tool(&session, "echo").await;
    assert_eq!(echo.description(), "Echoes back the input string");
    assert_eq!(echo.args_schema()["required"], json!(["message"]));
    assert_eq!(echo.args_schema()["properties"]["message"]["type"], "string");
    assert_eq!(echo.spec().name, "echo");
    let info = session.server_info().unwrap();
    assert!(info["serverInfo"]["name"].as_str().unwrap().contains("everything"), "{info}");
    session.close().await;
}

#[tokio::test]
async fn echo_and_sum_answer_as_tool_messages() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let echo = tool(&session, "echo").await;
    let message =
        echo.invoke(call("echo", json!({"message": "hi"})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(
        (message.content.text().as_str(), message.tool_call_id.as_str(), message.status),
        ("Echo: hi", "call_1", ToolStatus::Success)
    );
    let sum = tool(&session, "get-sum").await;
    let message =
        sum.invoke(call("get-sum", json!({"a": 2, "b": 3.5})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "The sum of 2 and 3.5 is 5.5.");
    session.close().await;
}

#[tokio::test]
async fn arguments_that_break_the_schema_never_reach_the_server() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let sum = tool(&session, "get-sum").await;
    let err = sum.invoke(call("get-sum", json!({"a": "two"})), &RunnableConfig::default()).await.unwrap_err();
    let Error::ToolArguments { tool, errors, .. } = err else {
        panic!("expected an argument error, got {err:?}")
    };
    assert_eq!(tool, "get-sum");
    assert!(errors.iter().any(|e| e.starts_with("b: missing required field")), "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with("a: expected number")), "{errors:?}");
    session.close().await;
}

#[tokio::test]
async fn an_is_error_result_is_a_typed_failure_and_an_error_message_for_the_model() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    // Sent as is (no validation at this level): the server's own validation fails the call.
    let raw = session.call_tool_raw("get-sum", json!({"a": "two", "b": 1}), None).await.unwrap();
    assert_eq!(raw["isError"], json!(true), "{raw}");
    let err = session.call_tool("get-sum", json!({"a": "two", "b": 1}), None).await.unwrap_err();
    let McpError::ToolFailed { server, tool, message } = &err else { panic!("{err:?}") };
    assert_eq!((server.as_str(), tool.as_str()), ("everything", "get-sum"));
    assert!(message.contains("number"), "{message}");
    // An unknown tool: the server's error becomes the model's error message through McpTool.
    let err = session.call_tool("no-such-tool", json!({}), None).await.unwrap_err();
    assert!(err.to_string().contains("no-such-tool"), "{err}");
    session.close().await;
}

#[tokio::test]
async fn an_image_comes_back_as_an_image_block() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let image = tool(&session, "get-tiny-image").await;
    let message = image.invoke(call("get-tiny-image", json!({})), &RunnableConfig::default()).await.unwrap();
    let Content::Blocks(blocks) = &message.content else {
        panic!("expected blocks, got {:?}", message.content)
    };
    let png = blocks.iter().find(|b| b["type"] == "image").expect("an image block");
    assert_eq!(png["mime_type"], "image/png");
    assert!(png["base64"].as_str().unwrap().starts_with("iVBORw0KGgo"), "a base64 PNG");
    assert!(blocks.iter().any(|b| b["type"] == "text"), "{blocks:?}");
    session.close().await;
}

#[tokio::test]
async fn structured_content_is_kept_as_the_artifact() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let weather = tool(&session, "get-structured-content").await;
    let message = weather
        .invoke(call("get-structured-content", json!({"location": "New York"})), &RunnableConfig::default())
        .await
        .unwrap();
    let structured = &message.artifact.as_ref().expect("an artifact")["structured_content"];
    assert!(structured["temperature"].is_number(), "{structured}");
    assert!(!message.content.text().is_empty());
    session.close().await;
}

#[tokio::test]
async fn a_long_running_tool_reports_its_progress() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let log = Arc::clone(&seen);
    let long = tool(&session, "trigger-long-running-operation").await.on_progress(move |tool, p| {
        assert_eq!(tool, "trigger-long-running-operation");
        log.lock().unwrap().push(p.clone());
    });
    let message = long
        .invoke(
            call("trigger-long-running-operation", json!({"duration": 0.5, "steps": 5})),
            &RunnableConfig::default(),
        )
        .await
        .unwrap();
    assert!(message.content.text().starts_with("Long running operation completed"), "{:?}", message.content);
    let steps: Vec<(f64, Option<f64>)> = seen.lock().unwrap().iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(steps, (1..=5).map(|i| (f64::from(i), Some(5.0))).collect::<Vec<_>>());
    session.close().await;
}

#[tokio::test]
async fn prompts_are_listed_and_rendered_as_messages() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let prompts = session.list_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(names.contains(&"simple-prompt"), "{names:?}");
    let args = prompts.iter().find(|p| p.name == "args-prompt").expect("args-prompt");
    let city = args.arguments.iter().find(|a| a.name == "city").expect("a city argument");
    assert!(city.required);
    let simple = session.get_prompt("simple-prompt", BTreeMap::new()).await.unwrap();
    assert_eq!(simple.len(), 1);
    assert!(matches!(simple[0], weft_runnable_core::Message::Human(_)), "{simple:?}");
    assert!(!simple[0].text().is_empty());
    let with_args = session
        .get_prompt("args-prompt", BTreeMap::from([("city".to_owned(), "Lisbon".to_owned())]))
        .await
        .unwrap();
    assert!(with_args[0].text().contains("Lisbon"), "{with_args:?}");
    let missing = session.get_prompt("args-prompt", BTreeMap::new()).await.unwrap_err();
    assert!(matches!(missing, McpError::Protocol { .. }), "{missing:?}");
    session.close().await;
}

#[tokio::test]
async fn resources_are_listed_and_read() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let resources = session.list_resources().await.unwrap();
    assert!(!resources.is_empty());
    let first = &resources[0];
    let contents = session.read_resource(&first.uri).await.unwrap();
    assert_eq!(contents[0].uri, first.uri);
    match &contents[0].data {
        ResourceData::Text(text) => assert!(!text.is_empty()),
        ResourceData::Blob(blob) => assert!(!blob.is_empty()),
    }
    let client = MultiServerMcpClient::from_sessions([session.clone()]);
    let all = client.get_resources("everything", None).await.unwrap();
    assert!(all.len() >= resources.len());
    let err = session.read_resource("nothing://here").await.unwrap_err();
    assert!(matches!(err, McpError::Protocol { .. }), "{err:?}");
    session.close().await;
}

#[tokio::test]
async fn the_streamable_http_transport_lists_and_calls_tools_with_progress() {
    let Some(script) = everything() else { return };
    let server = HttpServer::start(&script);
    let session = McpSession::connect("http", &Connection::http(&server.url)).await.unwrap();
    assert_eq!(session.pid(), None);
    let echo = tool(&session, "echo").await;
    let message =
        echo.invoke(call("echo", json!({"message": "over http"})), &RunnableConfig::default()).await.unwrap();
    assert_eq!(message.content.text(), "Echo: over http");
    let seen: Arc<Mutex<Vec<f64>>> = Arc::default();
    let log = Arc::clone(&seen);
    let report = move |p: Progress| log.lock().unwrap().push(p.progress);
    let output = session
        .call_tool("trigger-long-running-operation", json!({"duration": 0.3, "steps": 3}), Some(&report))
        .await
        .unwrap();
    assert!(matches!(output, ToolOutput::Text(ref t) if t.starts_with("Long running operation completed")));
    assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0]);
    assert!(!session.list_prompts().await.unwrap().is_empty());
    session.close().await;
}

#[tokio::test]
async fn several_servers_at_once_with_prefixed_tool_names() {
    let Some(script) = everything() else { return };
    let http = HttpServer::start(&script);
    let client =
        MultiServerMcpClient::connect([("local", stdio(&script)), ("remote", Connection::http(&http.url))])
            .await
            .unwrap();
    assert_eq!(client.servers().collect::<Vec<_>>(), ["local", "remote"]);
    let clash = client.tools().await.unwrap_err();
    assert!(clash.to_string().contains("both have a tool named"), "{clash}");
    let client = client.with_tool_name_prefix(true);
    let tools = client.get_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| Tool::name(t.as_ref())).collect();
    assert!(names.contains(&"local_echo") && names.contains(&"remote_echo"), "{names:?}");
    let remote_echo = tools.iter().find(|t| Tool::name(t.as_ref()) == "remote_echo").unwrap();
    let message = remote_echo
        .invoke(call("remote_echo", json!({"message": "x"})), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(message.content.text(), "Echo: x");
    let unknown = client.session("nope").unwrap_err();
    assert_eq!(unknown.to_string(), "no mcp server named 'nope' (servers: [\"local\", \"remote\"])");
    client.close().await;
}

#[tokio::test]
async fn one_unreachable_server_fails_the_connection_and_names_it() {
    let Some(script) = everything() else { return };
    let err = MultiServerMcpClient::connect([
        ("good", stdio(&script)),
        ("missing", Connection::stdio("/nonexistent/mcp-server", Vec::<String>::new())),
    ])
    .await
    .unwrap_err();
    assert!(matches!(&err, McpError::Spawn { server, .. } if server == "missing"), "{err:?}");
    let refused = McpSession::connect(
        "down",
        &Connection::http("http://127.0.0.1:9/mcp").connect_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap_err();
    assert!(matches!(&refused, McpError::Connect { server, .. } if server == "down"), "{refused:?}");
}

#[tokio::test]
async fn a_call_past_its_timeout_is_cancelled_with_a_timeout_error() {
    let Some(script) = everything() else { return };
    let session =
        McpSession::connect("slow", &stdio(&script).timeout(Duration::from_millis(400))).await.unwrap();
    let started = Instant::now();
    let err = session
        .call_tool("trigger-long-running-operation", json!({"duration": 5, "steps": 5}), None)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    let McpError::Timeout { operation, timeout, .. } = &err else { panic!("{err:?}") };
    assert_eq!(
        (operation.as_str(), *timeout),
        ("tools/call 'trigger-long-running-operation'", Duration::from_millis(400))
    );
    // The session still works after a timed-out call.
    let echo = session.call_tool("echo", json!({"message": "still here"}), None).await.unwrap();
    assert!(matches!(echo, ToolOutput::Text(ref t) if t == "Echo: still here"));
    session.close().await;
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_at_once_and_leaves_no_zombie() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let pid = session.pid().unwrap();
    let long = tool(&session, "trigger-long-running-operation").await;
    let (first_progress, progressed) = tokio::sync::oneshot::channel::<()>();
    let first_progress = Mutex::new(Some(first_progress));
    let long = long.on_progress(move |_, _| {
        if let Some(tx) = first_progress.lock().unwrap().take() {
            let _ = tx.send(());
        }
    });
    let started = Instant::now();
    let killer = tokio::spawn(async move {
        progressed.await.unwrap();
        kill9(pid);
    });
    // The default policy: the agent gets an error message, the run goes on.
    let message = long
        .invoke(
            call("trigger-long-running-operation", json!({"duration": 30, "steps": 60})),
            &RunnableConfig::default(),
        )
        .await
        .unwrap();
    killer.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(message.status, ToolStatus::Error);
    let text = message.content.text();
    assert!(
        text.starts_with(
            "mcp server 'everything' closed the connection during tools/call 'trigger-long-running-operation'"
        ),
        "{text}"
    );
    assert!(text.contains("killed by signal 9"), "{text}");
    // Later calls fail the same way, at once.
    let err = session.call_tool("echo", json!({"message": "x"}), None).await.unwrap_err();
    assert!(err.is_connection_lost(), "{err:?}");
    drop(long);
    drop(session);
    assert!(wait_gone(pid, Duration::from_secs(5)), "process {pid} is still there (a zombie?)");
}

#[tokio::test]
async fn dropping_a_session_kills_and_reaps_its_server() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let pid = session.pid().unwrap();
    let tools = session.tools().await.unwrap();
    drop(session);
    assert!(!mcp_common::is_gone(pid), "the tools still hold the session");
    drop(tools);
    assert!(wait_gone(pid, Duration::from_secs(5)), "process {pid} was not reaped");
}

#[tokio::test]
async fn closing_a_session_ends_its_server_gracefully() {
    let Some(script) = everything() else { return };
    let session = session(&script).await;
    let pid = session.pid().unwrap();
    session.close().await;
    assert!(mcp_common::is_gone(pid), "close reaps the process before returning");
    let err = session.list_tools().await.unwrap_err();
    assert!(err.is_connection_lost(), "{err:?}");
}
