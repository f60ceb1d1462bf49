//! Quickstart: an agent as a graph, with a human approval step before each tool call.
//!
//! The graph is LangGraph's agent loop: `agent` calls a chat model with the `add` tool bound; when the
//! reply asks for tools, `tools` runs them and hands the results back to `agent`; otherwise the run ends.
//! The graph is compiled with a SQLite checkpointer (a file, WAL) and `interrupt_before(["tools"])`, so the
//! run pauses before any tool runs; the program inspects the pause, approves, resumes, and prints the
//! thread's history.
//! The model is weft's scripted fake: no API key or server is needed. Every result is checked: a wrong
//! one panics and the exit status is non-zero.
//!
//! Run it from the repository root: `cargo run --example quickstart`.

use std::sync::Arc;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft::fakes::{FakeChatModel, FakeReply};
use weft::graph::ListOptions;
use weft::prelude::*;
use weft::{SharedTool, ToolCallOutput, ToolContext, invoke_tool};
use weft_integrations::sqlite::SqliteSaver;

/// Adds two integers.
#[tool]
fn add(
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
) -> i64 {
    a + b
}

/// The graph's state: one channel, the conversation, merged by message id (LangGraph's `add_messages`).
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Agent {
    #[state(add_messages)]
    messages: Messages,
}

/// The tool calls of the last message, if it is an AI message.
fn pending_calls(state: &Agent) -> Vec<ToolCall> {
    state.messages.last().and_then(Message::as_ai).map(|ai| ai.tool_calls.clone()).unwrap_or_default()
}

#[tokio::main]
async fn main() -> weft::Result<()> {
    if std::env::var_os("OPENAI_API_KEY").is_some() {
        println!("OPENAI_API_KEY is set, but weft has no OpenAI integration yet: using the scripted model");
    }
    // The model's script: first it explains and calls `add`, then it answers from the tool's result.
    let call = ToolCall { name: "add".into(), args: json!({"a": 2, "b": 3}), id: Some("call-1".into()) };
    let ask = AiMessage { tool_calls: vec![call], ..AiMessage::new("Let me add those.") };
    let model = FakeChatModel::new([FakeReply::from(ask), "2 + 3 = 5".into()]).bind_tools([&add], None);
    let tools: Vec<SharedTool> = vec![add.shared()];

    let mut graph = StateGraph::<Agent>::new();
    // `agent`: calls the model under the node's config, so `messages` mode streams its tokens.
    graph.add_node("agent", move |state: Agent, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(state.messages.to_vec().into(), rt.config()).await?;
            Ok::<_, weft::Error>(Agent::update().messages(vec![reply.into()]))
        }
    });
    // `tools`: runs each tool call of the last AI message and appends the tool messages.
    graph.add_node("tools", move |state: Agent, rt: Runtime| {
        let tools = tools.clone();
        async move {
            let mut results = Vec::new();
            for call in pending_calls(&state) {
                let tool = tools.iter().find(|t| t.name() == call.name);
                let tool = tool.ok_or_else(|| Error::msg(format!("unknown tool '{}'", call.name)))?;
                let output = invoke_tool(tool.as_ref(), call, ToolContext::new(rt.config().clone())).await?;
                let ToolCallOutput::Message(message) = output else {
                    return Err(Error::msg("this loop does not apply commands"));
                };
                results.push(message.into());
            }
            Ok(Agent::update().messages(results))
        }
    });
    graph.add_edge(START, "agent");
    graph.add_conditional_edges(
        "agent",
        |s: &Agent| if pending_calls(s).is_empty() { END } else { "tools" },
        None,
    );
    graph.add_edge("tools", "agent");

    // Checkpoints go to a SQLite file (WAL; survives a crash of this process). The program starts a fresh
    // file each run so that its checks hold; a real app keeps it and resumes threads across restarts.
    let db = std::env::temp_dir().join("weft-quickstart.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let saver = Arc::new(SqliteSaver::open(&db).await.map_err(Error::custom)?);
    println!("checkpoints are saved to {}", db.display());
    let app = graph.compile_with(CompileConfig::new().checkpointer(saver).interrupt_before(["tools"]))?;
    let thread = RunnableConfig::default().with_configurable("thread_id", "quickstart");

    // Run 1, streamed: node updates as each node finishes, model tokens as they come.
    let input = Agent::update().messages(vec![Message::human("What is 2 + 3?")]);
    let mut parts = app.stream(input, &thread, &[StreamMode::Updates, StreamMode::Messages]);
    let mut tokens = Vec::new();
    while let Some(part) = parts.next().await {
        match part?.data {
            StreamData::Message { chunk, metadata } => {
                println!("  token from {}: {:?}", metadata["langgraph_node"], chunk.text());
                tokens.push(chunk.text());
            }
            StreamData::Updates { node, updates, .. } => {
                for message in updates.into_iter().flat_map(|u| u.messages.unwrap_or_default()) {
                    let calls = message.as_ai().map_or(0, |ai| ai.tool_calls.len());
                    println!(
                        "step: {node} wrote {} {:?}, {calls} tool call(s)",
                        message.type_name(),
                        message.text()
                    );
                }
            }
            StreamData::Interrupt(_) => println!("step: paused (a breakpoint)"),
            other => println!("step: {other:?}"),
        }
    }
    assert_eq!(tokens.concat(), "Let me add those.", "the model's tokens were streamed");

    // The pause: the thread's checkpoint says `tools` runs next; a human approves the call.
    let paused = app.get_state(&thread).await?;
    assert_eq!(paused.next, ["tools"]);
    let calls = pending_calls(&paused.values);
    println!(
        "paused before {:?}: the model asks for {}({}); approved",
        paused.next, calls[0].name, calls[0].args
    );

    // Run 2: resume the thread from its checkpoint (LangGraph's `invoke(None, config)`).
    let done = app.invoke(GraphInput::Resume, &thread).await?;
    let kinds: Vec<&str> = done.value.messages.iter().map(Message::type_name).collect();
    assert_eq!(kinds, ["human", "ai", "tool", "ai"]);
    assert_eq!(done.value.messages[2].text(), "5", "the tool ran on the approved call");
    let answer = done.value.messages.last().map(Message::text).unwrap_or_default();
    println!("final answer: {answer}");
    assert_eq!(answer, "2 + 3 = 5");
    assert!(!done.is_interrupted());

    // The thread's history, newest first: one checkpoint per superstep, plus the input's.
    println!("history (step, source, next):");
    let history = app.get_state_history(&thread, ListOptions::default()).await?;
    let mut steps = Vec::new();
    for snapshot in &history {
        let Some(meta) = &snapshot.metadata else { continue };
        println!("  {:>2}  {:<6} {:?}", meta.step, json!(meta.source).as_str().unwrap_or("?"), snapshot.next);
        steps.push(meta.step);
    }
    assert_eq!(steps, [3, 2, 1, 0, -1]);
    assert_eq!(history[2].next, ["tools"], "the pause is in the history");

    println!("quickstart: all checks passed");
    Ok(())
}
