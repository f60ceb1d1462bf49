//! Reflection: a writer drafts, a critic reviews, the writer revises, until the critic accepts or the
//! rounds run out.
//!
//! This is LangGraph's Reflection tutorial ("Reflection", the essay writer and its teacher), with a
//! critic that gives a verdict as structured output instead of a fixed number of rounds:
//!
//! ```text
//! START → generate → reflect ─accepted, or MAX_DRAFTS drafts──→ END
//!            ↑          │
//!            └─revise───┘
//! ```
//!
//! The conversation is the state (`messages`, merged by `add_messages`). `generate` calls the writer on
//! it: the request, its own earlier drafts and the critiques. `reflect` shows the critic the same
//! conversation with the roles swapped (the drafts become the "user's" submissions, as the tutorial
//! does) and asks for a `Critique { accepted, feedback }`; the feedback joins the conversation as the
//! user's next message, so the writer's next call sees it. A router ends the run when the critic accepts
//! or when `MAX_DRAFTS` drafts were written: the loop always ends, whatever the critic says.
//!
//! Two requests run: one the critic accepts after a revision, one it never accepts (the bound ends it).
//! The models come from [`weft_examples::Models`]: scripted, with exact checks; on a live model only
//! the protocol is checked (the run ends within the bound with a non-empty draft).
//!
//! Run it from the repository root: `cargo run --example reflection`.

use std::sync::Arc;

use futures::StreamExt as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft::graph::{CompiledGraph, InMemorySaver};
use weft::prelude::*;
use weft_examples::{ExampleModel, Models, structured};

/// The most drafts the writer makes for one request.
const MAX_DRAFTS: u32 = 3;

/// The graph's state: the conversation, how many drafts were written, and the critic's last verdict.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Review {
    #[state(add_messages)]
    messages: Messages,
    drafts: u32,
    accepted: bool,
}

/// A critic's verdict on a draft.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Critique {
    /// Whether the draft is good enough to publish as it is.
    accepted: bool,
    /// What to change (or, when accepted, what works), in two sentences at most.
    feedback: String,
}

/// The request of the first run, and what the writer and the critic say on the script.
const HAIKU: &str = "Write a haiku about a lighthouse in fog.";
const HAIKU_DRAFTS: [&str; 2] = [
    "A lighthouse shines bright\nThe fog is very thick now\nShips are safe tonight",
    "Grey breath on the sea\nOne patient eye turns and turns\nHulls find the harbour",
];
/// The request of the second run, whose drafts the critic never accepts.
const SLOGAN: &str = "Write a slogan for a bakery that opens at 4 a.m.";
const SLOGAN_DRAFTS: [&str; 3] =
    ["Fresh bread, early.", "Up before the sun, so you don't have to be.", "We knead the dawn."];

/// The writer and the critic, with their scripts for both runs.
fn scripts(models: &Models) -> (ExampleModel, ExampleModel) {
    let drafts = HAIKU_DRAFTS.iter().chain(&SLOGAN_DRAFTS).copied();
    let writer = models.chat_model("writer", drafts);
    let verdict =
        |accepted: bool, feedback: &str| structured(&Critique { accepted, feedback: feedback.into() });
    let critic = models.chat_model(
        "critic",
        [
            verdict(
                false,
                "The images are flat and 'very thick now' tells instead of showing. Let the fog act.",
            ),
            verdict(true, "The fog and the beam are shown, not named. Publish it."),
            verdict(false, "Too plain: it could be any bakery."),
            verdict(false, "Better, but long for a sign. Make it punchier."),
            verdict(false, "Clever, but the early hour is lost. Bring back the 4 a.m."),
        ],
    );
    (writer, critic)
}

/// The graph: `generate` ⇄ `reflect`, ended by the critic's verdict or the bound on drafts.
fn build(writer: ExampleModel, critic: ExampleModel) -> weft::Result<StateGraph<Review>> {
    let write = ChatPromptTemplate::from_messages([
        (
            "system",
            "You write short texts on request. Write the best text you can; when the user critiques \
             your last attempt, answer with a revised version only.",
        ),
        ("placeholder", "{messages}"),
    ])? | writer;
    let review = ChatPromptTemplate::from_messages([
        (
            "system",
            "You are an editor reviewing a submission against its request. Accept it only if it is \
             ready to publish; otherwise say what to change.",
        ),
        ("placeholder", "{messages}"),
    ])? | critic.clone().with_structured_output::<Critique>(critic.structured_method());

    let mut graph = StateGraph::<Review>::new();
    graph.add_node("generate", move |state: Review, rt: Runtime| {
        let write = write.clone();
        async move {
            let draft = write.invoke(json!({"messages": state.messages.to_vec()}), rt.config()).await?;
            Ok::<_, weft::Error>(Review::update().messages(vec![draft.into()]).drafts(state.drafts + 1))
        }
    });
    graph.add_node("reflect", move |state: Review, rt: Runtime| {
        let review = review.clone();
        async move {
            // The critic reads the drafts as a user's submissions and its own critiques as its replies.
            let swapped: Vec<Message> = state
                .messages
                .iter()
                .enumerate()
                .map(|(i, message)| match message {
                    Message::Ai(ai) if i > 0 => Message::human(ai.text()),
                    Message::Human(human) if i > 0 => Message::ai(human.content.clone()),
                    other => other.clone(),
                })
                .collect();
            let critique = review.invoke(json!({"messages": swapped}), rt.config()).await?;
            let feedback = Message::human(critique.feedback);
            Ok::<_, weft::Error>(Review::update().messages(vec![feedback]).accepted(critique.accepted))
        }
    });
    graph.add_edge(START, "generate");
    graph.add_edge("generate", "reflect");
    graph.add_conditional_edges(
        "reflect",
        |state: &Review| if state.accepted || state.drafts >= MAX_DRAFTS { END } else { "generate" },
        None,
    );
    Ok(graph)
}

/// Runs one request on its own thread, printing each draft and critique as its node finishes, and reads
/// the thread's final state from its checkpoint.
async fn run(app: &CompiledGraph<Review>, thread: &str, request: &str) -> weft::Result<Review> {
    println!("\nrequest: {request}");
    let config = RunnableConfig::default().with_configurable("thread_id", thread);
    let input = Review::update().messages(vec![Message::human(request)]);
    let mut parts = app.stream(input, &config, &[StreamMode::Updates]);
    while let Some(part) = parts.next().await {
        let StreamData::Updates { node, updates, .. } = part?.data else { continue };
        for update in updates {
            let verdict = match update.accepted {
                Some(true) => " (accepted)",
                Some(false) => " (rejected)",
                None => "",
            };
            for message in update.messages.unwrap_or_default() {
                println!("  {node:>8}: {}{verdict}", message.text().replace('\n', " / "));
            }
        }
    }
    drop(parts);
    let state = app.get_state(&config).await?.values;
    let verdict = if state.accepted { "accepted" } else { "not accepted" };
    println!("  => {verdict} after {} draft(s)", state.drafts);
    Ok(state)
}

/// The last draft of a finished run.
fn last_draft(state: &Review) -> String {
    state.messages.iter().rev().find(|m| matches!(m, Message::Ai(_))).map(Message::text).unwrap_or_default()
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

async fn example() -> weft::Result<()> {
    let models = Models::from_env();
    let (writer, critic) = scripts(&models);
    let graph = build(writer.clone(), critic.clone())?;
    let app = graph.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())))?;

    // Run 1: rejected once, revised, accepted.
    let haiku = run(&app, "haiku", HAIKU).await?;
    // Any model: the loop ended within the bound, on a draft and its critique.
    assert!((1..=MAX_DRAFTS).contains(&haiku.drafts), "{} drafts", haiku.drafts);
    assert!(haiku.accepted || haiku.drafts == MAX_DRAFTS, "the run ends only on acceptance or the bound");
    assert_eq!(haiku.messages.len(), 1 + 2 * haiku.drafts as usize, "request, then draft and critique pairs");
    assert!(!last_draft(&haiku).trim().is_empty());
    // The script: two drafts, accepted on the second.
    models.expect_eq("haiku drafts", haiku.drafts, 2);
    models.expect_eq("haiku accepted", haiku.accepted, true);
    models.expect_eq("the final haiku", last_draft(&haiku), HAIKU_DRAFTS[1]);
    // The writer revised with the critique in view; the critic saw the draft as the user's submission.
    let writer_saw: Vec<(&str, String)> = writer
        .prompts()
        .get(1)
        .map(|p| p.iter().map(|m| (m.type_name(), m.text())).collect())
        .unwrap_or_default();
    let first_critique = haiku.messages.get(2).map(Message::text).unwrap_or_default();
    models.expect_eq(
        "the writer's second call ends with the critique",
        writer_saw.last(),
        Some(&("human", first_critique)),
    );
    let critic_saw: Vec<&str> =
        critic.prompts().first().map(|p| p.iter().map(Message::type_name).collect()).unwrap_or_default();
    models.expect_eq("the critic's first call, roles swapped", critic_saw, ["system", "human", "human"]);

    // Run 2: never accepted; the bound ends the loop after MAX_DRAFTS drafts.
    let slogan = run(&app, "slogan", SLOGAN).await?;
    assert!((1..=MAX_DRAFTS).contains(&slogan.drafts));
    assert!(slogan.accepted || slogan.drafts == MAX_DRAFTS);
    assert!(!last_draft(&slogan).trim().is_empty());
    models.expect_eq("slogan drafts", slogan.drafts, MAX_DRAFTS);
    models.expect_eq("slogan accepted", slogan.accepted, false);
    models.expect_eq("the last slogan", last_draft(&slogan), SLOGAN_DRAFTS[2]);
    // Each run is its own thread: the second request's conversation does not hold the first's.
    assert_eq!(slogan.messages.first().map(Message::text).as_deref(), Some(SLOGAN));

    if let Some(script) = writer.script() {
        assert_eq!(script.remaining(), 0, "the writer used its whole script");
    }
    println!("\nreflection: all checks passed");
    Ok(())
}
