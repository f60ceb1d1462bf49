//! Multi-agent hand-offs: two agents, each with its own tools, passing the conversation to each other
//! with `Command`s.
//!
//! This is LangGraph's multi-agent network with hand-off tools ("How to implement handoffs between
//! agents", and the travel and hotel advisors of its multi-agent tutorial). A `researcher` looks facts
//! up; a `mathematician` does arithmetic. Each is an agent loop (the model, then its tool calls, then
//! the model again, until it answers or hands off): a model node of its own, weft's `ToolNode` for the
//! tools, and `tools_condition` between them:
//!
//! ```text
//! parent graph                                             mathematician (a subgraph)
//! START → researcher ⇄ researcher_tools ──goto──→ mathematician: START → agent ⇄ tools
//!            ↑                                                                     │
//!            └──────────────── Command::to_parent, goto researcher ────────────────┘
//! ```
//!
//! A hand-off is a tool the model calls, as in LangGraph (`transfer_to_mathematician`,
//! `transfer_to_researcher`). The tool returns a `Command` (wrapped by `tool_command`) instead of text;
//! `ToolNode` hands that command to the graph:
//!
//! - the researcher's nodes live in the parent graph, so `transfer_to_mathematician` is a plain
//!   `Command` whose `goto` names a **sibling node**, `mathematician` (the edge out of
//!   `researcher_tools` goes back to the researcher only when no hand-off happened);
//! - the mathematician is a **subgraph** (a compiled graph used as a node), so `transfer_to_researcher`
//!   is `Command::to_parent()`: it ends the subgraph's run and is applied by the **parent graph**, as if
//!   the `mathematician` node had returned it. Its update carries the subgraph's messages (the parent
//!   sees nothing of a subgraph that hands off otherwise); `add_messages` merges them by id.
//!
//! The run is streamed with subgraphs included, so the mathematician's inner steps show with their
//! namespace. The models come from [`weft_examples::Models`]: scripted, with exact checks; on a live model
//! only the protocol is checked (the run ends on an answer, every hand-off lands on the agent it names).
//!
//! Run it from the repository root: `cargo run --example multi_agent`.

use std::collections::HashSet;

use futures::StreamExt as _;
use serde_json::json;
use weft::agents::tool_command;
use weft::graph::{CompiledGraph, RunOptions};
use weft::prelude::*;
use weft::{SharedTool, ToolOutput};
use weft_examples::{ExampleModel, Models};

/// Facts the stand-in search knows: `(words that find it, the fact)`.
const FACTS: [(&str, &str); 3] = [
    (
        "train ticket price paris lyon",
        "A one-way second-class train ticket from Paris to Lyon costs 45 euros.",
    ),
    ("train duration paris lyon", "The fast train from Paris to Lyon takes 2 hours."),
    ("hotel price lyon", "A double room in central Lyon costs about 110 euros a night."),
];

/// Looks facts up (a local stand-in for a search engine with a few canned facts).
#[tool]
fn search_facts(
    /// What to look up, in a few words.
    query: String,
) -> String {
    let wanted = weft_examples::WordEmbeddings::words(&query);
    let score = |keys: &str| wanted.iter().filter(|w| keys.split(' ').any(|k| k == w.as_str())).count();
    let best = FACTS.iter().max_by_key(|(keys, _)| score(keys)).filter(|(keys, _)| score(keys) > 0);
    best.map_or_else(|| "No fact found.".to_owned(), |(_, fact)| (*fact).to_owned())
}

/// Multiplies two integers.
#[tool]
fn multiply(
    /// The first factor.
    a: i64,
    /// The second factor.
    b: i64,
) -> i64 {
    a.saturating_mul(b)
}

/// Adds two integers.
#[tool]
fn add(
    /// The first term.
    a: i64,
    /// The second term.
    b: i64,
) -> i64 {
    a.saturating_add(b)
}

/// The tool message that answers a hand-off call.
fn handoff_message(to: &str, tool_call_id: String) -> Message {
    ToolMessage {
        content: format!("Transferred to {to}.").into(),
        tool_call_id,
        name: Some(format!("transfer_to_{to}")),
        ..ToolMessage::default()
    }
    .into()
}

/// Hands the conversation to the mathematician, for arithmetic.
#[tool]
fn transfer_to_mathematician(#[inject(tool_call_id)] tool_call_id: String) -> ToolOutput {
    // The researcher's nodes are in the parent graph: a sibling goto. The parent already holds the
    // conversation, so the update only answers the hand-off call.
    tool_command(
        Command::<MessagesState>::new()
            .update(MessagesState::update().messages(vec![handoff_message("mathematician", tool_call_id)]))
            .goto("mathematician"),
    )
}

/// Hands the conversation back to the researcher, with the results.
#[tool]
fn transfer_to_researcher(
    #[inject(tool_call_id)] tool_call_id: String,
    #[inject(state = "messages")] messages: Vec<Message>,
) -> ToolOutput {
    // The mathematician is a subgraph: the command goes to the parent graph, carrying the subgraph's
    // conversation (the parent merges it by message id, so what it already has is not repeated).
    let mut messages = messages;
    messages.push(handoff_message("researcher", tool_call_id));
    tool_command(
        Command::<MessagesState>::new()
            .update(MessagesState::update().messages(messages))
            .goto("researcher")
            .to_parent(),
    )
}

/// An agent's model node: the system prompt and the conversation in, one AI message (named after the
/// agent) out.
fn agent_node(
    graph: &mut StateGraph<MessagesState>,
    node: &str,
    name: &'static str,
    system: &str,
    model: ExampleModel,
    tools: &[SharedTool],
) -> weft::Result<()> {
    let prompt = ChatPromptTemplate::from_messages([("system", system), ("placeholder", "{messages}")])?;
    let chain = prompt | model.bind_tools(tools, None);
    graph.add_node(node, move |state: MessagesState, rt: Runtime| {
        let chain = chain.clone();
        async move {
            let mut reply = chain.invoke(json!({"messages": state.messages.to_vec()}), rt.config()).await?;
            reply.name = Some(name.to_owned());
            Ok::<_, weft::Error>(MessagesState::update().messages(vec![reply.into()]))
        }
    });
    Ok(())
}

/// Routes after an agent's tools: back to the agent, unless a hand-off tool ran (its command's `goto`
/// already says where the conversation goes).
fn after_tools(agent: &'static str) -> impl Fn(&MessagesState) -> &'static str + Send + Sync + 'static {
    move |state| {
        let last_tool = state.messages.last().and_then(Message::as_tool).and_then(|t| t.name.as_deref());
        if last_tool.is_some_and(|name| name.starts_with("transfer_to_")) { END } else { agent }
    }
}

/// The mathematician: an agent ⇄ tools loop, compiled on its own and used as one node of the parent.
fn mathematician(model: ExampleModel) -> weft::Result<CompiledGraph<MessagesState>> {
    let tools: Vec<SharedTool> = vec![multiply.shared(), add.shared(), transfer_to_researcher.shared()];
    let mut graph = StateGraph::<MessagesState>::new();
    agent_node(
        &mut graph,
        "agent",
        "mathematician",
        "You are a mathematician in a team. Compute what the conversation needs with your tools, one \
         step at a time, then hand the result back to the researcher with transfer_to_researcher.",
        model,
        &tools,
    )?;
    graph.add_node("tools", ToolNode::new(tools));
    graph.add_edge(START, "agent");
    graph.add_conditional_edges("agent", tools_condition, ["tools", END]);
    // A hand-off ends the subgraph's run (its command goes to the parent); otherwise back to the model.
    graph.add_edge("tools", "agent");
    Ok(graph.compile()?)
}

/// The team: the researcher's loop in the parent graph, and the mathematician as a subgraph node.
fn team(researcher: ExampleModel, math: ExampleModel) -> weft::Result<CompiledGraph<MessagesState>> {
    let tools: Vec<SharedTool> = vec![search_facts.shared(), transfer_to_mathematician.shared()];
    let mut graph = StateGraph::<MessagesState>::new();
    agent_node(
        &mut graph,
        "researcher",
        "researcher",
        "You are a researcher in a team. Look facts up with search_facts. You cannot compute: for any \
         arithmetic, hand over to the mathematician with transfer_to_mathematician. When you have \
         everything, answer the user in one or two sentences.",
        researcher,
        &tools,
    )?;
    graph.add_node("researcher_tools", ToolNode::new(tools));
    graph.add_node("mathematician", mathematician(math)?);
    graph.add_edge(START, "researcher");
    graph.add_conditional_edges("researcher", tools_condition, [("tools", "researcher_tools"), (END, END)]);
    graph.add_conditional_edges("researcher_tools", after_tools("researcher"), ["researcher", END]);
    Ok(graph.compile()?)
}

/// A tool call in a scripted reply.
fn call(name: &str, args: serde_json::Value, id: &str) -> ToolCall {
    ToolCall { name: name.into(), args, id: Some(id.into()) }
}

/// A scripted reply: some text and tool calls.
fn says(text: &str, calls: impl IntoIterator<Item = ToolCall>) -> AiMessage {
    AiMessage { tool_calls: calls.into_iter().collect(), ..AiMessage::new(text) }
}

const QUESTION: &str =
    "Our team of 12 takes the train from Paris to Lyon and back. What do the tickets cost in all?";
const ANSWER: &str = "The 24 tickets (12 people, there and back, at 45 euros each) cost 1080 euros in all.";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

async fn example() -> weft::Result<()> {
    let models = Models::from_env();
    let researcher = models.chat_model(
        "researcher",
        [
            says("", [call("search_facts", json!({"query": "train ticket price Paris Lyon"}), "r1")]),
            says(
                "A ticket costs 45 euros one way; the total is arithmetic.",
                [call("transfer_to_mathematician", json!({}), "r2")],
            ),
            says(ANSWER, []),
        ],
    );
    let math = models.chat_model(
        "mathematician",
        [
            says("12 people, two trips each.", [call("multiply", json!({"a": 12, "b": 2}), "m1")]),
            says("", [call("multiply", json!({"a": 24, "b": 45}), "m2")]),
            says("24 tickets at 45 euros: 1080 euros.", [call("transfer_to_researcher", json!({}), "m3")]),
        ],
    );
    let app = team(researcher.clone(), math.clone())?;

    let input = MessagesState::update().messages(vec![Message::human(QUESTION).with_id("question")]);
    // A bound for live models: a dozen hand-offs and tool rounds at most.
    let config = RunnableConfig::default().with_recursion_limit(40);
    let options = RunOptions { subgraphs: true, ..RunOptions::default() };
    let mut parts = app.stream_with(input, &config, &[StreamMode::Updates, StreamMode::Values], options);
    let (mut path, mut last) = (Vec::new(), None);
    // The hand-off to the parent carries the subgraph's whole conversation: print each message once.
    let mut seen = HashSet::from(["question".to_owned()]);
    let mut fresh = |message: &Message| message.id().is_none_or(|id| seen.insert(id.to_owned()));
    println!("user: {QUESTION}");
    while let Some(part) = parts.next().await {
        let part = part?;
        match part.data {
            // The parent graph's steps.
            StreamData::Updates { node, updates, .. } => {
                println!("[{node}]");
                for message in updates.into_iter().flat_map(|u| u.messages.unwrap_or_default()) {
                    if fresh(&message) {
                        println!("    {}", line(&message));
                    }
                }
                path.push(node);
            }
            // The mathematician's steps, inside the subgraph (its namespace names the node and task).
            StreamData::SubgraphUpdates { node, updates, .. } => {
                let ns = part.ns.first().and_then(|ns| ns.split(':').next()).unwrap_or_default();
                println!("  [{ns} › {node}]");
                for update in updates {
                    let messages: Vec<Message> = serde_json::from_value(update["messages"].clone())?;
                    for message in messages.iter().filter(|m| fresh(m)) {
                        println!("      {}", line(message));
                    }
                }
                path.push(format!("{ns}/{node}"));
            }
            StreamData::Values { state, .. } => last = Some(state),
            _ => {}
        }
    }
    drop(parts);
    let state = last.ok_or_else(|| Error::msg("the run streamed no state"))?;

    // Any model: the run ended on an answer; every hand-off landed on the agent it names.
    let answer = state.messages.last().and_then(Message::as_ai).cloned().unwrap_or_default();
    assert!(answer.tool_calls.is_empty() && !answer.text().trim().is_empty(), "the run ends on an answer");
    let handoffs: Vec<&str> = state
        .messages
        .iter()
        .filter_map(|m| m.as_tool()?.name.as_deref()?.strip_prefix("transfer_to_"))
        .collect();
    let speakers: Vec<&str> = state.messages.iter().filter_map(|m| m.as_ai()?.name.as_deref()).collect();
    for to in &handoffs {
        assert!(speakers.contains(to), "the {to} spoke after the hand-off to it");
    }
    println!("answer: {}", answer.text());

    // The script: the exact steps, the mathematician's results, and what the researcher saw at the end.
    models.expect_eq(
        "the path",
        &path,
        &[
            "researcher",
            "researcher_tools",
            "researcher",
            "researcher_tools",
            "mathematician/agent",
            "mathematician/tools",
            "mathematician/agent",
            "mathematician/tools",
            "mathematician/agent",
            "mathematician",
            "researcher",
        ],
    );
    models.expect_eq("the hand-offs", &handoffs, &["mathematician", "researcher"]);
    let results: Vec<String> =
        state.messages.iter().filter_map(|m| Some(m.as_tool()?.content.text())).collect();
    models.expect_eq(
        "the tool results",
        &results,
        &[FACTS[0].1, "Transferred to mathematician.", "24", "1080", "Transferred to researcher."],
    );
    models.expect_eq("the answer", answer.text(), ANSWER);
    let last_prompt = researcher.prompts().last().cloned().unwrap_or_default();
    models.expect_eq(
        "the researcher's last call saw the mathematician's work",
        last_prompt.iter().any(|m| m.text() == "1080"),
        true,
    );
    println!("multi_agent: all checks passed");
    Ok(())
}

/// One line for a message: who says what, or which tools it calls.
fn line(message: &Message) -> String {
    match message {
        Message::Ai(ai) => {
            let who = ai.name.as_deref().unwrap_or("ai");
            let calls: Vec<String> =
                ai.tool_calls.iter().map(|c| format!("{}({})", c.name, c.args)).collect();
            match (ai.text().is_empty(), calls.is_empty()) {
                (_, true) => format!("{who}: {}", ai.text()),
                (true, false) => format!("{who} calls {}", calls.join(", ")),
                (false, false) => format!("{who}: {} — calls {}", ai.text(), calls.join(", ")),
            }
        }
        Message::Tool(tool) => {
            format!("{} → {}", tool.name.as_deref().unwrap_or("tool"), tool.content.text())
        }
        other => format!("{}: {}", other.type_name(), other.text()),
    }
}
