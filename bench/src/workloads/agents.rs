//! `create_agent` against LangChain 1.5's: `create_agent10` (no middleware) and
//! `create_agent10_hitl_summarization` (human review of a tool the model never calls and summarization
//! that never triggers: both hooks run every round), ten tool rounds then a final answer over a scripted
//! model; and `create_agent_build`, the agent with both middleware built and compiled.
//!
//! The model is react10's [`Scripted`], which answers as LangChain's side's scripted model does.

use tokio::runtime::Runtime;
use weft_agents::agent::AgentState;
use weft_agents::create_agent;
use weft_agents::middleware::{ContextSize, HumanInTheLoop, Summarization};
use weft_graph::{CompiledGraph, GraphOutput};
use weft_runnable_core::{Message, RunnableConfig, SharedTool, ToolExt as _, tool};

use super::react::{ROUNDS, Scripted, add, check_conversation};
use serde_json::json;

use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure, secs};
use crate::procfs;

/// Send an email.
#[tool]
fn send_email(
    /// The address.
    to: String,
) -> String {
    format!("sent to {to}")
}

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
        check_conversation(out.value.messages())
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

/// Agents `create_agent_memory` builds and keeps.
const KEPT_AGENTS: usize = 100;

/// `create_agent_memory`: the memory one built agent (with both middleware) holds: the growth of the
/// process's resident set over 100 agents built and kept, divided by 100 (5 in a quick run). The build
/// time of the 100 is reported beside it.
pub(crate) fn create_agent_memory(opts: &Options) -> std::result::Result<Line, String> {
    let n = if opts.quick { 5 } else { KEPT_AGENTS };
    // One agent first, so that what every agent shares (schemas, interned names) is not counted.
    let first = agent(true)?;
    let before = procfs::rss_kib().ok_or("no VmRSS in /proc/self/status")?;
    let started = std::time::Instant::now();
    let kept = (0..n).map(|_| agent(true)).collect::<std::result::Result<Vec<_>, String>>()?;
    let took = started.elapsed();
    let after = procfs::rss_kib().ok_or("no VmRSS in /proc/self/status")?;
    ensure(kept.len() == n, || format!("{} agents built, expected {n}", kept.len()))?;
    drop((first, kept));
    let mut line = Line::new();
    line.insert("workload".into(), json!("create_agent_memory"));
    line.insert("value".into(), json!(procfs::round((after - before) * 1024.0 / n as f64, 0)));
    line.insert("value_unit".into(), json!("bytes"));
    line.insert("agents".into(), json!(n));
    line.insert("median_s".into(), secs(took / u32::try_from(n).unwrap_or(1)));
    line.insert("repeats".into(), json!(1));
    line.insert("peak_rss_mb".into(), json!(procfs::peak_rss_mb()));
    line.insert("loadavg_1m_end".into(), json!(procfs::loadavg_1m()));
    line.insert(
        "what".into(),
        json!("growth of VmRSS over agents (create_agent with human review and summarization) built and kept, per agent; median_s: build time per agent"),
    );
    if opts.quick {
        line.insert("quick".into(), json!(true));
    }
    Ok(line)
}
