//! A ReAct agent on the scripted chat model calls tools of the MCP reference server
//! (`@modelcontextprotocol/server-everything`, whose entry script `WEFT_MCP_EVERYTHING` names; `cargo
//! xtask ci mcp` installs it and prints the path). Without it the tests fail in CI and skip loudly
//! elsewhere.

#![cfg(feature = "mcp")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;

use futures::StreamExt as _;
use serde_json::json;
use weft::fakes::{FakeChatModel, FakeReply};
use weft::graph::StreamData;
use weft::mcp::{Connection, MultiServerMcpClient};
use weft::prelude::*;
use weft::{ToolCall, ToolStatus};

fn everything() -> Option<PathBuf> {
    match std::env::var_os("WEFT_MCP_EVERYTHING").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        _ => {
            weft_testenv::skip_or_fail(
                "the MCP reference server (@modelcontextprotocol/server-everything)",
                "WEFT_MCP_EVERYTHING does not name it",
                "run `cargo xtask ci mcp` and export the WEFT_MCP_EVERYTHING it prints",
            );
            None
        }
    }
}

fn call(name: &str, args: serde_json::Value, id: &str) -> ToolCall {
    ToolCall { name: name.into(), args, id: Some(id.into()) }
}

async fn client(script: &std::path::Path) -> MultiServerMcpClient {
    let server = Connection::stdio("node", [script.display().to_string(), "stdio".to_owned()]);
    MultiServerMcpClient::connect([("everything", server)]).await.unwrap()
}

#[tokio::test]
async fn a_react_agent_calls_mcp_tools_and_answers_with_their_results() {
    let Some(script) = everything() else { return };
    let client = client(&script).await;
    let model = FakeChatModel::new([
        FakeReply::tool_calls([
            call("echo", json!({"message": "hello from weft"}), "c1"),
            call("get-sum", json!({"a": 20, "b": 22}), "c2"),
        ]),
        "The sum is 42.".into(),
    ]);
    let app = create_react_agent(model.clone(), client.get_tools().await.unwrap()).build().unwrap();
    let out = app
        .invoke(AgentState::update().messages(vec![Message::human("echo and add")]), &Default::default())
        .await
        .unwrap();
    let messages = &out.value.messages;
    let tools: Vec<(String, ToolStatus)> =
        messages.iter().filter_map(|m| m.as_tool()).map(|t| (t.content.text(), t.status)).collect();
    assert_eq!(
        tools,
        [
            ("Echo: hello from weft".to_owned(), ToolStatus::Success),
            ("The sum of 20 and 22 is 42.".to_owned(), ToolStatus::Success)
        ]
    );
    assert_eq!(messages.last().unwrap().text(), "The sum is 42.");
    // The model was offered the server's tools with their schemas.
    let offered = model.calls();
    let specs = &offered[0].options.tools;
    let echo = specs.iter().find(|s| s.name == "echo").expect("echo offered to the model");
    assert_eq!(echo.parameters["required"], json!(["message"]));
    client.close().await;
}

#[tokio::test]
async fn progress_of_an_mcp_tool_reaches_the_custom_stream_and_failures_reach_the_model() {
    let Some(script) = everything() else { return };
    let client = client(&script).await;
    let model = FakeChatModel::new([
        FakeReply::tool_calls([call(
            "trigger-long-running-operation",
            json!({"duration": 0.3, "steps": 3}),
            "c1",
        )]),
        FakeReply::tool_calls([call("get-sum", json!({"a": 1}), "c2")]),
        "done".into(),
    ]);
    let app = create_react_agent(model, client.get_tools().await.unwrap()).build().unwrap();
    let input = AgentState::update().messages(vec![Message::human("go")]);
    let mut stream = app.stream(input, &Default::default(), &[StreamMode::Custom, StreamMode::Values]);
    let mut progress = Vec::new();
    let mut last = None;
    while let Some(part) = stream.next().await {
        match part.unwrap().data {
            StreamData::Custom { node, value } => {
                assert_eq!(node, "tools");
                progress.push(value);
            }
            StreamData::Values { state, .. } => last = Some(state),
            _ => {}
        }
    }
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert_eq!(
        progress[2],
        json!({
            "type": "mcp_progress", "server": "everything", "tool": "trigger-long-running-operation",
            "tool_call_id": "c1", "progress": 3.0, "total": 3.0, "message": null
        })
    );
    let messages = last.unwrap().messages;
    let bad = messages.iter().filter_map(|m| m.as_tool()).find(|t| t.tool_call_id == "c2").unwrap();
    assert_eq!(bad.status, ToolStatus::Error, "invalid arguments go back to the model");
    assert!(bad.content.text().contains("b: missing required field"), "{}", bad.content.text());
    client.close().await;
}
