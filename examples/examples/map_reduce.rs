//! Map-reduce: one model call per item of a list, all at once, then one call that picks from the results.
//!
//! This is LangGraph's map-reduce how-to ("How to create map-reduce branches for parallel execution"):
//!
//! ```text
//! START → generate_topics ──Send per subject──→ generate_joke ×N (in parallel) → best_joke → END
//! ```
//!
//! `generate_topics` asks the model (structured output) for a few subjects related to the topic. A router
//! turns the list into one `Send("generate_joke", JokeTask { subject })` per subject: the **map**. Each
//! packet becomes its own task of `generate_joke` in the same superstep, with the packet as its input
//! instead of the graph state, and the tasks run concurrently. Their writes to `jokes`, an `append`
//! channel, are joined at the end of the step in the order the packets were sent, whatever order the
//! tasks finished in: the **reduce**. `best_joke` then asks the model for the id of the best one.
//!
//! The run is streamed in `tasks` and `updates` modes: the three joke tasks start before any of them
//! finishes, and a probe on the run's events counts how many model calls were in flight at once.
//! The models come from [`weft_examples::Models`]: scripted (each reply takes 50 ms, like a real model),
//! with exact checks; on a live model only the protocol is checked.
//!
//! Run it from the repository root: `cargo run --example map_reduce`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft::EventSink;
use weft::graph::{CompiledGraph, Send};
use weft::prelude::*;
use weft_examples::{ExampleModel, Models, structured};

/// The graph's state. `jokes` is an `append` channel: the joke tasks' writes are joined, not overwritten.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Jokes {
    topic: String,
    subjects: Vec<String>,
    #[state(append)]
    jokes: Vec<String>,
    best: Option<String>,
}

/// The input of one `generate_joke` task: a `Send` packet, not the graph state.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct JokeTask {
    subject: String,
}

/// Subjects related to a topic.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Subjects {
    /// Two to five subjects, each a word or two.
    subjects: Vec<String>,
}

/// A joke.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Joke {
    /// The joke, in one or two sentences.
    joke: String,
}

/// The choice of the best joke.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct BestJoke {
    /// The id (the number in front) of the best joke, counting from 0.
    id: usize,
}

/// What the scripted models say: the subjects, a joke per subject, and the pick.
fn scripts(models: &Models) -> (ExampleModel, ExampleModel, ExampleModel) {
    let subjects = ["penguins", "owls", "parrots"].map(String::from).to_vec();
    let planner = models.chat_model("planner", [structured(&Subjects { subjects })]);
    let jokes = comedian_script().into_iter().map(|joke| structured(&Joke { joke }));
    let comedian = models.chat_model("comedian", jokes);
    let judge = models.chat_model("judge", [structured(&BestJoke { id: 1 })]);
    (planner, comedian, judge)
}

/// The comedian's scripted jokes, one per subject.
fn comedian_script() -> Vec<String> {
    [
        "Penguins wear tuxedos because every day on the ice is a formal occasion.",
        "Owls never finish a conversation: they just keep asking who.",
        "A parrot walks into a bar and orders a cracker. The barman repeats the order.",
    ]
    .map(String::from)
    .to_vec()
}

/// Counts the chat-model runs in flight and remembers the most seen at once.
fn concurrency_probe() -> (EventSink, Arc<AtomicUsize>) {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let seen = Arc::clone(&peak);
    let sink = EventSink::new(move |event| match event.event.as_str() {
        "on_chat_model_start" => {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
        }
        "on_chat_model_end" => {
            running.fetch_sub(1, Ordering::SeqCst);
        }
        _ => {}
    });
    (sink, seen)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

/// The graph: plan the subjects, one joke task per subject (the map), pick the best (the reduce).
fn build(
    planner: &ExampleModel,
    comedian: &ExampleModel,
    judge: &ExampleModel,
) -> weft::Result<CompiledGraph<Jokes>> {
    let plan = ChatPromptTemplate::from_messages([(
        "human",
        "List between 2 and 5 subjects related to {topic}, a word or two each.",
    )])? | planner.clone().with_structured_output::<Subjects>(planner.structured_method());
    let write = ChatPromptTemplate::from_messages([("human", "Write a short joke about {subject}.")])?
        | comedian.clone().with_structured_output::<Joke>(comedian.structured_method());
    let pick = ChatPromptTemplate::from_messages([(
        "human",
        "Below are jokes about {topic}, each after its id. Which one is the funniest? Answer with its id.\n\n\
         {jokes}",
    )])? | judge.clone().with_structured_output::<BestJoke>(judge.structured_method());

    let mut graph = StateGraph::<Jokes>::new();
    graph.add_node("generate_topics", move |state: Jokes, rt: Runtime| {
        let plan = plan.clone();
        async move {
            let out = plan.invoke(json!({"topic": state.topic}), rt.config()).await?;
            Ok::<_, weft::Error>(Jokes::update().subjects(out.subjects))
        }
    });
    // One task per `Send`: its input is the packet.
    graph.add_node("generate_joke", move |task: JokeTask, rt: Runtime| {
        let write = write.clone();
        async move {
            let out = write.invoke(json!({"subject": task.subject}), rt.config()).await?;
            Ok::<_, weft::Error>(Jokes::update().jokes(vec![out.joke]))
        }
    });
    graph.add_node("best_joke", move |state: Jokes, rt: Runtime| {
        let pick = pick.clone();
        async move {
            let numbered: Vec<String> =
                state.jokes.iter().enumerate().map(|(id, joke)| format!("{id}. {joke}")).collect();
            let input = json!({"topic": state.topic, "jokes": numbered.join("\n")});
            let choice = pick.invoke(input, rt.config()).await?;
            // A model can answer an id that does not exist: that is an error, not a panic.
            let best = state.jokes.get(choice.id).cloned().ok_or_else(|| {
                Error::msg(format!("the judge picked joke {} of {}", choice.id, state.jokes.len()))
            })?;
            Ok::<_, weft::Error>(Jokes::update().best(best))
        }
    });
    graph.add_edge(START, "generate_topics");
    // The map: one packet per subject.
    graph.add_conditional_edges(
        "generate_topics",
        |state: &Jokes| {
            let packets =
                state.subjects.iter().map(|s| Send::new("generate_joke", JokeTask { subject: s.clone() }));
            packets.collect::<Vec<_>>()
        },
        ["generate_joke"],
    );
    // The reduce: `best_joke` runs once, in the step after all the joke tasks.
    graph.add_edge("generate_joke", "best_joke");
    graph.add_edge("best_joke", END);
    Ok(graph.compile()?)
}

/// Streams one run in `tasks`, `updates` and `values` modes, printing it; returns what happened, in
/// order, and the final state.
async fn run(app: &CompiledGraph<Jokes>, probe: EventSink) -> weft::Result<(Vec<String>, Jokes)> {
    let config = RunnableConfig::default().with_callbacks(probe);
    let input = Jokes::update().topic("birds".to_owned());
    let started = Instant::now();
    let mut parts = app.stream(input, &config, &[StreamMode::Tasks, StreamMode::Updates, StreamMode::Values]);
    let mut events = Vec::new();
    let mut last = None;
    while let Some(part) = parts.next().await {
        match part?.data {
            StreamData::TaskStart { name, input, step, .. } => {
                let subject = input.get("subject").map(|s| format!("({s})")).unwrap_or_default();
                println!("step {step}: start  {name}{subject}");
                events.push(format!("start {name}"));
            }
            StreamData::TaskResult { name, step, error: Some(error), .. } => {
                println!("step {step}: {name} failed: {error}");
            }
            StreamData::TaskResult { .. } => {}
            StreamData::Updates { node, updates, .. } => {
                for update in updates {
                    let written = serde_json::to_string(&update)?;
                    println!("        {node} wrote {written}");
                }
                events.push(format!("update {node}"));
            }
            StreamData::Values { state, .. } => last = Some(state),
            other => println!("        {other:?}"),
        }
    }
    drop(parts);
    // Three steps of one model call each (50 ms on the script): the joke calls overlapped.
    println!("ran in {} ms", started.elapsed().as_millis());

    let state = last.ok_or_else(|| Error::msg("the run streamed no state"))?;
    Ok((events, state))
}

async fn example() -> weft::Result<()> {
    let models = Models::from_env().with_latency(Duration::from_millis(50));
    let (planner, comedian, judge) = scripts(&models);
    let app = build(&planner, &comedian, &judge)?;
    let (probe, peak) = concurrency_probe();
    let (events, state) = run(&app, probe).await?;

    // Any model: the three stages ran in order, one joke task per subject, all started before one ended,
    // and the reduce joined every joke.
    let jokes_started = events.iter().filter(|e| *e == "start generate_joke").count();
    let first_joke_update = events.iter().position(|e| e == "update generate_joke");
    let last_joke_start = events.iter().rposition(|e| e == "start generate_joke");
    assert!(jokes_started >= 1, "one task per subject, and at least one subject: {events:?}");
    assert!(last_joke_start < first_joke_update, "every joke task started before the first one finished");
    assert_eq!(events.first().map(String::as_str), Some("start generate_topics"));
    assert_eq!(events.last().map(String::as_str), Some("update best_joke"));
    assert_eq!(jokes_started, state.subjects.len());
    assert_eq!(state.jokes.len(), state.subjects.len(), "one joke per subject, joined by the reducer");
    let best = state.best.clone().unwrap_or_default();
    assert!(state.jokes.contains(&best), "the best joke is one of the jokes");
    println!("subjects: {:?}", state.subjects);
    for (id, joke) in state.jokes.iter().enumerate() {
        println!("joke {id}: {joke}");
    }
    println!("best: {best}");

    // On the script, every value is known.
    models.expect_eq(
        "the subjects",
        &state.subjects,
        &["penguins", "owls", "parrots"].map(String::from).to_vec(),
    );
    models.expect_eq(
        "the jokes, in the order the packets were sent",
        &state.jokes[..],
        &comedian_script()[..],
    );
    models.expect_eq("the best joke", &best, &comedian_script()[1]);
    // Each joke task asked about its own subject; the judge saw the jokes numbered from 0.
    let asked: Vec<String> = comedian.prompts().iter().map(|p| p[0].text()).collect();
    models.expect_eq(
        "the comedian's prompts",
        asked,
        ["penguins", "owls", "parrots"].map(|s| format!("Write a short joke about {s}.")),
    );
    let judged = judge.prompts().first().map(|p| p[0].text()).unwrap_or_default();
    models.expect_eq("the judge saw joke 1", judged.contains("\n1. Owls never finish"), true);

    models.expect_eq(
        "the stream",
        events.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "start generate_topics",
            "update generate_topics",
            "start generate_joke",
            "start generate_joke",
            "start generate_joke",
            "update generate_joke",
            "update generate_joke",
            "update generate_joke",
            "start best_joke",
            "update best_joke",
        ],
    );
    models.expect_eq("model calls in flight at once", peak.load(Ordering::SeqCst), 3);
    println!("at most {} model calls were in flight at once", peak.load(Ordering::SeqCst));
    println!("map_reduce: all checks passed");
    Ok(())
}
