//! The example's graphs: an agent that books tables (a human approves each booking), a review graph that
//! asks a human before it publishes, and a chat graph that streams its replies.

use serde_json::{Value, json};
use weft::graph::{ChannelKind, CompiledGraph, GraphResult, JsonState};
use weft::prelude::*;

use crate::desk::Desk;

/// Returns tonight's weather in a city.
#[tool]
fn get_weather(
    /// The city.
    city: String,
) -> String {
    // A stand-in for a weather service.
    format!("{city} tonight: 24°C, clear sky.")
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
    // A stand-in for a booking service: the call a human must approve.
    format!("Booked a table for {people} at {restaurant} at {time}.")
}

/// LangGraph's prebuilt ReAct agent with two tools; `book_table` waits for a human's approval.
pub(crate) fn agent() -> weft::Result<CompiledGraph<AgentState>> {
    create_react_agent(Desk { tools: true }, [get_weather.shared(), book_table.shared()])
        .prompt("You help plan evenings out.")
        .human_approval(HumanApproval::tools(["book_table"]))
        .build()
        .map_err(Error::custom)
}

/// `draft` → `review` (asks a human whether to publish) → `publish`.
pub(crate) fn review() -> GraphResult<CompiledGraph<JsonState>> {
    let state = JsonState::builder()
        .channel("topic", ChannelKind::LastValue)
        .channel("draft", ChannelKind::LastValue)
        .channel("status", ChannelKind::LastValue)
        .build();
    let mut g = StateGraph::with_initial(state);
    g.add_node("draft", |s: &JsonState| {
        let topic = s.get("topic").and_then(Value::as_str).unwrap_or("weft");
        json!({"draft": format!("A short note on {topic}.")})
    });
    g.add_node("review", |s: &JsonState, rt: &Runtime| -> weft::Result<Value> {
        let draft = s.get("draft").cloned().unwrap_or(Value::Null);
        let answer: Value = rt.interrupt(json!({"question": "Publish this draft?", "draft": draft}))?;
        let publish = matches!(answer.as_str(), Some("yes" | "y")) || answer == json!(true);
        Ok(json!({"status": if publish { "approved" } else { "rejected" }}))
    });
    g.add_node("publish", |s: &JsonState| {
        let approved = s.get("status") == Some(&json!("approved"));
        json!({"status": if approved { "published" } else { "kept as a draft" }})
    });
    g.add_edge(START, "draft");
    g.add_edge("draft", "review");
    g.add_edge("review", "publish");
    g.add_edge("publish", END);
    g.compile()
}

/// `model`: a chat model that streams its reply token by token.
pub(crate) fn chat() -> GraphResult<CompiledGraph<MessagesState>> {
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("model", |s: MessagesState, rt: Runtime| async move {
        let reply = Desk { tools: false }.invoke(PromptValue::from(s.messages.to_vec()), rt.config()).await?;
        Ok::<_, Error>(MessagesState::update().messages(vec![Message::Ai(reply)]))
    });
    g.add_edge(START, "model");
    g.add_edge("model", END);
    g.compile()
}
