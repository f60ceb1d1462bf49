//! A ReAct run survives the death of its process: a child process runs the agent on SQLite and is killed
//! with SIGKILL while a tool is running; this process opens the same file with a new saver, builds a new
//! graph and resumes the thread. The model's finished step is not asked again, and the tool call whose
//! result was saved before the kill does not run again.
//!
//! The child is this test binary run again with `WEFT_AGENTS_RESTART_CHILD` set, running the ignored test
//! `restart_child_process`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{call, kinds, texts, thread};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_agents::{AgentState, create_react_agent};
use weft_graph::checkpoint::CheckpointConfig;
use weft_graph::{Checkpointer, CompiledGraph, GraphInput};
use weft_integrations::sqlite::SqliteSaver;
use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
use weft_runnable_core::{Message, SharedTool, StructuredTool, ToolExt};

const CHILD_ENV: &str = "WEFT_AGENTS_RESTART_CHILD";
const THREAD: &str = "restart";

#[derive(Debug, Serialize, Deserialize)]
struct Job {
    db: PathBuf,
    side: PathBuf,
}

fn record(side: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(side).unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

fn lines(side: &Path) -> Vec<String> {
    std::fs::read_to_string(side).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// `quick` records its run and returns; `slow` records its start and, when `hang` is set, never returns.
fn tools(side: &Path, hang: bool) -> Vec<SharedTool> {
    let (a, b) = (side.to_owned(), side.to_owned());
    let quick =
        StructuredTool::from_fn("quick", "Quick.", json!({"type": "object"}), move |_args: Value, _ctx| {
            let side = a.clone();
            async move {
                record(&side, "quick ran");
                Ok("quick result")
            }
        });
    let slow =
        StructuredTool::from_fn("slow", "Slow.", json!({"type": "object"}), move |_args: Value, _ctx| {
            let side = b.clone();
            async move {
                record(&side, "slow started");
                if hang {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Ok("slow result")
            }
        });
    vec![quick.shared(), slow.shared()]
}

fn agent(
    model: FakeChatModel,
    tools: Vec<SharedTool>,
    saver: Arc<dyn Checkpointer>,
) -> CompiledGraph<AgentState> {
    create_react_agent(model, tools).checkpointer(saver).build().unwrap()
}

/// The child's work: ask, and hang in `slow` until killed.
#[tokio::test]
#[ignore = "the child process of the restart test; runs only with WEFT_AGENTS_RESTART_CHILD set"]
async fn restart_child_process() {
    let Ok(job) = std::env::var(CHILD_ENV) else { return };
    let job: Job = serde_json::from_str(&job).unwrap();
    let model = FakeChatModel::new([FakeReply::tool_calls([
        call("quick", json!({}), "c1"),
        call("slow", json!({}), "c2"),
    ])]);
    let saver = Arc::new(SqliteSaver::open(&job.db).await.unwrap());
    let input = AgentState::update().messages(vec![Message::human("work")]);
    agent(model, tools(&job.side, true), saver).invoke(input, &thread(THREAD)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_react_run_killed_mid_way_resumes_in_a_new_process() {
    let dir = std::env::temp_dir().join(format!("weft-agents-restart-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let job = Job { db: dir.join("agent.db"), side: dir.join("side.log") };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "restart_child_process", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, serde_json::to_string(&job).unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(lines(&job.side).contains(&"quick ran".to_owned())
        && lines(&job.side).contains(&"slow started".to_owned()))
    {
        assert!(child.try_wait().unwrap().is_none(), "the child ended before its tools ran");
        assert!(started.elapsed() < Duration::from_secs(120), "the child made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Give the finished task's write time to reach the file, then kill the child mid-step.
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let saver = Arc::new(SqliteSaver::open(&job.db).await.unwrap());
    let tuple = saver
        .get_tuple(&CheckpointConfig::thread(THREAD))
        .await
        .unwrap()
        .expect("the child saved a checkpoint");
    let quick_saved = tuple.pending_writes.iter().any(|w| w.value.to_string().contains("quick result"));
    assert!(quick_saved, "the finished tool's result was saved before the kill: {:?}", tuple.pending_writes);

    // The new process: a new graph whose model only has the final answer left, and a `slow` that returns.
    let model = FakeChatModel::new(["both done"]);
    let app = agent(model.clone(), tools(&job.side, false), saver);
    let paused = app.get_state(&thread(THREAD)).await.unwrap();
    assert_eq!(paused.next, ["tools"], "only the killed call's task is left to run");
    let out = app.invoke(GraphInput::Resume, &thread(THREAD)).await.unwrap();
    assert_eq!(kinds(&out.value.messages), ["human", "ai", "tool", "tool", "ai"]);
    assert_eq!(texts(&out.value.messages[2..]), ["quick result", "slow result", "both done"]);
    assert_eq!(model.calls().len(), 1, "the model's answered step was not run again");
    assert_eq!(kinds(&model.calls()[0].messages), ["human", "ai", "tool", "tool"]);
    let runs = lines(&job.side);
    assert_eq!(
        runs.iter().filter(|l| *l == "quick ran").count(),
        1,
        "a saved tool call does not run again: {runs:?}"
    );
    assert_eq!(
        runs.iter().filter(|l| *l == "slow started").count(),
        2,
        "the killed call runs again: {runs:?}"
    );
}
