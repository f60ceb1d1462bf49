//! The states and graph shapes several workloads share: the chain, the counting loop, the message loop.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use weft_graph::{END, Messages, START, State, StateGraph};
use weft_runnable_core::Message;

/// `count: integer`, no reducer.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CountState {
    /// The counter.
    pub(crate) count: i64,
}

/// `messages` with the `add_messages` reducer.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ChatState {
    /// The conversation.
    #[state(add_messages)]
    pub(crate) messages: Messages,
}

/// Entry times of a node, recorded by the instrumented graphs of the step profiles (never timed).
pub(crate) type Probe = Arc<Mutex<Vec<Instant>>>;

/// Records now in `probe`.
pub(crate) fn record(probe: &Probe) {
    probe.lock().unwrap_or_else(PoisonError::into_inner).push(Instant::now());
}

/// The recorded entry times, leaving the probe empty.
pub(crate) fn take(probe: &Probe) -> Vec<Instant> {
    std::mem::take(&mut *probe.lock().unwrap_or_else(PoisonError::into_inner))
}

/// `n0 -> n1 -> ... -> n(n-1)`, each node returning `{count: count + 1}`; async nodes when `asynchronous`.
pub(crate) fn chain(n: usize, asynchronous: bool) -> StateGraph<CountState> {
    let mut graph = StateGraph::<CountState>::new();
    for i in 0..n {
        if asynchronous {
            graph.add_node(format!("n{i}"), |s: CountState| async move {
                CountState::update().count(s.count + 1)
            });
        } else {
            graph.add_node(format!("n{i}"), |s: &CountState| CountState::update().count(s.count + 1));
        }
    }
    graph.add_edge(START, "n0");
    for i in 0..n.saturating_sub(1) {
        graph.add_edge(format!("n{i}"), format!("n{}", i + 1));
    }
    graph.add_edge(format!("n{}", n.saturating_sub(1)), END);
    graph
}

/// `inc` looping on itself while `count < limit` (the router sees `inc`'s own write).
pub(crate) fn counting_loop(limit: i64, probe: Option<Probe>) -> StateGraph<CountState> {
    let mut graph = StateGraph::<CountState>::new();
    match probe {
        None => graph.add_node("inc", |s: &CountState| CountState::update().count(s.count + 1)),
        Some(probe) => graph.add_node("inc", move |s: &CountState| {
            record(&probe);
            CountState::update().count(s.count + 1)
        }),
    };
    graph.add_edge(START, "inc");
    graph.add_conditional_edges(
        "inc",
        move |s: &CountState| if s.count < limit { "inc" } else { END },
        ["inc", END],
    );
    graph
}

/// `talk` appending the AI message `"m<n>"` (n = current length, no id: the reducer assigns one) while the
/// list is shorter than `limit`.
pub(crate) fn message_loop(limit: usize, probe: Option<Probe>) -> StateGraph<ChatState> {
    fn talk(s: &ChatState) -> ChatStateUpdate {
        ChatState::update().messages(vec![Message::ai(format!("m{}", s.messages.len()))])
    }
    let mut graph = StateGraph::<ChatState>::new();
    match probe {
        None => graph.add_node("talk", |s: &ChatState| talk(s)),
        Some(probe) => graph.add_node("talk", move |s: &ChatState| {
            record(&probe);
            talk(s)
        }),
    };
    graph.add_edge(START, "talk");
    graph.add_conditional_edges(
        "talk",
        move |s: &ChatState| if s.messages.len() < limit { "talk" } else { END },
        ["talk", END],
    );
    graph
}

/// Checks a finished message loop: `n` messages `"m0" .. "m<n-1>"` with `n` distinct ids.
pub(crate) fn check_messages(messages: &Messages, n: usize) -> Result<(), String> {
    if messages.len() != n {
        return Err(format!("expected {n} messages, got {}", messages.len()));
    }
    for (i, message) in messages.iter().enumerate() {
        if message.text() != format!("m{i}") {
            return Err(format!("message {i} reads {:?}, expected \"m{i}\"", message.text()));
        }
    }
    let ids: std::collections::HashSet<&str> = messages.iter().filter_map(Message::id).collect();
    if ids.len() != n {
        return Err(format!("expected {n} distinct message ids, got {}", ids.len()));
    }
    Ok(())
}
