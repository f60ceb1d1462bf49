//! Messages, custom, tasks, checkpoints and debug stream modes; node runs in `stream_events`.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use futures::StreamExt as _;
use weft_graph::{CompiledGraph, Runtime, START, StateGraph, StreamData, StreamMode};
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::{PromptValue, Runnable, RunnableConfig, RunnableExt};

fn chat_graph(model: FakeChatModel) -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", move |_: Counter, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(PromptValue::from("hi"), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(CounterUpdate::log(&reply.text()))
        }
    });
    g.add_edge(START, "agent");
    g.compile().unwrap()
}

#[tokio::test]
async fn messages_mode_streams_model_tokens_with_node_metadata() {
    let app = chat_graph(FakeChatModel::new(["hello there friend"]));
    let parts: Vec<_> = app
        .stream(CounterUpdate::default(), &RunnableConfig::default(), &[StreamMode::Messages])
        .collect()
        .await;
    let mut tokens = String::new();
    for p in parts {
        match p.unwrap().data {
            StreamData::Message { chunk, metadata } => {
                assert_eq!(metadata.get("langgraph_node").and_then(|v| v.as_str()), Some("agent"));
                assert_eq!(metadata.get("langgraph_step").and_then(|v| v.as_i64()), Some(1));
                tokens.push_str(&chunk.text());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(tokens, "hello there friend");
}

#[tokio::test]
async fn without_messages_mode_the_model_is_not_streamed() {
    let app = chat_graph(FakeChatModel::new(["hello there"]));
    let parts: Vec<_> = app
        .stream(CounterUpdate::default(), &RunnableConfig::default(), &[StreamMode::Updates])
        .collect()
        .await;
    assert_eq!(parts.len(), 1);
    assert!(matches!(parts[0].as_ref().unwrap().data, StreamData::Updates { .. }));
}

#[tokio::test]
async fn custom_mode_carries_values_written_by_nodes() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter, rt: &Runtime| {
        rt.write(&serde_json::json!({"progress": 50}));
        CounterUpdate::count(1)
    });
    g.add_edge(START, "a");
    let app = g.compile().unwrap();
    let parts: Vec<_> = app
        .stream(
            CounterUpdate::default(),
            &RunnableConfig::default(),
            &[StreamMode::Custom, StreamMode::Updates],
        )
        .map(|p| p.unwrap().data)
        .collect()
        .await;
    assert!(
        matches!(&parts[0], StreamData::Custom { node, value } if node == "a" && value["progress"] == 50)
    );
    assert!(matches!(&parts[1], StreamData::Updates { node, .. } if node == "a"));
}

#[tokio::test]
async fn tasks_mode_reports_start_and_result() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_edge(START, "a");
    let app = g.compile().unwrap();
    let parts: Vec<_> = app
        .stream(CounterUpdate::count(1), &RunnableConfig::default(), &[StreamMode::Tasks])
        .map(|p| p.unwrap().data)
        .collect()
        .await;
    assert_eq!(parts.len(), 2);
    let StreamData::TaskStart { id: start_id, name, input, step, .. } = &parts[0] else {
        panic!("{:?}", parts[0])
    };
    assert_eq!((name.as_str(), *step), ("a", 1));
    assert_eq!(input["count"], 1);
    let StreamData::TaskResult { id, error, result, .. } = &parts[1] else { panic!("{:?}", parts[1]) };
    assert_eq!(id, start_id);
    assert!(error.is_none());
    assert_eq!(result, &vec![("count".to_owned(), serde_json::json!(2))]);
}

#[tokio::test]
async fn stream_events_shows_the_graph_and_its_nodes_as_chains() {
    let app = chat_graph(FakeChatModel::new(["a b"]));
    let input = weft_graph::GraphInput::Update(vec![CounterUpdate::default()]);
    let events: Vec<(String, String)> = app
        .stream_events(input, &RunnableConfig::default())
        .map(|e| {
            let e = e.unwrap();
            (e.event, e.name)
        })
        .collect()
        .await;
    let starts: Vec<_> = events.iter().filter(|(e, _)| e.ends_with("_start")).cloned().collect();
    assert_eq!(starts[0], ("on_chain_start".to_owned(), "LangGraph".to_owned()));
    assert_eq!(starts[1], ("on_chain_start".to_owned(), "agent".to_owned()));
    assert_eq!(starts[2].0, "on_chat_model_start");
    assert!(events.iter().filter(|(e, _)| e == "on_chat_model_stream").count() >= 2);
    assert_eq!(events.last().unwrap(), &("on_chain_end".to_owned(), "LangGraph".to_owned()));
}

#[derive(weft_graph::State, Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Chat {
    #[state(add_messages)]
    messages: weft_graph::Messages,
}

#[tokio::test]
async fn messages_mode_also_sends_written_messages_that_were_not_streamed_once() {
    use weft_runnable_core::Message;
    let model = FakeChatModel::new(["streamed reply"]);
    let mut g = StateGraph::<Chat>::new();
    g.add_node("agent", move |s: Chat, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(PromptValue::from(s.messages.to_vec()), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(Chat::update().messages(vec![Message::Ai(reply)]))
        }
    });
    g.add_node("tool", |_: Chat| Chat::update().messages(vec![Message::tool("42", "call_1").with_id("t1")]));
    g.add_node("again", |s: Chat| Chat::update().messages(vec![s.messages[1].clone()]));
    g.add_edge(START, "agent");
    g.add_edge("agent", "tool");
    g.add_edge("tool", "again");
    let app = g.compile().unwrap();
    let input = Chat::update().messages(vec![Message::human("hi").with_id("h1")]);
    let parts: Vec<(String, String)> = app
        .stream(input, &RunnableConfig::default(), &[StreamMode::Messages])
        .map(|p| match p.unwrap().data {
            StreamData::Message { chunk, metadata } => {
                (metadata["langgraph_node"].as_str().unwrap().to_owned(), chunk.text())
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect()
        .await;
    let agent_tokens: String = parts.iter().filter(|(n, _)| n == "agent").map(|(_, t)| t.as_str()).collect();
    assert_eq!(agent_tokens, "streamed reply", "the model's message is not sent again whole");
    let others: Vec<_> = parts.iter().filter(|(n, _)| n != "agent").collect();
    assert_eq!(
        others,
        vec![&("tool".to_owned(), "42".to_owned())],
        "re-written messages already in the state are not sent"
    );
}

fn saved_chain() -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_node("b", |s: Counter| CounterUpdate::count(s.count * 10));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    let saver = std::sync::Arc::new(weft_graph::InMemorySaver::new());
    g.compile_with(weft_graph::CompileConfig::new().checkpointer(saver)).unwrap()
}

#[tokio::test]
async fn checkpoints_mode_yields_each_saved_checkpoint_with_its_step_values_and_next() {
    let app = saved_chain();
    let thread = RunnableConfig::default().with_configurable("thread_id", "t");
    let parts: Vec<_> = app
        .stream(CounterUpdate::count(1), &thread, &[StreamMode::Checkpoints])
        .map(|p| p.unwrap())
        .collect()
        .await;
    let mut seen = Vec::new();
    for part in &parts {
        let StreamData::Checkpoint(event) = &part.data else { panic!("{part:?}") };
        let weft_graph::CheckpointEvent { config, step, values, next, .. } = &**event;
        seen.push((*step, values["count"].clone(), next.clone(), config.checkpoint_id.clone().unwrap()));
    }
    let steps: Vec<(i64, serde_json::Value, Vec<String>)> =
        seen.iter().map(|(s, v, n, _)| (*s, v.clone(), n.clone())).collect();
    assert_eq!(
        steps,
        vec![
            (-1, serde_json::json!(0), vec!["__start__".to_owned()]),
            (0, serde_json::json!(1), vec!["a".to_owned()]),
            (1, serde_json::json!(2), vec!["b".to_owned()]),
            (2, serde_json::json!(20), vec![]),
        ]
    );
    let history = app.get_state_history(&thread, Default::default()).await.unwrap();
    let saved: Vec<String> =
        history.iter().rev().map(|s| s.config.as_ref().unwrap().checkpoint_id.clone().unwrap()).collect();
    let streamed: Vec<String> = seen.into_iter().map(|(_, _, _, id)| id).collect();
    assert_eq!(streamed, saved, "each chunk addresses the checkpoint it announces");
}

#[tokio::test]
async fn debug_mode_yields_checkpoints_and_task_starts_and_results() {
    let app = saved_chain();
    let thread = RunnableConfig::default().with_configurable("thread_id", "t");
    // Sync durability: each checkpoint is saved (and announced) before the next step starts.
    let options = weft_graph::RunOptions { durability: weft_graph::Durability::Sync, ..Default::default() };
    let kinds: Vec<String> = app
        .stream_with(CounterUpdate::count(1), &thread, &[StreamMode::Debug], options)
        .map(|p| match p.unwrap().data {
            // LangGraph's wrapper: `{step, timestamp, type, payload}`.
            StreamData::Debug { step, timestamp, kind, payload } => {
                assert!(timestamp.ends_with("+00:00"), "{timestamp}");
                match kind.as_str() {
                    "checkpoint" => {
                        assert_eq!(payload["metadata"]["step"], step);
                        assert!(payload["config"]["configurable"]["checkpoint_id"].is_string());
                        format!("checkpoint {step}")
                    }
                    "task" => format!("start {}", payload["name"].as_str().unwrap()),
                    "task_result" => format!("result {}", payload["name"].as_str().unwrap()),
                    other => panic!("unexpected kind {other}"),
                }
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect()
        .await;
    assert_eq!(
        kinds,
        [
            "checkpoint -1",
            "checkpoint 0",
            "start a",
            "result a",
            "checkpoint 1",
            "start b",
            "result b",
            "checkpoint 2"
        ]
    );
}

#[tokio::test]
async fn as_a_runnable_a_graph_streams_its_state_after_each_step() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("inc", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_edge(START, "inc");
    g.add_conditional_edges("inc", |s: &Counter| if s.count < 3 { "inc" } else { weft_graph::END }, None);
    let app = g.compile().unwrap();
    let input = weft_graph::GraphInput::Update(vec![CounterUpdate::count(0)]);
    let counts: Vec<i64> = Runnable::stream(&app, input, &RunnableConfig::default())
        .map(|c| c.unwrap().value.count)
        .collect()
        .await;
    assert_eq!(counts, vec![0, 1, 2, 3]);
}
