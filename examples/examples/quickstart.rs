//! Quickstart: a tool-calling agent that saves its threads in SQLite and asks a human before it acts.
//!
//! `create_agent` builds LangChain 1.x's agent: `model` calls the chat model with the tools bound; while
//! the reply asks for tools, `tools` runs them (one task per call) and hands the results back to `model`.
//! Middleware hooks into that loop; here `HumanInTheLoop` reviews the calls of `book_table`. It also
//!
//! - saves every step of a thread to a SQLite file (`SqliteSaver`), so a thread can be resumed later, by
//!   another process if need be;
//! - pauses after the model asks for `book_table`: the run stops with LangChain's `HITLRequest` (what
//!   Agent Chat UI shows), a human decides (approve, edit the arguments, reject, or respond in the tool's
//!   place), and the run resumes with `{"decisions": [...]}`;
//! - streams what happens: each node's update as it finishes, and the model's tokens as they come.
//!
//! ```text
//! START → model → HumanInTheLoopMiddleware.after_model ─tool calls─→ tools ─┐
//!           ↑          (pauses for book_table)  └─answer─→ END              │
//!           └──────────────────────────────────────────────────────────────┘
//! ```
//!
//! At the end it prints the thread's history, one checkpoint per step. The model comes from
//! [`weft_examples::Models`]: scripted (no API key or server needed), with exact checks of every step; on a
//! live model only the protocol is checked (the run pauses only for `book_table`, and ends on an answer).
//!
//! Run it from the repository root: `cargo run --example quickstart`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::json;
use weft::agents::agent::AgentState;
use weft::agents::create_agent;
use weft::agents::middleware::{Decision, HitlResponse, HumanInTheLoop};
use weft::graph::{CompiledGraph, IntoGraphInput, ListOptions};
use weft::messages::UsageMetadata;
use weft::prelude::{
    AiMessage, Command, Error, Message, RunnableConfig, StreamData, StreamMode, ToolCall, ToolExt as _, tool,
};
use weft::sqlite::SqliteSaver;
use weft_examples::{ExampleModel, Models};

/// Returns tonight's weather in a city.
#[tool]
fn get_weather(
    /// The city.
    city: String,
) -> String {
    // A stand-in for a weather service.
    format!("{city} tonight: 24°C, clear sky")
}

/// Books a table at a restaurant.
#[tool]
fn book_table(
    /// The restaurant.
    restaurant: String,
    /// How many people.
    people: u32,
    /// The time, as HH:MM.
    time: String,
) -> String {
    // A stand-in for a booking service: this is the call a human must approve.
    format!("Booked a table for {people} at {restaurant} at {time}.")
}

const ANSWER: &str =
    "It is 24°C and clear in Lisbon tonight: your table for 2 at Casa Azul is booked for 20:00.";

/// The name of the review's node, where the run pauses.
const REVIEW: &str = "HumanInTheLoopMiddleware.after_model";

/// The agent, its checkpoints in the SQLite file `db`.
async fn agent(model: ExampleModel, db: &Path) -> weft::Result<CompiledGraph<AgentState>> {
    let saver = SqliteSaver::open(db).await.map_err(Error::custom)?;
    let agent = create_agent(model, [get_weather.shared(), book_table.shared()])
        .system_prompt("You help plan evenings out. Check the weather before booking a terrace.")
        .middleware(HumanInTheLoop::new().review("book_table"))
        .checkpointer(Arc::new(saver))
        .build()
        .map_err(Error::custom)?;
    Ok(agent)
}

/// One call waiting for review, as the `HITLRequest` lists it.
#[derive(Debug, Deserialize)]
struct ActionRequest {
    name: String,
    args: serde_json::Value,
}

/// What the run paused on: LangChain's `HITLRequest` (its `review_configs` are not needed here).
#[derive(Debug, Deserialize)]
struct Review {
    action_requests: Vec<ActionRequest>,
}

/// What a streamed run did.
#[derive(Debug, Default)]
struct Run {
    /// The nodes that ran, in order.
    steps: Vec<String>,
    /// The model's streamed text, a line per model call.
    tokens: String,
    /// Where the run paused for review, if it did.
    approval: Option<Review>,
}

/// Runs (or resumes) the thread, printing node updates and model tokens as they come.
async fn stream(
    agent: &CompiledGraph<AgentState>,
    input: impl IntoGraphInput<AgentState>,
    thread: &RunnableConfig,
) -> weft::Result<Run> {
    let mut run = Run::default();
    let mut parts = agent.stream(input, thread, &[StreamMode::Updates, StreamMode::Messages]);
    while let Some(part) = parts.next().await {
        match part?.data {
            // `messages` mode: the model's tokens as they come, with the node that called it.
            StreamData::Message { chunk, metadata }
                if metadata["langgraph_node"] == "model" && !chunk.text().is_empty() =>
            {
                if run.tokens.is_empty() || run.tokens.ends_with('\n') {
                    print!("  tokens: ");
                }
                print!("{}", chunk.text());
                std::io::stdout().flush().map_err(Error::custom)?;
                run.tokens.push_str(&chunk.text());
            }
            // `updates` mode: what each node wrote, when it finished.
            StreamData::Updates { node, updates, .. } => {
                if !run.tokens.is_empty() && !run.tokens.ends_with('\n') {
                    println!();
                    run.tokens.push('\n');
                }
                for message in updates.iter().flat_map(|u| u.written_messages().unwrap_or_default()) {
                    println!("  [{node}] {}", line(message));
                }
                run.steps.push(node);
            }
            StreamData::Interrupt(interrupts) => {
                for interrupt in interrupts {
                    println!("  [paused] waiting for a human's review");
                    run.approval = Some(serde_json::from_value(interrupt.value)?);
                }
            }
            _ => {}
        }
    }
    Ok(run)
}

/// How many times the human reviews bookings before leaving the thread paused.
const MAX_REVIEWS: usize = 3;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

async fn example() -> weft::Result<()> {
    // The model's script: check the weather, ask to book, then answer.
    let models = Models::from_env();
    // With WEFT_OTEL_ENDPOINT set, the run's traces go to that OpenTelemetry backend (docs/observability.md).
    let _traces = weft_examples::otel_from_env().map_err(Error::custom)?;
    // Scripted replies report token usage, as a provider's do.
    let usage = |input, output| {
        Some(UsageMetadata {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            ..Default::default()
        })
    };
    let asks = |text: &str, name: &str, args, id: &str, tokens: (u64, u64)| AiMessage {
        tool_calls: vec![ToolCall { name: name.into(), args, id: Some(id.into()) }],
        usage_metadata: usage(tokens.0, tokens.1),
        ..AiMessage::new(text)
    };
    let booking = json!({"restaurant": "Casa Azul", "people": 2, "time": "20:00"});
    let model = models.chat_model(
        "agent",
        [
            asks("Checking the weather.", "get_weather", json!({"city": "Lisbon"}), "call-1", (112, 9)),
            asks("Clear and warm: booking the terrace.", "book_table", booking, "call-2", (151, 14)),
            AiMessage { usage_metadata: usage(187, 26), ..AiMessage::new(ANSWER) },
        ],
    );

    // Checkpoints go to a SQLite file; each run of this program starts a new one.
    let dir = TempDir(std::env::temp_dir().join(format!("weft-quickstart-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).map_err(Error::custom)?;
    let db = dir.0.join("threads.db");
    println!("checkpoints: {}", db.display());
    // A step budget per run, so that a live model that keeps calling tools cannot loop for long.
    let thread =
        RunnableConfig::default().with_configurable("thread_id", "evening-1").with_recursion_limit(24);

    // Run 1: the agent checks the weather (no review needed), then asks to book, and pauses.
    let question = "Is it warm in Lisbon tonight? If so, book a terrace table for 2 at Casa Azul at 20:00.";
    println!("user: {question}");
    let first = agent(model.clone(), &db).await?;
    let input = AgentState::update().messages(vec![Message::human(question)]);
    let mut run = stream(&first, input, &thread).await?;
    models.expect_eq("the first run's steps", &run.steps, &["model", REVIEW, "tools", "model"]);
    models.expect_eq(
        "the tokens",
        run.tokens.as_str(),
        "Checking the weather.\nClear and warm: booking the terrace.\n",
    );
    models.expect_eq("the run paused", run.approval.is_some(), true);
    drop(first);

    // The pause is saved in the file: a new agent on a new connection resumes the thread, as a restarted
    // process would. A human reviews each pending call; here they approve. `Decision::Edit` would run
    // another call, `Decision::Reject` would tell the model why not, `Decision::Respond` would answer in
    // the tool's place.
    let agent = agent(model, &db).await?;
    let mut pauses = 0;
    while let Some(request) = run.approval.take() {
        pauses += 1;
        if pauses > MAX_REVIEWS {
            // Only a live model gets here: it keeps asking to book although it was told not to.
            println!("the model asked {MAX_REVIEWS} times; the thread stays paused for a later review");
            run.approval = Some(request);
            break;
        }
        let mut decisions = Vec::new();
        for call in &request.action_requests {
            assert_eq!(call.name, "book_table", "only bookings wait for approval");
            // The first booking is approved; asking again is refused, with the reason sent to the model.
            if pauses == 1 {
                println!("approve? {}({}): yes", call.name, call.args);
                decisions.push(Decision::Approve);
            } else {
                println!("approve? {}({}): no, already booked", call.name, call.args);
                let why = "The table is already booked: do not book again.".to_owned();
                decisions.push(Decision::Reject { message: Some(why) });
            }
        }
        let answer = serde_json::to_value(HitlResponse { decisions })?;
        run = stream(&agent, Command::<AgentState>::resume(answer), &thread).await?;
    }
    models.expect_eq("the pauses", pauses, 1);
    models.expect_eq("the resumed run's steps", &run.steps, &[REVIEW, "tools", "model", REVIEW]);

    // Any model: the thread ends on an answer with nothing left to run, unless a live model used up
    // the reviews and the thread waits for a human.
    let state = agent.get_state(&thread).await?;
    let answer = state.values.messages().last().and_then(Message::as_ai).cloned().unwrap_or_default();
    if run.approval.is_none() {
        assert!(state.next.is_empty() && answer.tool_calls.is_empty(), "the run is over");
        assert!(!answer.text().trim().is_empty(), "the agent answered");
        println!("answer: {}", answer.text());
    } else {
        assert_eq!(state.next, [REVIEW], "the thread waits for a review");
    }
    models.expect_eq("the answer", answer.text(), ANSWER);
    let results: Vec<String> =
        state.values.messages().iter().filter_map(|m| Some(m.as_tool()?.content.text())).collect();
    models.expect_eq(
        "the tool results",
        &results,
        &["Lisbon tonight: 24°C, clear sky", "Booked a table for 2 at Casa Azul at 20:00."],
    );

    // The thread's history, newest first: a checkpoint per step (the run paused at step 4's checkpoint,
    // where the review waited).
    println!("history (step, source, next):");
    let history = agent.get_state_history(&thread, ListOptions::default()).await?;
    let mut steps = Vec::new();
    for snapshot in &history {
        let Some(meta) = &snapshot.metadata else { continue };
        println!("  {:>2}  {:<5} {:?}", meta.step, json!(meta.source).as_str().unwrap_or("?"), snapshot.next);
        steps.push(meta.step);
    }
    assert_eq!(steps.last(), Some(&-1), "the history starts with the input");
    models.expect_eq("the history's steps", &steps, &(-1..=8).rev().collect::<Vec<i64>>());

    println!("quickstart: all checks passed");
    Ok(())
}

/// A folder removed when dropped, whether the checks pass or not.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a folder left behind in the temp dir harms nothing.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One line for a message: what it says, or which tools it calls.
fn line(message: &Message) -> String {
    match message {
        Message::Ai(ai) if !ai.tool_calls.is_empty() => {
            let calls: Vec<String> =
                ai.tool_calls.iter().map(|c| format!("{}({})", c.name, c.args)).collect();
            let said = if ai.text().is_empty() { String::new() } else { format!("{} — ", ai.text()) };
            format!("{said}calls {}", calls.join(", "))
        }
        Message::Tool(tool) => {
            format!("{} → {}", tool.name.as_deref().unwrap_or("tool"), tool.content.text())
        }
        other => other.text(),
    }
}
