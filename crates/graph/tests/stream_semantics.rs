//! Stream chunks as LangGraph sends them: values at a pause and at a resume, one interrupt chunk per
//! paused task, updates before task results, triggers, checkpoint events, run metadata.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    Command, CompileConfig, CompiledGraph, Runtime, START, State, StateGraph, StreamData, StreamMode,
};
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::{PromptValue, Runnable, RunnableConfig};

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn log(s: &str) -> DocUpdate {
    DocUpdate::new().log(vec![s.to_owned()])
}

/// a, then p and q in parallel, each asking a question.
fn askers() -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    for name in ["p", "q"] {
        g.add_node(name, move |_: Doc, rt: &Runtime| -> weft_runnable_core::Result<DocUpdate> {
            let v: String = rt.interrupt(format!("q{name}"))?;
            Ok(log(&format!("{name}:{v}")))
        });
        g.add_edge("a", name);
    }
    g.add_edge(START, "a");
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

/// Each chunk in a line: its mode and what LangGraph shows of it.
fn describe(data: StreamData<Doc>) -> String {
    match data {
        StreamData::Values { state, interrupts } => {
            let ids: Vec<String> = interrupts.iter().map(|i| i.value.to_string()).collect();
            format!("values {:?} {}", state.log, ids.join(","))
        }
        StreamData::Updates { node, updates, .. } => {
            let logs: Vec<String> = updates.iter().filter_map(|u| u.log.clone()).flatten().collect();
            format!("updates {node} {logs:?}")
        }
        StreamData::Interrupt(list) => {
            format!("interrupt {}", list.iter().map(|i| i.value.to_string()).collect::<Vec<_>>().join(","))
        }
        StreamData::TaskStart { name, triggers, .. } => format!("start {name} {triggers:?}"),
        StreamData::TaskResult { name, result, interrupts, .. } => {
            format!("result {name} {} {}", json!(result), interrupts.len())
        }
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn a_pause_and_a_resume_stream_as_in_langgraph() {
    let app = askers();
    let modes = [StreamMode::Values, StreamMode::Updates, StreamMode::Tasks];
    let parts: Vec<String> =
        app.stream(Doc::update(), &thread("t"), &modes).map(|p| describe(p.unwrap().data)).collect().await;
    let pause: Vec<&str> =
        parts.iter().map(String::as_str).skip_while(|p| !p.starts_with("start p")).collect();
    assert_eq!(
        pause,
        [
            r#"start p ["branch:to:p"]"#,
            r#"start q ["branch:to:q"]"#,
            r#"interrupt "qp""#,
            r#"values ["a"] "qp""#,
            "result p [] 1",
            r#"interrupt "qq""#,
            r#"values ["a"] "qq""#,
            "result q [] 1",
        ],
        "one interrupt chunk and one values chunk per paused task: {parts:#?}"
    );
    assert!(parts.contains(&r#"updates a ["a"]"#.to_owned()));
    let a_update = parts.iter().position(|p| p == r#"updates a ["a"]"#).unwrap();
    let a_result = parts.iter().position(|p| p.starts_with("result a")).unwrap();
    assert!(a_update < a_result, "a task's updates come before its result: {parts:#?}");
    assert_eq!(parts[a_result], r#"result a [["log",["a"]]] 0"#, "a result holds state writes only");

    let pending = app.get_state(&thread("t")).await.unwrap().interrupts;
    let map = pending.iter().map(|i| (i.id.clone(), json!("x"))).collect();
    let parts: Vec<String> = app
        .stream(Command::<Doc>::resume_by_id(map), &thread("t"), &[StreamMode::Values, StreamMode::Updates])
        .map(|p| describe(p.unwrap().data))
        .collect()
        .await;
    assert_eq!(
        parts,
        [
            r#"values ["a"] "#,
            r#"updates p ["p:x"]"#,
            r#"updates q ["q:x"]"#,
            r#"values ["a", "p:x", "q:x"] "#
        ],
        "a resumed run starts with the state it resumes"
    );
}

#[tokio::test]
async fn checkpoint_events_carry_metadata_parent_and_tasks() {
    let app = askers();
    let parts: Vec<StreamData<Doc>> = app
        .stream(Doc::update(), &thread("t"), &[StreamMode::Checkpoints])
        .map(|p| p.unwrap().data)
        .collect()
        .await;
    let mut previous = None;
    for part in parts {
        let StreamData::Checkpoint(event) = part else { panic!("{part:?}") };
        let weft_graph::CheckpointEvent { config, parent_config, metadata, step, next, tasks, .. } = *event;
        assert_eq!(metadata.step, step);
        assert_eq!(parent_config, previous, "each checkpoint names the one before it");
        assert_eq!(tasks.iter().map(|t| t.name.clone()).collect::<Vec<_>>(), next);
        previous = Some(config);
    }
    let history = app.get_state_history(&thread("t"), Default::default()).await.unwrap();
    let latest = history[0].tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
    assert_eq!(latest.len(), 2);
}

#[tokio::test]
async fn message_chunks_carry_thread_namespace_and_triggers() {
    let model = FakeChatModel::new(["hello there"]);
    let mut g = StateGraph::<Doc>::new();
    g.add_node("reply", move |_: Doc, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(PromptValue::from("hi"), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(log(&reply.text()))
        }
    });
    g.add_edge(START, "reply");
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let parts: Vec<StreamData<Doc>> = app
        .stream(Doc::update(), &thread("t7"), &[StreamMode::Messages])
        .map(|p| p.unwrap().data)
        .collect()
        .await;
    assert!(!parts.is_empty());
    for part in parts {
        let StreamData::Message { metadata, .. } = part else { panic!("{part:?}") };
        assert_eq!(metadata["thread_id"], "t7");
        assert_eq!(metadata["langgraph_triggers"], json!(["branch:to:reply"]));
        let ns = metadata["checkpoint_ns"].as_str().unwrap();
        assert!(ns.starts_with("reply:"), "{ns}");
        assert_eq!(metadata["langgraph_checkpoint_ns"], ns);
    }
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Inner {
    #[state(append)]
    log: Vec<String>,
}

fn child(name: &'static str, asks: bool) -> CompiledGraph<Inner> {
    let mut g = StateGraph::<Inner>::new();
    g.add_node("one", move |_: Inner, rt: &Runtime| -> weft_runnable_core::Result<InnerUpdate> {
        let answer: String = if asks { rt.interrupt(format!("{name}?"))? } else { "-".to_owned() };
        Ok(InnerUpdate::new().log(vec![format!("{name}:{answer}")]))
    });
    g.add_edge(START, "one");
    g.compile().unwrap()
}

#[tokio::test]
async fn a_finished_subgraph_task_is_reemitted_as_cached_when_its_sibling_resumes() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("s1", child("s1", false));
    g.add_node("s2", child("s2", true));
    g.add_edge(START, "s1");
    g.add_edge(START, "s2");
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let parts: Vec<(String, bool)> = app
        .stream(Command::<Doc>::resume("B"), &thread("t"), &[StreamMode::Updates])
        .filter_map(|p| async move {
            match p.unwrap().data {
                StreamData::Updates { node, cached, .. } => Some((node, cached)),
                _ => None,
            }
        })
        .collect()
        .await;
    assert_eq!(parts, [("s1".to_owned(), true), ("s2".to_owned(), false)]);
}
