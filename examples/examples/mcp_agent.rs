//! An agent using tools from MCP servers, and weft tools and graphs served over MCP.
//!
//! The program plays both parts. Run plainly, it starts itself again as an MCP server over stdio (with
//! `--serve-stdio`), connects to it with `MultiServerMcpClient` (and also to the MCP reference server
//! when `WEFT_MCP_EVERYTHING` names its `dist/index.js`), and hands the servers' tools to a ReAct agent.
//! The agent's model is weft's scripted chat model, so no API key or network is needed; every result is
//! checked, and a wrong one makes the exit status non-zero. With `--live`, the model is `ChatOpenAI` at
//! `OPENAI_BASE_URL` (see `weft_examples::Models`; `cargo xtask fakellm serve` serves rules that follow the
//! script), and the agent's results are then reported rather than checked.
//!
//! - `cargo run --example mcp_agent --features mcp`: the agent (`-- --live`: on a live model).
//! - `cargo run --example mcp_agent --features mcp -- --serve-stdio`: the weft MCP server alone, over stdin and stdout
//!   (what an MCP host such as Claude Desktop starts).
//! - `cargo run --example mcp_agent --features mcp -- --serve-http 127.0.0.1:8000`: the same over Streamable HTTP, at
//!   `http://127.0.0.1:8000/mcp`.

use std::collections::BTreeMap;

use serde_json::json;
use weft::fakes::FakeReply;
use weft::mcp::{Connection, McpServer, MultiServerMcpClient};
use weft::prelude::*;
use weft::{ToolCall, ToolOutput, ToolStatus};

/// The weather forecast of a city (a stand-in for a real service).
#[tool]
fn get_forecast(
    /// The city.
    city: String,
) -> weft::Result<String> {
    match city.as_str() {
        "Lisbon" => Ok("sunny, 24°C".to_owned()),
        "Oslo" => Ok("snow, -3°C".to_owned()),
        other => Err(Error::msg(format!("no forecast for {other}"))),
    }
}

/// Adds two numbers.
#[tool]
fn add(
    /// The first number.
    a: f64,
    /// The second number.
    b: f64,
) -> f64 {
    a + b
}

/// A small weft graph served as an MCP tool: it answers the last message in capitals.
fn shout_graph() -> weft::Result<std::sync::Arc<dyn weft::graph::erased::ErasedGraph>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("shout", |state: &MessagesState| {
        let last = state.messages.last().map(Message::text).unwrap_or_default();
        MessagesState::update().messages(vec![Message::ai(last.to_uppercase())])
    });
    graph.add_edge(START, "shout");
    Ok(graph.compile()?.erase())
}

/// The weft MCP server of this example.
fn server() -> weft::Result<McpServer> {
    Ok(McpServer::new("weft-example")
        .with_tools([get_forecast.shared(), add.shared()])
        .with_graph("shout", "Answers the conversation's last message in capitals.", shout_graph()?)
        .with_instructions("Weather forecasts and sums."))
}

fn call(name: &str, args: serde_json::Value, id: &str) -> ToolCall {
    ToolCall { name: name.into(), args, id: Some(id.into()) }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--serve-stdio"] => serve_stdio().await,
        ["--serve-http", addr] => serve_http(addr).await,
        [] | ["--live"] => agent().await,
        other => Err(Error::msg(format!(
            "unknown arguments {other:?}; see the doc comment of examples/mcp_agent.rs"
        ))),
    };
    weft_examples::report(result)
}

async fn serve_stdio() -> weft::Result<()> {
    server()?.serve_stdio().await?;
    Ok(())
}

async fn serve_http(addr: &str) -> weft::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(Error::custom)?;
    eprintln!("weft MCP server on http://{}/mcp", listener.local_addr().map_err(Error::custom)?);
    server()?.serve_http(listener).await?;
    Ok(())
}

async fn agent() -> weft::Result<()> {
    // The servers: this program as a weft MCP server over stdio, and the reference server when installed.
    let me = std::env::current_exe().map_err(Error::custom)?;
    let mut servers = vec![("weft", Connection::stdio(me.display().to_string(), ["--serve-stdio"]))];
    let everything = std::env::var("WEFT_MCP_EVERYTHING").ok();
    if let Some(script) = &everything {
        servers.push(("everything", Connection::stdio("node", [script.as_str(), "stdio"])));
    }
    let client = MultiServerMcpClient::connect(servers).await?.with_tool_name_prefix(true);
    let tools = client.get_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| Tool::name(t.as_ref())).collect();
    println!("tools: {}", names.join(", "));
    for expected in ["weft_get_forecast", "weft_add", "weft_shout"] {
        check(names.contains(&expected), &format!("the tool {expected} is offered"))?;
    }

    // The agent: the model asks for two forecasts (one for a city the tool does not know), then a sum.
    let mut script = vec![
        FakeReply::tool_calls([
            call("weft_get_forecast", json!({"city": "Lisbon"}), "c1"),
            call("weft_get_forecast", json!({"city": "Atlantis"}), "c2"),
        ]),
        FakeReply::tool_call("weft_add", json!({"a": 24, "b": 3}), "c3"),
    ];
    if everything.is_some() {
        script.push(FakeReply::tool_call("everything_echo", json!({"message": "hi"}), "c4"));
    }
    script.push("Lisbon is sunny at 24°C; Atlantis has no forecast.".into());
    let models = weft_examples::Models::from_env();
    let model = models.chat_model("agent", script);
    let app = create_react_agent(model, tools).build()?;
    let out = app
        .invoke(
            AgentState::update()
                .messages(vec![Message::human("What is the weather in Lisbon and Atlantis?")]),
            &RunnableConfig::default(),
        )
        .await?;
    for message in &out.value.messages {
        let calls =
            message.as_ai().map(|ai| ai.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>());
        println!(
            "{}: {} {}",
            message.type_name(),
            message.text(),
            calls.map(|c| format!("{c:?}")).unwrap_or_default()
        );
    }
    let results: Vec<(String, ToolStatus)> = out
        .value
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .map(|t| (t.content.text(), t.status))
        .collect();
    // The tools' results: exact on the script; on a live model, reported next to what the script expects.
    let texts: Vec<&str> = results.iter().map(|(text, _)| text.as_str()).collect();
    let statuses: Vec<ToolStatus> = results.iter().map(|(_, status)| *status).collect();
    let mut expected_statuses = vec![ToolStatus::Success, ToolStatus::Error, ToolStatus::Success];
    if everything.is_some() {
        expected_statuses.push(ToolStatus::Success);
    }
    models.expect_eq("the tools' statuses", &statuses, &expected_statuses);
    let found_error = texts.get(1).is_some_and(|text| text.contains("no forecast for Atlantis"));
    models.expect_eq("the Lisbon forecast", texts.first().copied(), Some("sunny, 24°C"));
    models.expect_eq("the forecast error reached the model", found_error, true);
    models.expect_eq("the sum", texts.get(2).copied(), Some("27.0"));
    if everything.is_some() {
        models.expect_eq("the reference server's echo", texts.get(3).copied(), Some("Echo: hi"));
    }

    // The served graph, called as a tool; and a prompt of the reference server, when it is there.
    let shout = client.session("weft")?.call_tool(
        "shout",
        json!({"messages": [{"role": "user", "content": "hello"}]}),
        None,
    );
    let shouted = match shout.await? {
        ToolOutput::ContentAndArtifact { content, .. } => content.text(),
        other => return Err(Error::msg(format!("unexpected output of the shout tool: {other:?}"))),
    };
    println!("shout -> {shouted}");
    if everything.is_some() {
        let prompt = client.get_prompt("everything", "simple-prompt", BTreeMap::new()).await?;
        println!("simple-prompt -> {}", prompt[0].text());
    }
    client.close().await;
    check(shouted == "HELLO", "the shouted answer")
}

fn check(ok: bool, what: &str) -> weft::Result<()> {
    if ok { Ok(()) } else { Err(Error::msg(format!("wrong result: {what}"))) }
}
