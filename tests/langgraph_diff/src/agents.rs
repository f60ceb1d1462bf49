//! Prebuilt agents with scripted models: create_react_agent (a tool call then an answer, parallel calls,
//! streamed updates, history, a breakpoint before the tools) and ToolNode with tools_condition in a graph
//! of one's own (python/s_agents.py).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::agents::{AgentState, AgentStateUpdate, ToolNode, create_react_agent, tools_condition};
use weft::fakes::{FakeChatModel, FakeReply};
use weft::graph::{
    CompiledGraph, END, GraphInput, InMemorySaver, MessagesState, START, StateGraph, StreamMode,
};
use weft::{Message, Runnable as _, SharedTool, StructuredTool, ToolCall, ToolExt as _};

use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    react_agent_calls_a_tool_then_answers,
    react_agent_runs_parallel_tool_calls,
    react_agent_streams_updates,
    react_agent_history,
    react_agent_pauses_before_tools,
    tool_node_with_tools_condition_in_a_graph,
    tool_node_reports_an_unknown_tool,
];

/// `add(a, b)`: the sum.
fn add() -> SharedTool {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]});
    StructuredTool::from_fn("add", "Adds two integers.", schema, |args: Value, _ctx| async move {
        Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
    })
    .shared()
}

fn calls(specs: &[(&str, Value, &str)]) -> FakeReply {
    FakeReply::tool_calls(specs.iter().map(|(n, a, i)| ToolCall {
        name: (*n).into(),
        args: a.clone(),
        id: Some((*i).into()),
    }))
}

fn model(first: FakeReply, answer: &str) -> FakeChatModel {
    FakeChatModel::new([first, answer.into()])
}

fn agent(
    model: FakeChatModel,
    before_tools: bool,
) -> Result<CompiledGraph<AgentState>, weft::agents::ReactAgentError> {
    let mut builder = create_react_agent(model, [add()]).checkpointer(Arc::new(InMemorySaver::new()));
    if before_tools {
        builder = builder.interrupt_before(["tools"]);
    }
    builder.build()
}

fn ask(text: &str) -> AgentStateUpdate {
    AgentState::update().messages(vec![Message::human(text).with_id("h-1")])
}

fn add_2_3() -> FakeReply {
    calls(&[("add", json!({"a": 2, "b": 3}), "c1")])
}

fn react_agent_calls_a_tool_then_answers(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(model(add_2_3(), "5"), false)?;
        rec.invoke(&app, ask("2 + 3?"), &thread("t")).await;
        Ok(())
    })
}

fn react_agent_runs_parallel_tool_calls(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let first = calls(&[("add", json!({"a": 1, "b": 2}), "c1"), ("add", json!({"a": 3, "b": 4}), "c2")]);
        let app = agent(model(first, "3 and 7"), false)?;
        rec.invoke(&app, ask("1+2, 3+4?"), &thread("t")).await;
        Ok(())
    })
}

fn react_agent_streams_updates(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(model(add_2_3(), "5"), false)?;
        rec.stream(&app, ask("2 + 3?"), &thread("t"), &[StreamMode::Updates], Default::default()).await;
        Ok(())
    })
}

fn react_agent_history(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(model(add_2_3(), "5"), false)?;
        rec.invoke(&app, ask("2 + 3?"), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn react_agent_pauses_before_tools(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(model(add_2_3(), "5"), true)?;
        let t = thread("t");
        rec.invoke(&app, ask("2 + 3?"), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        Ok(())
    })
}

/// `model -> tools_condition -> tools -> model` over `MessagesState`.
fn own_graph(model: FakeChatModel) -> StateGraph<MessagesState> {
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("model", move |s: MessagesState, rt: weft::graph::Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(s.messages.to_vec().into(), rt.config()).await?;
            Ok::<_, weft::Error>(MessagesState::update().messages(vec![reply.into()]))
        }
    });
    g.add_node("tools", ToolNode::new([add()]));
    g.add_edge(START, "model");
    g.add_conditional_edges("model", tools_condition, ["tools", END]);
    g.add_edge("tools", "model");
    g
}

fn hi(text: &str) -> weft::graph::MessagesStateUpdate {
    MessagesState::update().messages(vec![Message::human(text).with_id("h-1")])
}

fn tool_node_with_tools_condition_in_a_graph(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = own_graph(model(add_2_3(), "5")).compile_with(crate::kit::saver())?;
        rec.invoke(&app, hi("2 + 3?"), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn tool_node_reports_an_unknown_tool(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = own_graph(model(calls(&[("nope", json!({}), "c1")]), "sorry")).compile()?;
        rec.invoke(&app, hi("?"), &weft::RunnableConfig::default()).await;
        Ok(())
    })
}
