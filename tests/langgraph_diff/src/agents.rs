//! Prebuilt agents with scripted models: create_react_agent (a tool call then an answer, parallel calls,
//! streamed updates, history, a breakpoint before the tools) and ToolNode with tools_condition in a graph
//! of one's own, and the state a `Send` to a ToolNode reads (LangGraph 1.2.23's rule: the state the node
//! would get from an edge; a graph inside a Send task reads its own state, never its parent's)
//! (python/s_agents.py).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft::agents::{
    AgentState, AgentStateUpdate, HasMessages, ToolCallWithContext, ToolNode, create_react_agent,
    tools_condition,
};
use weft::fakes::{FakeChatModel, FakeReply};
use weft::graph::{
    CompiledGraph, END, GraphInput, InMemorySaver, Messages, MessagesState, START, State, StateGraph,
    StreamMode,
};
use weft::{
    AiMessage, InjectedArg, Message, Runnable as _, SharedTool, StructuredTool, ToolCall, ToolExt as _,
};

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
    send_to_a_tool_node_reads_the_state_an_edge_gives,
    graph_inside_a_send_task_reads_its_own_state,
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

/// The conversation and a topic (Python's `MessagesState` with `topic: str`).
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct TopicState {
    #[state(add_messages)]
    messages: Messages,
    topic: String,
}

impl HasMessages for TopicState {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<Message>) -> TopicStateUpdate {
        TopicState::update().messages(messages)
    }
}

impl crate::observe::Observe for TopicState {
    fn values(&self) -> Value {
        crate::observe::compact(serde_json::to_value(self).unwrap_or(Value::Null))
    }

    fn update_json(update: &Self::Update) -> Value {
        let schema = TopicState::default();
        let names = schema.channels();
        let mut out = serde_json::Map::new();
        for (index, value) in schema.update_to_json(update).unwrap_or_default() {
            if let Some(spec) = names.get(index) {
                out.insert(spec.name.to_string(), crate::observe::compact(value));
            }
        }
        Value::Object(out)
    }
}

/// `tell(label)`, with the state injected: the label, the topic, the number of messages and the state's
/// keys.
fn tell() -> SharedTool {
    let schema =
        json!({"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]});
    StructuredTool::from_fn(
        "tell",
        "Tells the topic and the size of the state it is given.",
        schema,
        |args: Value, _ctx| async move {
            let state = &args["state"];
            let mut keys: Vec<&str> =
                state.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
            keys.sort_unstable();
            let messages = state["messages"].as_array().map_or(0, Vec::len);
            let (label, topic) =
                (args["label"].as_str().unwrap_or("?"), state["topic"].as_str().unwrap_or("?"));
            Ok(json!(format!("{label}:{topic}:{messages}:{}", keys.join(","))))
        },
    )
    .with_injected(InjectedArg::state("state"))
    .shared()
}

/// `plan` (sets the topic, asks for two `tell` calls) -> a `Send` per call to the tool node -> END.
fn tools_by_send(topic: &'static str) -> StateGraph<TopicState> {
    let mut g = StateGraph::<TopicState>::new();
    g.add_node("plan", move |_s: TopicState| {
        let calls = ["c1", "c2"].map(|id| ToolCall {
            name: "tell".into(),
            args: json!({"label": id}),
            id: Some(id.into()),
        });
        let ask = AiMessage { tool_calls: calls.to_vec(), ..AiMessage::new("") };
        TopicState::update().topic(topic.to_owned()).messages(vec![ask.into()])
    });
    g.add_node("tools", ToolNode::new([tell()]));
    g.add_edge(START, "plan");
    g.add_conditional_edges(
        "plan",
        |s: &TopicState| {
            let calls = match s.messages.last() {
                Some(Message::Ai(ai)) => ai.tool_calls.clone(),
                _ => Vec::new(),
            };
            calls
                .into_iter()
                .map(|tool_call| {
                    weft::graph::Send::new("tools", ToolCallWithContext { tool_call, state: None })
                })
                .collect::<Vec<_>>()
        },
        ["tools"],
    );
    g.add_edge("tools", END);
    g
}

fn tell_input(topic: &str) -> TopicStateUpdate {
    TopicState::update().messages(vec![Message::human("tell").with_id("h-1")]).topic(topic.to_owned())
}

fn send_to_a_tool_node_reads_the_state_an_edge_gives(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = tools_by_send("rust").compile_with(crate::kit::saver())?;
        rec.invoke(&app, tell_input("x"), &thread("t")).await;
        Ok(())
    })
}

fn graph_inside_a_send_task_reads_its_own_state(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let inner = tools_by_send("inner").compile()?;
        let mut g = StateGraph::<TopicState>::new();
        g.add_node("outer", |_s: TopicState| {
            let go: Message = AiMessage::new("go").into();
            TopicState::update().topic("outer".to_owned()).messages(vec![go.with_id("a-0")])
        });
        g.add_node("sub", inner);
        g.add_edge(START, "outer");
        g.add_conditional_edges(
            "outer",
            |_s: &TopicState| {
                let sent = json!({"messages": [Message::human("in").with_id("h-2")], "topic": "sent"});
                vec![weft::graph::Send::new("sub", sent)]
            },
            ["sub"],
        );
        g.add_edge("sub", END);
        let app = g.compile_with(crate::kit::saver())?;
        rec.invoke(&app, tell_input("x"), &thread("t")).await;
        Ok(())
    })
}
