//! `create_agent` against LangChain 1.5's: `create_agent10` (no middleware) and
//! `create_agent10_hitl_summarization` (human review of a tool the model never calls and summarization
//! that never triggers: both hooks run every round), ten tool rounds then a final answer over a scripted
//! model; and `create_agent_build`, the agent with both middleware built and compiled.
//!
//! The model answers as LangChain's side does: while it has seen `k < 10` tool messages, one call
//! `add(a=k, b=1)` with id `call_<k>`; then the final answer. It records nothing (a recording fake would
//! clone every input).

use std::borrow::Cow;

use async_trait::async_trait;
use serde_json::json;
use tokio::runtime::Runtime;
use weft_agents::agent::AgentState;
use weft_agents::create_agent;
use weft_agents::middleware::{ContextSize, HumanInTheLoop, Summarization};
use weft_graph::{CompiledGraph, GraphOutput};
use weft_runnable_core::{
    AiMessage, CallOptions, ChatModel, Message, Result, RunnableConfig, SharedTool, ToolCall, ToolExt as _,
    tool,
};

use super::react::{FINAL, ROUNDS, add};
use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure};

/// Send an email.
#[tool]
fn send_email(
    /// The address.
    to: String,
) -> String {
    format!("sent to {to}")
}

/// LangChain's side's scripted model: its answer depends only on how many tool messages it was sent.
#[derive(Debug, Clone, Copy)]
struct Scripted;

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

/// The agent: bare, or with human review of `send_email` and summarization past 100,000 tokens.
fn agent(middleware: bool) -> std::result::Result<CompiledGraph<AgentState>, String> {
    let tools: Vec<SharedTool> = vec![add.shared(), send_email.shared()];
    let mut builder = create_agent(Scripted, tools);
    if middleware {
        let summarization =
            Summarization::new(Scripted).trigger([ContextSize::Tokens(100_000)]).map_err(err)?;
        builder = builder.middleware(HumanInTheLoop::new().review("send_email")).middleware(summarization);
    }
    builder.build().map_err(err)
}

struct Loop {
    graph: CompiledGraph<AgentState>,
}

impl Workload for Loop {
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
        let messages = out.value.messages();
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
}

fn rounds(opts: &Options, name: &'static str, middleware: bool) -> std::result::Result<Line, String> {
    let info = Info::steps(name, ROUNDS as u64).unit("tool round (model call + tool call)");
    measure(opts, info, Threads::One, |_| Ok(()), |()| Ok(Loop { graph: agent(middleware)? }))
}

/// `create_agent10`: one invoke of the agent without middleware; 11 model calls, 10 tool calls.
pub(crate) fn create_agent10(opts: &Options) -> std::result::Result<Line, String> {
    rounds(opts, "create_agent10", false)
}

/// `create_agent10_hitl_summarization`: the same with human review and summarization.
pub(crate) fn create_agent10_hitl_summarization(opts: &Options) -> std::result::Result<Line, String> {
    rounds(opts, "create_agent10_hitl_summarization", true)
}

struct Build;

impl Workload for Build {
    type Ctx = ();
    type Out = CompiledGraph<AgentState>;

    fn prepare(&mut self, _: &Runtime) -> std::result::Result<(), String> {
        Ok(())
    }

    async fn op(&self, (): &mut ()) -> std::result::Result<Self::Out, String> {
        agent(true)
    }

    fn check(&self, out: &Self::Out, (): &()) -> std::result::Result<(), String> {
        let drawing = out.get_graph().draw_mermaid();
        ensure(drawing.contains("HumanInTheLoopMiddleware.after_model"), || "no review node".to_owned())?;
        ensure(drawing.contains("SummarizationMiddleware.before_model"), || {
            "no summarization node".to_owned()
        })
    }
}

/// `create_agent_build`: building and compiling the agent with human review and summarization.
pub(crate) fn create_agent_build(opts: &Options) -> std::result::Result<Line, String> {
    let info = Info::steps("create_agent_build", 1).unit("agent built and compiled");
    measure(opts, info, Threads::One, |_| Ok(()), |()| Ok(Build))
}
