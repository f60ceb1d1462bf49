//! The suite's graphs, as `python/graphs.py` writes them for LangGraph.

use std::time::Duration;

use serde_json::{Value, json};
use weft_agents::{HandleToolErrors, ToolNode};
use weft_graph::root::{Append, RootState};
use weft_graph::{
    ChannelKind, CompiledGraph, END, GraphResult, JsonState, MessagesState, MessagesStateUpdate, Runtime,
    START, StateGraph,
};
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::{
    AiMessage, Error, Message, PromptValue, Result, Runnable as _, StructuredTool, ToolCall, ToolExt as _,
    UsageMetadata,
};

/// `items` (lists concatenate, LangGraph's `operator.add`) and `count` (last value).
fn state() -> JsonState {
    JsonState::builder()
        .channel("items", ChannelKind::Reducer)
        .channel("count", ChannelKind::LastValue)
        .build()
}

/// `count + 1`, failing as Python's `+` does when `count` is not a number.
fn next_count(s: &JsonState) -> Result<i64> {
    match s.get("count") {
        None => Ok(1),
        Some(v) => v
            .as_i64()
            .map(|n| n + 1)
            .ok_or_else(|| Error::InvalidInput(format!("can only add 1 to an integer count, got {v}"))),
    }
}

fn node_a(s: &JsonState, rt: &Runtime) -> Result<Value> {
    rt.write(&json!({"progress": "in node_a"}));
    Ok(json!({"items": ["a"], "count": next_count(s)?}))
}

fn node_b(s: &JsonState) -> Result<Value> {
    Ok(json!({"items": ["b"], "count": next_count(s)?}))
}

/// `node_a` → `node_b`.
pub(crate) fn simple() -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("node_a", node_a);
    g.add_node("node_b", node_b);
    g.add_edge(START, "node_a");
    g.add_edge("node_a", "node_b");
    g.add_edge("node_b", END);
    g.compile()
}

fn ask(_: &JsonState, rt: &Runtime) -> Result<Value> {
    let answer: Value = rt.interrupt(json!({"question": "approve?"}))?;
    let text = answer.as_str().map_or_else(|| answer.to_string(), str::to_owned);
    Ok(json!({"items": [format!("answer:{text}")]}))
}

/// `ask` (interrupts with a question) → `node_b`.
pub(crate) fn hitl() -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("ask", ask);
    g.add_node("node_b", node_b);
    g.add_edge(START, "ask");
    g.add_edge("ask", "node_b");
    g.add_edge("node_b", END);
    g.compile()
}

/// `model`: a chat model `make` makes for each call (a scripted one), answering the messages, streamed.
fn model_graph(make: fn() -> FakeChatModel) -> GraphResult<CompiledGraph<MessagesState>> {
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("model", move |s: MessagesState, rt: Runtime| async move {
        let reply = make().invoke(PromptValue::from(s.messages.to_vec()), rt.config()).await?;
        Ok::<_, Error>(MessagesStateUpdate::default().messages(vec![Message::Ai(reply)]))
    });
    g.add_edge(START, "model");
    g.add_edge("model", END);
    g.compile()
}

/// `model`: a scripted chat model answering "Hello there friend", streamed token by token.
pub(crate) fn chat() -> GraphResult<CompiledGraph<MessagesState>> {
    model_graph(|| FakeChatModel::new(["Hello there friend"]))
}

/// `model`: a scripted chat model streaming "Hi there" in two chunks, the last one with token usage and
/// response metadata (`finish_reason`, `model_name`).
pub(crate) fn usage() -> GraphResult<CompiledGraph<MessagesState>> {
    model_graph(|| {
        let metadata = json!({"finish_reason": "stop", "model_name": "fake-1"});
        let reply = AiMessage {
            content: "Hi there".into(),
            id: Some("usage-1".to_owned()),
            usage_metadata: Some(UsageMetadata::new(3, 2)),
            response_metadata: metadata.as_object().cloned().unwrap_or_default(),
            ..AiMessage::default()
        };
        FakeChatModel::new([reply]).with_last_chunk_marked(true)
    })
}

/// `plan` (an AI message asking for `add(2, 3)` and `boom("no")`) → `tools` (a tool node answering both,
/// the failure as an error message).
pub(crate) fn tool_calls() -> GraphResult<CompiledGraph<MessagesState>> {
    let numbers = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                         "required": ["a", "b"]});
    let add = StructuredTool::from_fn("add", "Adds two numbers.", numbers, |args: Value, _| async move {
        let n = |k: &str| args.get(k).and_then(Value::as_i64).unwrap_or(0);
        Ok::<_, Error>(json!(n("a") + n("b")))
    });
    let reason =
        json!({"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]});
    let boom = StructuredTool::from_fn("boom", "Always fails.", reason, |args: Value, _| async move {
        let reason = args.get("reason").and_then(Value::as_str).unwrap_or_default().to_owned();
        Err::<String, _>(Error::msg(format!("boom: {reason}")))
    });
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("plan", |_: MessagesState| {
        let call =
            |name: &str, args: Value, id: &str| ToolCall { name: name.into(), args, id: Some(id.into()) };
        let ask = AiMessage {
            id: Some("plan-1".to_owned()),
            tool_calls: vec![
                call("add", json!({"a": 2, "b": 3}), "call_add"),
                call("boom", json!({"reason": "no"}), "call_boom"),
            ],
            ..AiMessage::default()
        };
        MessagesStateUpdate::default().messages(vec![Message::Ai(ask)])
    });
    g.add_node(
        "tools",
        ToolNode::new([add.shared(), boom.shared()]).handle_tool_errors(HandleToolErrors::All),
    );
    g.add_edge(START, "plan");
    g.add_edge("plan", "tools");
    g.add_edge("tools", END);
    g.compile()
}

fn inner() -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("inner_a", |_: &JsonState, rt: &Runtime| {
        rt.write(&json!({"progress": "in inner_a"}));
        json!({"items": ["inner"]})
    });
    g.add_edge(START, "inner_a");
    g.add_edge("inner_a", END);
    g.compile()
}

/// `inner` (a subgraph) → `after`.
pub(crate) fn nested() -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("inner", inner()?);
    g.add_node("after", |_: &JsonState| json!({"items": ["after"]}));
    g.add_edge(START, "inner");
    g.add_edge("inner", "after");
    g.add_edge("after", END);
    g.compile()
}

/// `wait` (sleeps `delay` seconds, 1 by default) → `node_b` (appends `b`).
pub(crate) fn slow() -> GraphResult<CompiledGraph<JsonState>> {
    let state = JsonState::builder()
        .channel("items", ChannelKind::Reducer)
        .channel("delay", ChannelKind::LastValue)
        .build();
    let mut g = StateGraph::with_initial(state);
    // An async node reads the state as JSON.
    g.add_node("wait", |s: Value| async move {
        let delay = s.get("delay").and_then(Value::as_f64).unwrap_or(1.0);
        tokio::time::sleep(Duration::from_secs_f64(delay.max(0.0))).await;
        Ok::<_, Error>(json!({"items": ["slept"]}))
    });
    g.add_node("node_b", |_: &JsonState| json!({"items": ["b"]}));
    g.add_edge(START, "wait");
    g.add_edge("wait", "node_b");
    g.add_edge("node_b", END);
    g.compile()
}

fn count_up(s: &JsonState) -> Result<Value> {
    Ok(json!({"count": next_count(s)?}))
}

/// `one` → `two` → `three`, each adding 1 to `count`: the benchmarks' three-node graph.
pub(crate) fn three() -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("one", count_up);
    g.add_node("two", count_up);
    g.add_node("three", count_up);
    g.add_edge(START, "one");
    g.add_edge("one", "two");
    g.add_edge("two", "three");
    g.add_edge("three", END);
    g.compile()
}

/// `n`, appending `"n"`: the whole state is one list (LangGraph's bare `Annotated[list, operator.add]`
/// schema), so input, values and results are bare lists.
pub(crate) fn root() -> GraphResult<CompiledGraph<RootState<Vec<Value>, Append>>> {
    let mut g = StateGraph::<RootState<Vec<Value>, Append>>::new();
    g.add_node("n", |_: Vec<Value>| vec![json!("n")]);
    g.add_edge(START, "n");
    g.add_edge("n", END);
    g.compile()
}

/// `node_a` → `explode` (fails with "boom").
pub(crate) fn fail() -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("node_a", node_a);
    g.add_node("explode", |_: &JsonState| -> Result<Value> { Err(Error::InvalidInput("boom".to_owned())) });
    g.add_edge(START, "node_a");
    g.add_edge("node_a", "explode");
    g.add_edge("explode", END);
    g.compile()
}

/// The chaos test's steps, in order.
const CHAOS_STEPS: [&str; 4] = ["step_1", "step_2", "step_3", "step_4"];

/// One step of `chaos`: notes its start in the file `WEFT_CHAOS_LOG` names, when set (a line
/// `<run_id> <node> <pid>`, appended at once, so that a killed process leaves it behind), waits `delay`
/// seconds, and adds its name to `items`.
async fn chaos_step(s: Value, rt: Runtime) -> Result<Value> {
    let node = rt.node().to_owned();
    if let Some(path) = std::env::var_os("WEFT_CHAOS_LOG") {
        let run_id = rt.config().configurable.get("run_id").and_then(Value::as_str).unwrap_or("-");
        let line = format!("{run_id} {node} {}\n", std::process::id());
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
        written.map_err(|e| Error::InvalidConfig(format!("cannot note the step in WEFT_CHAOS_LOG: {e}")))?;
    }
    let delay = s.get("delay").and_then(Value::as_f64).unwrap_or(0.0);
    tokio::time::sleep(Duration::from_secs_f64(delay.clamp(0.0, 60.0))).await;
    Ok(json!({"items": [node]}))
}

/// `step_1` → `step_2` → `step_3` → `step_4`, each waiting `delay` seconds: the scaled-out chaos test's
/// multi-step graph (`cargo xtask server-chaos`).
pub(crate) fn chaos() -> GraphResult<CompiledGraph<JsonState>> {
    let state = JsonState::builder()
        .channel("items", ChannelKind::Reducer)
        .channel("delay", ChannelKind::LastValue)
        .build();
    let mut g = StateGraph::with_initial(state);
    for step in CHAOS_STEPS {
        g.add_node(step, chaos_step);
    }
    g.add_edge(START, CHAOS_STEPS[0]);
    for pair in CHAOS_STEPS.windows(2) {
        g.add_edge(pair[0], pair[1]);
    }
    g.add_edge(CHAOS_STEPS[3], END);
    g.compile()
}

/// How many words `long_reply`'s model streams.
pub(crate) const LONG_REPLY_WORDS: usize = 50_000;

/// `wait` (sleeps `delay` seconds, none by default) → `model`: a scripted chat model streaming a reply of
/// [`LONG_REPLY_WORDS`] words (`w0 w1 … w49999`), one chunk a word: the lifecycle test's slow-client load.
/// The state keeps only `items` (`["replied"]`), so that the reply is held by its streams alone.
pub(crate) fn long_reply() -> GraphResult<CompiledGraph<JsonState>> {
    let state = JsonState::builder()
        .channel("items", ChannelKind::Reducer)
        .channel("delay", ChannelKind::LastValue)
        .build();
    let mut g = StateGraph::with_initial(state);
    g.add_node("wait", |s: Value| async move {
        let delay = s.get("delay").and_then(Value::as_f64).unwrap_or(0.0);
        tokio::time::sleep(Duration::from_secs_f64(delay.clamp(0.0, 60.0))).await;
        Ok::<_, Error>(json!({"items": ["waited"]}))
    });
    g.add_node("model", |_: Value, rt: Runtime| async move {
        let words: Vec<String> = (0..LONG_REPLY_WORDS).map(|i| format!("w{i}")).collect();
        let model = FakeChatModel::new([words.join(" ")]);
        model.invoke(PromptValue::from("go"), rt.config()).await?;
        Ok::<_, Error>(json!({"items": ["replied"]}))
    });
    g.add_edge(START, "wait");
    g.add_edge("wait", "model");
    g.add_edge("model", END);
    g.compile()
}
