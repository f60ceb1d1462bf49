//! react10: the prebuilt tool-calling agent against LangGraph's prebuilt one: weft's
//! `create_react_agent` (agent node, `tools` node, a router on tool calls; version 2, each call sent to
//! `tools` as its own task, as LangGraph's default) over [`Scripted`], a model that answers as LangGraph's
//! side's scripted model does, with a real `#[tool]`; ten tool rounds then a final answer.
//!
//! The model is shared with the `create_agent` workloads, so every agent row runs the same model on both
//! sides. It records nothing (a recording fake would clone every input, which LangGraph's does not).

use std::borrow::Cow;

use async_trait::async_trait;
use serde_json::json;
use tokio::runtime::Runtime;
use weft_agents::{AgentState, create_react_agent};
use weft_graph::{CompiledGraph, GraphOutput};
use weft_runnable_core::{
    AiMessage, CallOptions, ChatModel, Message, Result, RunnableConfig, ToolCall, ToolExt as _, tool,
};

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

/// LangGraph's side's scripted model (`scripted_agent_model` in `langgraph_bench.py`): while it has seen
/// `k < 10` tool messages, one call `add(a=k, b=1)` with id `call_<k>`; then the final answer. Binding
/// tools changes nothing, as on LangGraph's side.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scripted;

#[async_trait]
impl ChatModel for Scripted {
    fn type_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("ScriptedToolCallingModel")
    }

    fn model_name(&self) -> &str {
        "scripted-fake"
    }

    fn provider(&self) -> &str {
        "fake"
    }

    async fn generate(
        &self,
        messages: Vec<Message>,
        _: &CallOptions,
        _: &RunnableConfig,
    ) -> Result<AiMessage> {
        let k = messages.iter().filter(|m| m.as_tool().is_some()).count();
        if k < ROUNDS {
            let call =
                ToolCall { name: "add".into(), args: json!({"a": k, "b": 1}), id: Some(format!("call_{k}")) };
            return Ok(AiMessage { tool_calls: vec![call], ..AiMessage::default() });
        }
        Ok(AiMessage::new(format!("final answer after {k} tool calls")))
    }
}

weft_runnable_core::impl_chat_model_runnable!(Scripted);

/// Checks an agent's conversation: the human message, ten calls of `add` answered "1" to "10", then the
/// final answer (22 messages).
pub(crate) fn check_conversation(messages: &[Message]) -> std::result::Result<(), String> {
    ensure(messages.len() == 2 * ROUNDS + 2, || format!("{} messages, expected 22", messages.len()))?;
    let results: Vec<String> =
        messages.iter().filter_map(Message::as_tool).map(|m| m.content.text()).collect();
    let expected: Vec<String> = (1..=ROUNDS).map(|k| k.to_string()).collect();
    ensure(results == expected, || format!("tool results {results:?}, expected \"1\" .. \"10\""))?;
    let last = messages.last().and_then(Message::as_ai);
    ensure(last.is_some_and(|m| m.text() == FINAL && m.tool_calls.is_empty()), || {
        format!("the last message is {:?}, expected the final answer", messages.last())
    })
}

struct React {
    graph: CompiledGraph<AgentState>,
}

impl Workload for React {
    type Ctx = ();
    type Out = GraphOutput<AgentState>;

    fn prepare(&mut self, _: &Runtime) -> std::result::Result<(), String> {
        Ok(())
    }

    async fn op(&self, (): &mut ()) -> std::result::Result<Self::Out, String> {
        let input = AgentState::update().messages(vec![Message::human("please add some numbers")]);
        self.graph.invoke(input, &RunnableConfig::default()).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, (): &()) -> std::result::Result<(), String> {
        check_conversation(&out.value.messages)
    }
}

/// `react10`: one invoke of the prebuilt agent from a human message; 11 model calls, 10 tool calls.
pub(crate) fn react10(opts: &Options) -> std::result::Result<Line, String> {
    let info = Info::steps("react10", ROUNDS as u64).unit("tool round (model call + tool call)");
    let build = |()| {
        let graph = create_react_agent(Scripted, [add.shared()]).build().map_err(err)?;
        Ok(React { graph })
    };
    measure(opts, info, Threads::One, |_| Ok(()), build)
}
