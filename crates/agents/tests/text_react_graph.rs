//! The text ReAct loop as graph nodes: its run lives in the graph state, is checkpointed, and resumes in
//! a freshly built graph (as after a restart) without repeating finished calls.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_agents::text_react::{
    AgentAction, AgentExecutor, AgentRun, Next, ToolRun, create_text_react_agent, react_prompt,
};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{CompileConfig, CompiledGraph, END, GraphInput, Runtime, START, State, StateGraph};
use weft_runnable_core::fakes::FakeListLlm;
use weft_runnable_core::{Error, RunnableConfig, StructuredTool, ToolExt};

#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct ReactState {
    run: Option<AgentRun>,
}

/// Where the run goes next: the agent node, the tool node, or the end.
fn route(state: &ReactState) -> &'static str {
    match state.run.as_ref().map(AgentRun::next) {
        Some(Next::CallAgent | Next::CallAgentFinal) => "agent",
        Some(Next::CallTool(_)) => "tool",
        Some(Next::Finish(_)) | None => END,
    }
}

fn executor(model: &FakeListLlm, tool_calls: &Arc<AtomicUsize>) -> Arc<AgentExecutor> {
    let calls = Arc::clone(tool_calls);
    let echo = StructuredTool::from_fn(
        "echo",
        "Echo input.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        move |args, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok(format!("ECHO[{}]", args["q"].as_str().unwrap_or_default())) }
        },
    )
    .shared();
    let tools = vec![echo];
    let agent = create_text_react_agent(model.clone(), &tools, react_prompt().unwrap()).unwrap();
    Arc::new(AgentExecutor::new(agent, tools).unwrap())
}

/// Two nodes that each perform what the run waits for; a human approves tool runs (interrupt before
/// `tool`).
fn graph(executor: Arc<AgentExecutor>, saver: Arc<InMemorySaver>) -> CompiledGraph<ReactState> {
    let mut g = StateGraph::<ReactState>::new();
    for name in ["agent", "tool"] {
        let executor = Arc::clone(&executor);
        g.add_node(name, move |state: ReactState, rt: Runtime| {
            let executor = Arc::clone(&executor);
            async move {
                let mut run = state.run.ok_or_else(|| Error::msg("the state holds no agent run"))?;
                executor.advance(&mut run, rt.config()).await?;
                Ok::<_, Error>(ReactStateUpdate::new().run(run))
            }
        });
    }
    g.add_edge(START, "agent");
    g.add_conditional_edges("agent", route, None);
    g.add_conditional_edges("tool", route, None);
    g.compile_with(CompileConfig::new().checkpointer(saver).interrupt_before(["tool"])).unwrap()
}

fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", "react-1")
}

#[tokio::test]
async fn the_loop_runs_as_nodes_and_resumes_from_its_checkpoint_in_a_new_graph() {
    let saver = Arc::new(InMemorySaver::new());
    let model = FakeListLlm::new([
        " I should echo.\nAction: echo\nAction Input: hello",
        " Done.\nFinal Answer: ECHO[hello]",
    ]);
    let tool_calls = Arc::new(AtomicUsize::new(0));

    let first = executor(&model, &tool_calls);
    let app = graph(Arc::clone(&first), Arc::clone(&saver));
    let start = first.start(json!({"input": "say hello"})).unwrap();
    let out = app.invoke(ReactStateUpdate::new().run(start), &thread()).await.unwrap();
    assert_eq!(app.get_state(&thread()).await.unwrap().next, vec!["tool"]);
    let pending = out.value.run.unwrap();
    let log = " I should echo.\nAction: echo\nAction Input: hello";
    assert_eq!(pending.next(), &Next::CallTool(ToolRun::Tool(AgentAction::new("echo", "hello", log))));
    assert_eq!((model.remaining(), tool_calls.load(Ordering::SeqCst)), (1, 0));
    drop(app);
    drop(first);

    // A new executor and a new graph over the same checkpoints: the run is read back from JSON.
    let second = executor(&model, &tool_calls);
    let app = graph(Arc::clone(&second), Arc::clone(&saver));
    let out = app.invoke(GraphInput::Resume, &thread()).await.unwrap();
    let run = out.value.run.unwrap();
    assert_eq!(second.rules().output(&run).unwrap(), json!({"input": "say hello", "output": "ECHO[hello]"}));
    assert_eq!(run.intermediate_steps().len(), 1);
    assert_eq!((model.remaining(), tool_calls.load(Ordering::SeqCst)), (0, 1));
    assert!(model.prompts()[1].ends_with(&format!("{log}\nObservation: ECHO[hello]\nThought: ")));
    assert!(app.get_state(&thread()).await.unwrap().next.is_empty());
}

#[tokio::test]
async fn a_run_stopped_by_its_limit_ends_the_graph() {
    let saver = Arc::new(InMemorySaver::new());
    let model = FakeListLlm::new(vec![" again\nAction: echo\nAction Input: x"; 3]);
    let tool_calls = Arc::new(AtomicUsize::new(0));
    let executor =
        Arc::new(Arc::try_unwrap(executor(&model, &tool_calls)).unwrap().with_max_iterations(Some(2)));
    let app = graph(Arc::clone(&executor), saver);
    let start = executor.start(json!({"input": "loop"})).unwrap();
    app.invoke(ReactStateUpdate::new().run(start), &thread()).await.unwrap();
    let out = app.invoke(GraphInput::Resume, &thread()).await.unwrap();
    assert!(out.value.run.as_ref().unwrap().finish().is_none(), "the second tool run awaits approval");
    let out = app.invoke(GraphInput::Resume, &thread()).await.unwrap();
    let run = out.value.run.unwrap();
    assert_eq!(run.finish().unwrap().output(), Some("Agent stopped due to iteration limit or time limit."));
    assert_eq!((run.iterations(), tool_calls.load(Ordering::SeqCst), model.remaining()), (2, 2, 1));
}
