//! The growing message list: messages1000, its scales, and messages1000_memory (with the in-memory
//! checkpointer).

use std::sync::Arc;

use tokio::runtime::Runtime;
use weft_graph::{CompileConfig, CompiledGraph, GraphOutput, InMemorySaver};
use weft_runnable_core::RunnableConfig;

use super::checkpoint::{ThreadIds, census};
use crate::graphs::{self, ChatState, Probe};
use crate::measure::{Info, Line, Options, Threads, Workload, err, measure, step_profile};

/// One invoke of the message loop from `{messages: []}`, optionally on a thread of a checkpointer.
struct MessageLoop {
    graph: CompiledGraph<ChatState>,
    limit: usize,
    recursion_limit: u32,
    /// The checkpointer and its thread ids, for messages1000_memory.
    saver: Option<(Arc<InMemorySaver>, ThreadIds)>,
    /// Whether to attach the step profile.
    profile: bool,
}

impl MessageLoop {
    fn config(&mut self) -> RunnableConfig {
        let config = RunnableConfig::default().with_recursion_limit(self.recursion_limit);
        match &mut self.saver {
            Some((_, threads)) => threads.next(config),
            None => config,
        }
    }

    fn compile(&self, probe: Option<Probe>) -> Result<CompiledGraph<ChatState>, String> {
        let mut compile = CompileConfig::new();
        if let Some((saver, _)) = &self.saver {
            compile = compile.checkpointer(saver.clone());
        }
        graphs::message_loop(self.limit, probe).compile_with(compile).map_err(err)
    }
}

impl Workload for MessageLoop {
    type Ctx = RunnableConfig;
    type Out = GraphOutput<ChatState>;

    /// A fresh thread id; with a checkpointer, the previous thread is deleted first (LangGraph's run
    /// empties the saver before each repeat).
    fn prepare(&mut self, rt: &Runtime) -> Result<RunnableConfig, String> {
        if let Some((saver, threads)) = &mut self.saver {
            threads.delete_previous(saver.as_ref(), rt)?;
        }
        Ok(self.config())
    }

    async fn op(&self, config: &mut RunnableConfig) -> Result<Self::Out, String> {
        self.graph.invoke(ChatState::update().messages(Vec::new()), config).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, _: &RunnableConfig) -> Result<(), String> {
        graphs::check_messages(&out.value.messages, self.limit)
    }

    fn extra(&mut self, rt: &Runtime, opts: &Options) -> Result<Line, String> {
        let mut line = Line::new();
        if self.saver.is_some() {
            line.insert("durability".into(), "async (default)".into());
        }
        if let Some(saver) = self.saver.as_ref().map(|(saver, _)| saver.clone()).filter(|_| !opts.quick) {
            // Like every op, the census run starts with the previous thread deleted.
            let (limit, config) = (self.limit, self.prepare(rt)?);
            line.extend(census(saver, rt, move |checkpointer| async move {
                let graph = graphs::message_loop(limit, None)
                    .compile_with(CompileConfig::new().checkpointer(checkpointer))
                    .map_err(err)?;
                graph.invoke(ChatState::update().messages(Vec::new()), &config).await.map(drop).map_err(err)
            })?);
        }
        if self.profile && !opts.quick {
            let probe = Probe::default();
            let graph = self.compile(Some(probe.clone()))?;
            let mut runs = Vec::new();
            for _ in 0..3 {
                let config = self.prepare(rt)?;
                rt.block_on(graph.invoke(ChatState::update().messages(Vec::new()), &config)).map_err(err)?;
                runs.push(graphs::take(&probe));
            }
            line.insert("us_per_step_at_step".into(), step_profile(&runs, &[100, 500, 900]));
        }
        Ok(line)
    }
}

fn run(
    opts: &Options,
    info: Info,
    limit: usize,
    recursion_limit: u32,
    memory: bool,
    profile: bool,
) -> Result<Line, String> {
    measure(
        opts,
        info,
        Threads::One,
        |_| Ok(memory.then(|| Arc::new(InMemorySaver::new()))),
        |saver| {
            let mut compile = CompileConfig::new();
            if let Some(saver) = &saver {
                compile = compile.checkpointer(saver.clone());
            }
            Ok(MessageLoop {
                graph: graphs::message_loop(limit, None).compile_with(compile).map_err(err)?,
                limit,
                recursion_limit,
                saver: saver.map(|saver| (saver, ThreadIds::default())),
                profile,
            })
        },
    )
}

/// `messages1000`: 1000 steps, each appending one AI message through `add_messages`.
pub(crate) fn messages1000(opts: &Options) -> Result<Line, String> {
    run(opts, Info::steps("messages1000", 1000), 1000, 2000, false, true)
}

/// `messages_scale_<n>`: the message loop to `n` messages (recursion limit 2n + 10).
pub(crate) fn messages_scale(opts: &Options, info: Info, n: usize) -> Result<Line, String> {
    run(opts, info, n, u32::try_from(2 * n + 10).unwrap_or(u32::MAX), false, false)
}

/// `messages1000_memory`: messages1000 with the in-memory checkpointer (durability `async`).
pub(crate) fn messages1000_memory(opts: &Options) -> Result<Line, String> {
    run(opts, Info::steps("messages1000_memory", 1000).supplementary(), 1000, 2000, true, true)
}
