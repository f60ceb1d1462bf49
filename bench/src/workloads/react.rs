//! react10: a ReAct agent loop (agent node, tools node, a router on tool calls) over the scripted
//! `FakeChatModel` and a real `#[tool]`, ten tool rounds then a final answer.
//!
//! The prebuilt agent does not exist yet, so the graph is built by hand as LangGraph's
//! `create_react_agent` builds it: `START -> agent`; `agent -> tools` when the last AI message calls
//! tools, else `END`; `tools -> agent`.

use std::sync::Arc;

use serde_json::json;
use tokio::runtime::Runtime;
use weft_graph::{CompiledGraph, END, GraphOutput, RunOptions, START, StateGraph};
use weft_runnable_core::chat_model::BoundChatModel;
use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
use weft_runnable_core::tools::ToolCallOutput;
use weft_runnable_core::{
    ChatModelExt as _, Error, Message, PromptValue, Runnable as _, RunnableConfig, ToolContext, invoke_tool,
    tool,
};

use crate::graphs::ChatState;
use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure};

/// The number of tool rounds before the final answer.
pub(crate) const ROUNDS: usize = 10;

/// The text of the model's final answer.
pub(crate) const FINAL: &str = "final answer after 10 tool calls";

/// Add two integers.
#[tool]
pub(crate) fn add(
    /// The first integer.
    a: i64,
    /// The second integer.
    b: i64,
) -> i64 {
    a + b
}

/// The chat model of one op, with the `add` tool bound.
type Model = BoundChatModel<FakeChatModel>;

/// The replies LangGraph's scripted model gives: while it has seen `k < 10` tool messages, one call
/// `add(a=k, b=1)` with id `call_<k>`; then the final answer.
fn script() -> Vec<FakeReply> {
    (0..ROUNDS)
        .map(|k| FakeReply::tool_call("add", json!({"a": k, "b": 1}), format!("call_{k}")))
        .chain([FakeReply::text(FINAL)])
        .collect()
}

/// The per-op state of the workload: a fresh fake model (its script and record of calls).
struct Ctx {
    model: FakeChatModel,
    options: RunOptions,
}

struct React {
    graph: CompiledGraph<ChatState>,
}

impl Workload for React {
    type Ctx = Ctx;
    type Out = GraphOutput<ChatState>;

    fn prepare(&mut self, _: &Runtime) -> Result<Ctx, String> {
        let model = FakeChatModel::new(script());
        let bound: Model = model.clone().bind_tools([&add], None);
        let options = RunOptions { context: Some(Arc::new(bound)), ..RunOptions::default() };
        Ok(Ctx { model, options })
    }

    async fn op(&self, ctx: &mut Ctx) -> Result<Self::Out, String> {
        let input = ChatState::update().messages(vec![Message::human("please add some numbers")]);
        self.graph.invoke_with(input, &RunnableConfig::default(), ctx.options.clone()).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, ctx: &Ctx) -> Result<(), String> {
        let messages = &out.value.messages;
        ensure(messages.len() == 2 * ROUNDS + 2, || format!("{} messages, expected 22", messages.len()))?;
        let results: Vec<String> =
            messages.iter().filter_map(Message::as_tool).map(|m| m.content.text()).collect();
        let expected: Vec<String> = (1..=ROUNDS).map(|k| k.to_string()).collect();
        ensure(results == expected, || format!("tool results {results:?}, expected \"1\" .. \"10\""))?;
        let last = messages.last().and_then(Message::as_ai);
        ensure(last.is_some_and(|m| m.text() == FINAL && m.tool_calls.is_empty()), || {
            format!("the last message is {:?}, expected the final answer", messages.last())
        })?;
        // The script answers as LangGraph's model decides: call k has seen k tool messages.
        for (k, call) in ctx.model.calls().iter().enumerate() {
            let seen = call.messages.iter().filter(|m| m.as_tool().is_some()).count();
            ensure(seen == k, || format!("model call {k} saw {seen} tool messages"))?;
            ensure(call.options.tools.iter().any(|t| t.name == "add"), || {
                format!("model call {k} had no tools")
            })?;
        }
        ensure(ctx.model.calls().len() == ROUNDS + 1, || {
            format!("{} model calls, expected 11", ctx.model.calls().len())
        })
    }
}

/// `react10`: one invoke of the agent from a human message; 11 model calls, 10 tool calls.
pub(crate) fn react10(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("react10", ROUNDS as u64).unit("tool round (model call + tool call)");
    measure(opts, info, Threads::One, |_| Ok(()), |()| Ok(React { graph: build().map_err(err)? }))
}

fn build() -> weft_graph::GraphResult<CompiledGraph<ChatState>> {
    let mut graph = StateGraph::<ChatState>::new();
    graph.add_node("agent", |state: ChatState, rt: weft_graph::Runtime| async move {
        let model = rt.context::<Model>().ok_or_else(|| Error::msg("no model in the run's context"))?;
        let reply = model.invoke(PromptValue::Messages(state.messages.to_vec()), rt.config()).await?;
        Ok::<_, Error>(ChatState::update().messages(vec![Message::Ai(reply)]))
    });
    graph.add_node("tools", |state: ChatState, rt: weft_graph::Runtime| async move {
        let calls =
            state.messages.last().and_then(Message::as_ai).map(|m| m.tool_calls.clone()).unwrap_or_default();
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            match invoke_tool(&add, call, ToolContext::new(rt.config().clone())).await? {
                ToolCallOutput::Message(message) => results.push(Message::Tool(message)),
                _ => return Err(Error::msg("the add tool returned a command")),
            }
        }
        Ok(ChatState::update().messages(results))
    });
    graph.add_edge(START, "agent");
    graph.add_conditional_edges(
        "agent",
        |s: &ChatState| {
            let calls_tools =
                s.messages.last().and_then(Message::as_ai).is_some_and(|m| !m.tool_calls.is_empty());
            if calls_tools { "tools" } else { END }
        },
        ["tools", END],
    );
    graph.add_edge("tools", "agent");
    graph.compile()
}
