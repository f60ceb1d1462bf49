//! The functional API: LangGraph's essay workflow with a human review, written with `entrypoint` and
//! `task` instead of a graph of nodes.
//!
//! This is the workflow of LangGraph's functional-API guide (`@task write_essay`, `@entrypoint workflow`
//! with `interrupt` for approval), written with weft's `#[task]` and `#[entrypoint]`, with the essay
//! written as three sections in parallel tasks:
//!
//! ```text
//! workflow(topic) ─→ write_section × 3 (together) ─→ interrupt: approve? ─→ { essay, approved }
//! ```
//!
//! The checkpoints go to a SQLite file. The first run writes the sections and pauses for the review; the
//! program then drops the workflow and, as a restarted process would, opens the file again and resumes
//! the thread with the reviewer's answer. The entrypoint runs again from the top, but the sections come
//! back from the checkpoint: `write_section` ran three times in all. A second essay on the same thread
//! gets the first one's result as `previous`.
//!
//! Run it from the repository root: `cargo run --example functional`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft::graph::func::{FuncState, entrypoint, task};
use weft::graph::{CompiledGraph, StreamData};
use weft::prelude::*;
use weft::sqlite::SqliteSaver;

/// What the workflow returns: the essay and the reviewer's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Reviewed {
    essay: String,
    approved: bool,
    /// How many essays the thread has had reviewed, this one included.
    essays: u32,
}

/// The parts of an essay, each written by its own task.
const SECTIONS: [&str; 3] = ["introduction", "body", "conclusion"];

/// Writes one section of an essay (a model call in a real program; slow, so worth saving). `#[task]`
/// makes it a task: called inside the entrypoint, it returns a future of its result, which the run saves.
#[task]
async fn write_section(topic: String, section: String) -> weft::Result<String> {
    SECTIONS_WRITTEN.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(format!("The {section} of an essay about {topic}."))
}

/// How many sections `write_section` has written in this process.
static SECTIONS_WRITTEN: AtomicUsize = AtomicUsize::new(0);

/// The workflow: three sections written together, then a review. `#[entrypoint]` makes `workflow()` its
/// graph, to compile; `previous` is what the thread's last run returned.
#[entrypoint]
async fn workflow(topic: String, previous: Option<Reviewed>, rt: Runtime) -> weft::Result<Reviewed> {
    // The three calls run together; a resumed run gets their saved results back.
    let calls = SECTIONS.iter().map(|section| write_section(topic.clone(), (*section).to_owned()));
    let essay = futures::future::try_join_all(calls).await?.join(" ");
    let approved: bool =
        rt.interrupt(json!({"essay": essay, "action": "Please approve or reject the essay"}))?;
    let essays = previous.map_or(1, |p| p.essays + 1);
    Ok(Reviewed { essay, approved, essays })
}

/// The workflow compiled with its checkpoints in the SQLite file `db`.
async fn open(db: &Path) -> weft::Result<CompiledGraph<FuncState<String, Reviewed>>> {
    let saver = SqliteSaver::open(db).await.map_err(Error::custom)?;
    workflow().compile_with(CompileConfig::new().checkpointer(Arc::new(saver))).map_err(Error::custom)
}

/// Streams one run in `updates` mode, printing each chunk; returns the question of the interrupt, if it
/// paused.
async fn run(
    app: &CompiledGraph<FuncState<String, Reviewed>>,
    input: impl weft::graph::compiled::IntoGraphInput<FuncState<String, Reviewed>>,
    thread: &RunnableConfig,
) -> weft::Result<(Vec<String>, Option<serde_json::Value>)> {
    let mut chunks = Vec::new();
    let mut question = None;
    let mut parts = app.stream(input, thread, &[StreamMode::Updates]);
    while let Some(part) = parts.next().await {
        match part?.data {
            StreamData::Returned { node, value } => {
                println!("  {node}: {value}");
                chunks.push(node);
            }
            StreamData::Interrupt(list) => {
                println!("  paused: {}", list[0].value);
                chunks.push("__interrupt__".to_owned());
                question = Some(list[0].value.clone());
            }
            _ => {}
        }
    }
    Ok((chunks, question))
}

fn check<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> weft::Result<()> {
    if got == want { Ok(()) } else { Err(Error::msg(format!("{what}: got {got:?}, expected {want:?}"))) }
}

#[tokio::main]
async fn main() -> weft::Result<()> {
    let dir = TempDir(std::env::temp_dir().join(format!("weft-functional-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).map_err(Error::custom)?;
    let db = dir.0.join("threads.db");
    println!("checkpoints: {}", db.display());
    let thread = RunnableConfig::default().with_configurable("thread_id", "essay-1");

    // Run 1: the sections are written, then the workflow pauses for the review.
    println!("run 1: an essay about cats");
    let app = open(&db).await?;
    let (chunks, question) = run(&app, "cats".to_owned(), &thread).await?;
    check(
        "run 1's chunks",
        chunks,
        ["write_section", "write_section", "write_section", "__interrupt__"].map(String::from).to_vec(),
    )?;
    let essay = "The introduction of an essay about cats. The body of an essay about cats. \
                 The conclusion of an essay about cats.";
    check(
        "the question",
        question,
        Some(json!({"essay": essay, "action": "Please approve or reject the essay"})),
    )?;
    let snapshot = app.get_state(&thread).await?;
    check("the paused thread's next", snapshot.next.clone(), vec!["workflow".to_owned()])?;
    check("the paused thread's value", snapshot.values.value().cloned(), None)?;
    drop(app);

    // Later, in a new workflow on the same file: the reviewer approves, the thread resumes.
    println!("run 2: the reviewer approves");
    let app = open(&db).await?;
    let (chunks, _) = run(&app, Command::resume(true), &thread).await?;
    check("run 2's chunks", chunks, vec!["workflow".to_owned()])?;
    check("the sections written", SECTIONS_WRITTEN.load(Ordering::SeqCst), 3)?;
    let done = app.get_state(&thread).await?.values.into_value();
    let first = Reviewed { essay: essay.to_owned(), approved: true, essays: 1 };
    check("the result", done, Some(first))?;

    // A second essay on the thread: `previous` is the first one's result.
    println!("run 3: an essay about dogs, rejected");
    let paused = app.invoke("dogs".to_owned(), &thread).await?;
    check("run 3 paused", paused.interrupts.len(), 1)?;
    let out = app.invoke(Command::resume(false), &thread).await?;
    let second = out.value.into_value().ok_or_else(|| Error::msg("run 3 returned nothing"))?;
    check("the second essay's count", (second.approved, second.essays), (false, 2))?;
    check("the sections written", SECTIONS_WRITTEN.load(Ordering::SeqCst), 6)?;
    println!(
        "done: {} essays reviewed, {} sections written",
        second.essays,
        SECTIONS_WRITTEN.load(Ordering::SeqCst)
    );
    Ok(())
}

/// A folder removed when the program ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a folder left behind in the temp dir harms nothing.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
