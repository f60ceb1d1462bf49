//! What an agent's run traces, with nobody streaming it: the graph run, a span per node task under it,
//! the model and tool calls under their nodes, with their GenAI and OpenInference fields, token counts,
//! the approval interrupt, and errors on the spans where they happened.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::sync::Arc;

use common::spans::Spans;
use common::{add, asks, boom, call, thread};
use futures::StreamExt as _;
use serde_json::json;
use weft_agents::{AgentState, ApprovalDecision, HumanApproval, create_react_agent};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{CompiledGraph, StreamMode};
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::messages::UsageMetadata;
use weft_runnable_core::{AiMessage, Message};

fn usage(input: u64, output: u64) -> Option<UsageMetadata> {
    Some(UsageMetadata {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        ..Default::default()
    })
}

/// An agent that adds, asking a human before `add` runs.
fn agent() -> CompiledGraph<AgentState> {
    let model = FakeChatModel::new([
        AiMessage { usage_metadata: usage(11, 3), ..asks(vec![call("add", json!({"a": 1, "b": 2}), "c1")]) },
        AiMessage { usage_metadata: usage(20, 5), ..AiMessage::new("3") },
    ])
    .with_model_name("scripted-1");
    create_react_agent(model, [add()])
        .human_approval(HumanApproval::tools(["add"]))
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap()
}

fn ask() -> weft_agents::AgentStateUpdate {
    AgentState::update().messages(vec![Message::human("1 + 2?")])
}

#[tokio::test]
async fn an_unobserved_run_traces_graph_nodes_model_and_interrupt() {
    let app = agent();
    let (spans, _guard) = Spans::capture();
    let out = app.invoke(ask(), &thread("t1")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1, "the run paused for approval");

    let graph = spans.one("LangGraph");
    assert_eq!(graph.name, "weft.graph");
    assert_eq!(graph.parent, None);
    assert_eq!(graph.get("openinference.span.kind"), "AGENT");
    assert_eq!(graph.get("thread_id"), "t1");
    assert!(uuid::Uuid::parse_str(graph.get("run_id")).is_ok(), "{graph:?}");
    assert_eq!(graph.get("interrupted"), "true");
    assert!(!graph.get("checkpoint_id").is_empty(), "{graph:?}");
    assert_eq!(graph.get("error"), "", "an interrupt is not an error");

    let node = spans.one("agent");
    assert_eq!(node.name, "weft.task");
    assert_eq!(node.parent, Some(graph.id));
    assert_eq!(node.get("step"), "1");
    assert_eq!(node.get("thread_id"), "t1");
    assert!(!node.get("task_id").is_empty() && !node.get("checkpoint_id").is_empty(), "{node:?}");

    let model = spans.one("FakeChatModel");
    assert_eq!(model.name, "weft.run");
    assert_eq!(model.parent, Some(node.id), "the model call is under its node");
    assert_eq!(model.get("openinference.span.kind"), "LLM");
    assert_eq!(model.get("gen_ai.operation.name"), "chat");
    assert_eq!(model.get("gen_ai.request.model"), "scripted-1");
    assert_eq!(model.get("llm.model_name"), "scripted-1");
    assert_eq!(model.get("gen_ai.provider.name"), "fake");
    assert_eq!(model.get("gen_ai.usage.input_tokens"), "11");
    assert_eq!(model.get("gen_ai.usage.output_tokens"), "3");
    assert_eq!(model.get("llm.token_count.total"), "14");
    assert_eq!(model.get("input.value"), "", "no content unless asked for");

    let approval = spans.one("human_approval");
    assert_eq!(approval.parent, Some(graph.id));
    assert_eq!(approval.get("interrupted"), "true");
    assert_eq!(approval.get("interrupts"), "1");
    assert_eq!(approval.get("otel.status_code"), "");
    assert!(spans.named("tools").is_empty(), "the tool waits for approval");

    // Resumed: the approved tool runs in its node, then the model answers.
    let resumed =
        app.invoke(HumanApproval::resume([ApprovalDecision::Approve]), &thread("t1")).await.unwrap();
    assert_eq!(resumed.value.messages.last().unwrap().text(), "3");
    let tools = spans.one("tools");
    let tool = spans.one("add");
    assert_eq!(tool.parent, Some(tools.id), "the tool call is under the tools node");
    assert_eq!(tool.get("openinference.span.kind"), "TOOL");
    assert_eq!(tool.get("gen_ai.operation.name"), "execute_tool");
    assert_eq!(tool.get("tool.name"), "add");
    let graphs = spans.named("LangGraph");
    assert_eq!(graphs.len(), 2);
    assert_eq!(spans.parent_name(&tools), "LangGraph");
    assert_eq!(graphs[1].get("interrupted"), "", "the resumed run ended");
    let answers = spans.named("FakeChatModel");
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[1].get("gen_ai.usage.output_tokens"), "5");
}

#[tokio::test]
async fn a_streamed_run_has_one_span_per_node_and_the_streamed_usage() {
    let app = agent();
    let (spans, _guard) = Spans::capture();
    let mut parts = app.stream(ask(), &thread("t2"), &[StreamMode::Messages, StreamMode::Updates]);
    while let Some(part) = parts.next().await {
        part.unwrap();
    }
    drop(parts);
    // Observed runs reuse the graph's and the nodes' spans for their run scopes: no duplicates.
    let graph = spans.one("LangGraph");
    assert_eq!(graph.name, "weft.graph");
    assert!(uuid::Uuid::parse_str(graph.get("run_id")).is_ok());
    let node = spans.one("agent");
    assert_eq!(node.name, "weft.task");
    assert!(uuid::Uuid::parse_str(node.get("run_id")).is_ok(), "the node's run id: {node:?}");
    let model = spans.one("FakeChatModel");
    assert_eq!(model.parent, Some(node.id));
    assert_eq!(model.get("gen_ai.usage.input_tokens"), "11", "usage from the streamed chunks");
    assert_eq!(model.get("gen_ai.request.model"), "scripted-1");
}

#[tokio::test]
async fn a_failing_tool_records_its_error_on_its_span_its_node_and_the_run() {
    let model = FakeChatModel::new([asks(vec![call("boom", json!({}), "c1")]), AiMessage::new("ok")]);
    let app = create_react_agent(model, [boom()]).build().unwrap();
    let (spans, _guard) = Spans::capture();
    let err = app.invoke(ask(), &thread("t3")).await.unwrap_err();
    let tool = spans.one("boom");
    assert_eq!(tool.get("otel.status_code"), "ERROR");
    assert!(tool.get("error").contains("kaboom"), "{tool:?}");
    let node = spans.one("tools");
    assert_eq!(node.get("otel.status_code"), "ERROR", "{node:?}");
    assert!(node.get("error").contains("kaboom"), "{node:?}");
    let graph = spans.one("LangGraph");
    assert_eq!(graph.get("otel.status_code"), "ERROR");
    assert!(graph.get("error").contains("tools"), "the run's error names the node: {graph:?} ({err})");
    assert!(graph.get("error").contains("kaboom"), "and what failed: {graph:?}");
}
