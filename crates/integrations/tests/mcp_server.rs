//! weft tools and graphs served over MCP, checked with weft's own client (in-process over a pipe, and over
//! Streamable HTTP on a local port). The official Python client checks the same server in `cargo xtask ci
//! mcp`.

#![cfg(feature = "mcp")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::Duration;

use serde_json::{Value, json};
use weft_graph::{ChannelKind, JsonState, JsonUpdate, START, StateGraph};
use weft_integrations::mcp::{Connection, GraphTool, McpError, McpServer, McpSession, Timeouts};
use weft_runnable_core::{Error, StructuredTool, Tool, ToolErrorPolicy, ToolExt as _, ToolOutput};

fn add() -> StructuredTool {
    StructuredTool::from_fn(
        "add",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        |args, _| async move { Ok(json!(args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0))) },
    )
}

fn fail() -> StructuredTool {
    StructuredTool::from_fn(
        "fail",
        "Always fails.",
        json!({"type": "object", "properties": {}}),
        |_, _| async move { Err::<Value, _>(Error::msg("the disk is full")) },
    )
}

fn counter() -> std::sync::Arc<dyn weft_graph::erased::ErasedGraph> {
    let state = JsonState::builder().channel("count", ChannelKind::LastValue).build();
    let mut graph = StateGraph::with_initial(state);
    graph.add_node("inc", |s: &JsonState| {
        let count = s.get("count").and_then(Value::as_i64).unwrap_or(0);
        JsonUpdate::new().write("count", json!(count + 1))
    });
    graph.add_edge(START, "inc");
    graph.compile().unwrap().erase()
}

fn server() -> McpServer {
    McpServer::new("weft-test")
        .with_tool(add().shared())
        .with_tool(fail().shared())
        .with_graph("count", "Counts one up.", counter())
        .with_instructions("Use add for sums.")
}

async fn connected() -> McpSession {
    let (client, served) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(served);
    tokio::spawn(server().serve_io(server_read, server_write));
    let (read, write) = tokio::io::split(client);
    McpSession::connect_io("weft", read, write, Timeouts::default()).await.unwrap()
}

#[tokio::test]
async fn the_served_tools_are_listed_with_their_schemas_and_the_server_introduces_itself() {
    let session = connected().await;
    let tools = session.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "count", "fail"]);
    assert_eq!(tools[0].description.as_deref(), Some("Adds two numbers."));
    assert_eq!(tools[0].input_schema["required"], json!(["a", "b"]));
    assert!(tools[1].input_schema["properties"].get("count").is_some(), "{}", tools[1].input_schema);
    let info = session.server_info().unwrap();
    assert_eq!(info["serverInfo"]["name"], "weft-test");
    assert_eq!(info["instructions"], "Use add for sums.");
}

#[tokio::test]
async fn calls_answer_with_content_and_failures_with_is_error() {
    let session = connected().await;
    let sum = session.call_tool_raw("add", json!({"a": 2, "b": 3}), None).await.unwrap();
    assert_eq!(sum["content"], json!([{"type": "text", "text": "5.0"}]));
    assert_eq!(sum["isError"], json!(false));
    let bad = session.call_tool_raw("add", json!({"a": "two"}), None).await.unwrap();
    assert_eq!(bad["isError"], json!(true));
    let text = bad["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("invalid arguments for tool 'add': "), "{text}");
    assert!(text.contains("b: missing required field"), "{text}");
    let failed = session.call_tool("fail", json!({}), None).await.unwrap_err();
    let McpError::ToolFailed { message, .. } = &failed else { panic!("{failed:?}") };
    assert!(message.contains("the disk is full"), "{message}");
    let unknown = session.call_tool_raw("nope", json!({}), None).await.unwrap_err();
    let McpError::Protocol { message, code, .. } = &unknown else { panic!("{unknown:?}") };
    assert_eq!(*code, Some(-32602));
    assert!(message.starts_with("unknown tool 'nope'"), "{message}");
}

#[tokio::test]
async fn a_tool_whose_error_policy_answers_reports_an_error_result() {
    let (client, served) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(served);
    let polite = fail().with_error_policy(ToolErrorPolicy::text("try later"));
    tokio::spawn(McpServer::new("s").with_tool(polite.shared()).serve_io(server_read, server_write));
    let (read, write) = tokio::io::split(client);
    let session = McpSession::connect_io("s", read, write, Timeouts::default()).await.unwrap();
    let result = session.call_tool_raw("fail", json!({}), None).await.unwrap();
    assert_eq!(result, json!({"content": [{"type": "text", "text": "try later"}], "isError": true}));
}

#[tokio::test]
async fn a_graph_is_served_as_a_tool_whose_structured_content_is_the_final_state() {
    let session = connected().await;
    let result = session.call_tool_raw("count", json!({"count": 41}), None).await.unwrap();
    assert_eq!(result["structuredContent"], json!({"count": 42}));
    assert_eq!(result["content"][0]["text"], r#"{"count":42}"#);
}

#[tokio::test]
async fn a_graph_tool_with_its_own_schema_rejects_arguments_that_break_it() {
    let (client, served) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(served);
    let strict = GraphTool::new("count", "Counts.", counter()).with_args_schema(json!({
        "type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]
    }));
    tokio::spawn(McpServer::new("s").with_tool(strict.shared()).serve_io(server_read, server_write));
    let (read, write) = tokio::io::split(client);
    let session = McpSession::connect_io("s", read, write, Timeouts::default()).await.unwrap();
    let bad = session.call_tool_raw("count", json!({"count": "x"}), None).await.unwrap();
    assert_eq!(bad["isError"], json!(true), "{bad}");
    let good = session.call_tool_raw("count", json!({"count": 1}), None).await.unwrap();
    assert_eq!(good["structuredContent"], json!({"count": 2}));
}

#[tokio::test]
async fn a_graph_tool_runs_in_process_too() {
    let tool = GraphTool::new("count", "Counts.", counter());
    let out = tool.call(json!({"count": 1}), &Default::default()).await.unwrap();
    let ToolOutput::ContentAndArtifact { content, artifact } = out else { panic!("{out:?}") };
    assert_eq!((content.text(), artifact), (r#"{"count":2}"#.to_owned(), json!({"count": 2})));
}

#[tokio::test]
async fn the_streamable_http_endpoint_serves_the_same_tools() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = tokio::spawn(server().serve_http(listener));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let session = McpSession::connect("weft-http", &Connection::http(&url).timeout(Duration::from_secs(10)))
        .await
        .unwrap();
    let tools = session.tools().await.unwrap();
    assert_eq!(tools.len(), 3);
    let sum = session.call_tool("add", json!({"a": 1, "b": 1}), None).await.unwrap();
    assert!(matches!(sum, ToolOutput::Text(ref t) if t == "2.0"), "{sum:?}");
    let add = tools.iter().find(|t| Tool::name(*t) == "add").unwrap();
    assert_eq!(add.definition().input_schema["required"], json!(["a", "b"]));
    session.close().await;
    serving.abort();
}
