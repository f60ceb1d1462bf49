//! The erased interface against the typed one it wraps.

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_runnable_core::RunnableConfig;

use super::*;
use crate::checkpoint::InMemorySaver;
use crate::json_state::{JsonState, JsonUpdate};
use crate::runtime::Runtime;
use crate::state::ChannelKind;
use crate::types::{END, START};
use crate::{CompileConfig, StateGraph};

fn state() -> JsonState {
    JsonState::builder().append("items").channel("count", ChannelKind::LastValue).build()
}

fn count(s: &JsonState) -> i64 {
    s.get("count").and_then(Value::as_i64).unwrap_or(0)
}

/// `a` → `ask` (interrupts, writes the answer) → END.
fn graph() -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("a", |s: &JsonState| {
        JsonUpdate::new().write("items", json!(["a"])).write("count", json!(count(s) + 1))
    });
    g.add_node("ask", |_s: &JsonState, rt: &Runtime| -> weft_runnable_core::Result<JsonUpdate> {
        let answer: String = rt.interrupt("approve?")?;
        Ok(JsonUpdate::new().write("items", json!([format!("answer:{answer}")])))
    });
    g.add_edge(START, "a");
    g.add_edge("a", "ask");
    g.add_edge("ask", END);
    g.compile().unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    let mut config = RunnableConfig::default();
    config.configurable.insert("thread_id".into(), json!(id));
    config
}

async fn run(
    graph: &Arc<dyn ErasedGraph>,
    input: JsonInput,
    config: &RunnableConfig,
    modes: &[StreamMode],
) -> Vec<JsonStreamPart> {
    graph.stream_json(input, config.clone(), modes, RunOptions::default()).map(|p| p.unwrap()).collect().await
}

#[tokio::test]
async fn streams_values_and_pauses_then_resumes_by_command() {
    let graph = graph().erase().with_checkpointer(Some(Arc::new(InMemorySaver::new())));
    let config = thread("t1");
    let input = JsonInput::from_json(json!({"items": ["start"], "unknown": 1})).unwrap();
    let parts = run(&graph, input, &config, &[StreamMode::Values, StreamMode::Updates]).await;
    let kinds: Vec<StreamMode> = parts.iter().map(|p| p.data.mode()).collect();
    assert_eq!(kinds.first(), Some(&StreamMode::Values));
    let paused = parts.iter().any(|p| matches!(&p.data, JsonStreamData::Interrupt(i) if i.len() == 1));
    assert!(paused, "{parts:?}");

    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(state.values, json!({"items": ["start", "a"], "count": 1}));
    assert_eq!(state.next, vec!["ask"]);
    assert_eq!(state.interrupts.len(), 1);
    assert!(state.created_at.is_some());

    let resume = JsonInput::Command(JsonCommand::from_json(json!({"resume": "yes"})).unwrap());
    run(&graph, resume, &config, &[StreamMode::Values]).await;
    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(state.values, json!({"items": ["start", "a", "answer:yes"], "count": 1}));
    assert!(state.next.is_empty());
    let history = graph.get_state_history_json(&config, ListOptions::default()).await.unwrap();
    assert!(history.len() >= 4, "{history:?}");
}

#[tokio::test]
async fn a_resume_object_keyed_by_interrupt_ids_answers_by_id() {
    let graph = graph().erase().with_checkpointer(Some(Arc::new(InMemorySaver::new())));
    let config = thread("t2");
    run(&graph, JsonInput::from_json(json!({})).unwrap(), &config, &[StreamMode::Values]).await;
    let id = graph.get_state_json(&config, false).await.unwrap().interrupts[0].id.clone();
    let command = JsonCommand::from_json(json!({"resume": {id: "by id"}})).unwrap();
    run(&graph, JsonInput::Command(command), &config, &[StreamMode::Values]).await;
    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(state.values["items"], json!(["a", "answer:by id"]));
}

#[tokio::test]
async fn update_state_json_writes_as_a_node_and_lists_pairs_as_updates() {
    let graph = graph().erase().with_checkpointer(Some(Arc::new(InMemorySaver::new())));
    let config = thread("t3");
    run(&graph, JsonInput::from_json(json!({"items": ["x"]})).unwrap(), &config, &[StreamMode::Values]).await;
    let saved =
        graph.update_state_json(&config, Some(json!({"items": ["manual"]})), Some("ask")).await.unwrap();
    assert!(saved.checkpoint_id.is_some());
    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(state.values["items"], json!(["x", "a", "manual"]));
    assert!(state.next.is_empty());

    let bad = graph.update_state_json(&config, Some(json!(["not", "an object"])), Some("ask")).await;
    assert!(matches!(bad, Err(GraphError::Serialization(_))), "{bad:?}");
    let command =
        JsonCommand::from_json(json!({"update": [["items", ["p"]], ["items", ["q"]]], "goto": "a"})).unwrap();
    run(&graph, JsonInput::Command(command), &config, &[StreamMode::Values]).await;
    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(state.values["items"], json!(["x", "a", "manual", "p", "q", "a"]));
}

#[tokio::test]
async fn bulk_update_state_json_makes_one_checkpoint_per_superstep() {
    let graph = graph().erase().with_checkpointer(Some(Arc::new(InMemorySaver::new())));
    let config = thread("t-bulk");
    let update =
        |values: Value, node: &str| JsonStateUpdate { values: Some(values), as_node: Some(node.into()) };
    graph
        .bulk_update_state_json(
            &config,
            vec![
                vec![update(json!({"items": ["p"], "count": 1}), "a")],
                vec![update(json!({"items": ["q"]}), "a"), update(json!({"items": ["r"]}), "ask")],
            ],
        )
        .await
        .unwrap();
    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(
        (state.values["items"].clone(), state.values["count"].clone()),
        (json!(["p", "q", "r"]), json!(1))
    );
    let history = graph.get_state_history_json(&config, ListOptions::default()).await.unwrap();
    assert_eq!(history.len(), 2, "one checkpoint per superstep");

    let nameless = JsonStateUpdate { values: Some(json!({"items": ["x"]})), as_node: None };
    let bad = graph.bulk_update_state_json(&config, vec![vec![nameless.clone(), nameless]]).await;
    assert!(matches!(bad, Err(GraphError::AsNodeRequired)), "{bad:?}");
    let bad = graph.bulk_update_state_json(&config, vec![vec![update(json!([1]), "a")]]).await;
    assert!(matches!(bad, Err(GraphError::Serialization(_))), "{bad:?}");
    let none = graph.bulk_update_state_json(&config, Vec::new()).await;
    assert!(matches!(none, Err(GraphError::NoSupersteps)), "{none:?}");
    let empty = graph.bulk_update_state_json(&config, vec![Vec::new()]).await;
    assert!(matches!(empty, Err(GraphError::NoUpdates)), "{empty:?}");
    // A copy is a superstep of its own, as in LangGraph: beside another update it is refused, and
    // nothing is saved.
    let copy = JsonStateUpdate { values: None, as_node: Some("__copy__".into()) };
    let before = graph.get_state_history_json(&config, ListOptions::default()).await.unwrap().len();
    let mixed = graph
        .bulk_update_state_json(&config, vec![vec![update(json!({"items": ["z"]}), "a"), copy.clone()]])
        .await;
    assert!(matches!(mixed, Err(GraphError::CopyWithOtherUpdates)), "{mixed:?}");
    let after = graph.get_state_history_json(&config, ListOptions::default()).await.unwrap().len();
    assert_eq!(after, before, "a refused superstep saves nothing");
    // A copy followed by an update of the copy is two supersteps.
    graph
        .bulk_update_state_json(&config, vec![vec![copy], vec![update(json!({"items": ["z"]}), "a")]])
        .await
        .unwrap();
    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(state.values["items"], json!(["p", "q", "r", "z"]));
}

#[tokio::test]
async fn an_input_that_is_not_an_object_fails_the_run_and_a_bad_write_is_the_streams_only_item() {
    let mut g = StateGraph::<crate::MessagesState>::new();
    g.add_node("n", |_s: crate::MessagesState| crate::MessagesState::update());
    g.add_edge(START, "n");
    let graph = g.compile().unwrap().erase();
    for input in [json!([1]), json!({"messages": 5})] {
        let input = JsonInput::from_json(input).unwrap();
        let parts: Vec<_> = graph
            .stream_json(input, RunnableConfig::default(), &[StreamMode::Values], RunOptions::default())
            .collect()
            .await;
        assert_eq!(parts.len(), 1);
        assert!(parts[0].is_err());
    }
    let bare = JsonInput::from_json(json!([1])).unwrap();
    let parts: Vec<_> =
        graph.stream_json(bare, RunnableConfig::default(), &[], RunOptions::default()).collect().await;
    assert!(
        matches!(&parts[..], [Err(GraphError::Serialization(m))] if m.contains("expected dict, got [1]")),
        "{parts:?}"
    );
}

/// A root-value graph (LangGraph's bare `Annotated[list, add]` schema) over a saver.
fn root_graph() -> Arc<dyn ErasedGraph> {
    use crate::root::{Append, RootState};
    let saver: Arc<dyn crate::Checkpointer> = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::<RootState<Vec<Value>, Append>>::new();
    g.add_node("a", |seen: Vec<Value>| vec![json!(seen.len())]);
    g.add_edge(START, "a");
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap().erase()
}

#[tokio::test]
async fn a_root_value_graph_takes_its_bare_value_as_input_update_and_command_update() {
    let graph = root_graph();
    let config = thread("root");
    let input = JsonInput::from_json(json!(["x", {"k": 1}])).unwrap();
    let parts: Vec<_> = graph
        .stream_json(input, config.clone(), &[StreamMode::Values], RunOptions::default())
        .collect()
        .await;
    assert!(parts.iter().all(Result::is_ok), "{parts:?}");
    assert_eq!(graph.get_state_json(&config, false).await.unwrap().values, json!(["x", {"k": 1}, 2]));

    // An object is a value like any other, written whole as LangGraph does: not a list, so it fails here.
    let object = JsonInput::from_json(json!({"__root__": ["y"]})).unwrap();
    let parts: Vec<_> = graph.stream_json(object, config.clone(), &[], RunOptions::default()).collect().await;
    assert!(matches!(&parts[..], [Err(GraphError::InvalidUpdate { .. })]), "{parts:?}");

    graph.update_state_json(&config, Some(json!(["u"])), Some("a")).await.unwrap();
    let command = JsonCommand::from_json(json!({"update": [["p", 1]], "goto": "a"})).unwrap();
    let _: Vec<_> = graph
        .stream_json(JsonInput::Command(command), config.clone(), &[], RunOptions::default())
        .collect()
        .await;
    let values = graph.get_state_json(&config, false).await.unwrap().values;
    assert_eq!(values, json!(["x", {"k": 1}, 2, "u", ["p", 1], 5]), "a list of pairs is a bare value too");
}

#[tokio::test]
async fn a_root_value_of_the_wrong_type_is_an_invalid_update() {
    let graph = root_graph();
    let input = JsonInput::from_json(json!("not a list")).unwrap();
    let parts: Vec<_> =
        graph.stream_json(input, thread("root-bad"), &[], RunOptions::default()).collect().await;
    assert!(matches!(&parts[..], [Err(GraphError::InvalidUpdate { .. })]), "{parts:?}");
}

#[tokio::test]
async fn per_run_breakpoints_replace_the_compiled_ones() {
    let saver: Arc<dyn crate::Checkpointer> = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::with_initial(state());
    g.add_node("a", |_s: &JsonState| JsonUpdate::new().write("items", json!(["a"])));
    g.add_node("b", |_s: &JsonState| JsonUpdate::new().write("items", json!(["b"])));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    let graph =
        g.compile_with(CompileConfig::new().checkpointer(saver).interrupt_before(["a"])).unwrap().erase();

    let config = thread("t4");
    let options = RunOptions { interrupt_before: Some(vec!["b".into()]), ..RunOptions::default() };
    let _: Vec<_> = graph
        .stream_json(JsonInput::from_json(json!({})).unwrap(), config.clone(), &[], options)
        .collect()
        .await;
    let state = graph.get_state_json(&config, false).await.unwrap();
    assert_eq!(state.next, vec!["b"], "the run's own breakpoint, not the compiled one before `a`");

    let config = thread("t5");
    let _: Vec<_> = graph
        .stream_json(JsonInput::from_json(json!({})).unwrap(), config.clone(), &[], RunOptions::default())
        .collect()
        .await;
    assert_eq!(graph.get_state_json(&config, false).await.unwrap().next, vec!["a"]);
}

#[test]
fn subgraph_nodes_are_listed_with_their_graphs() {
    let inner = graph();
    let mut g = StateGraph::with_initial(state());
    g.add_node("inner", inner);
    g.add_node("plain", |_s: &JsonState| JsonUpdate::new());
    g.add_edge(START, "inner");
    g.add_edge("inner", "plain");
    let outer = g.compile().unwrap().erase();
    let subgraphs = outer.subgraphs();
    assert_eq!(subgraphs.len(), 1);
    assert_eq!(subgraphs[0].0, "inner");
    assert_eq!(subgraphs[0].1.channels().len(), 2);
    assert_eq!(outer.get_graph().nodes().count(), 4);
}
