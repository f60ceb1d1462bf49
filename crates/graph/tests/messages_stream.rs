//! `messages` stream mode as LangGraph 1.2 and langchain-core 1.7 show it: tokens typed `AIMessageChunk`, a
//! stream the model leaves open closed by an empty chunk, whole written messages with the node's metadata.
#![allow(clippy::panic)]
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    CompileConfig, CompiledGraph, MessagesState, RunOptions, Runtime, START, StateGraph, StreamData,
    StreamMode,
};
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::{AiMessage, CallOptions, ChatModel, Message, Result, Runnable, RunnableConfig};

fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", "t")
}

/// `reply` calls `model`; `sign` writes a message of its own.
fn reply_then_sign<M>(model: M) -> StateGraph<MessagesState>
where
    M: Runnable<weft_runnable_core::PromptValue, AiMessage> + Clone + 'static,
{
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("reply", move |s: MessagesState, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(s.messages.into(), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(MessagesState::update().messages(vec![reply.into()]))
        }
    });
    g.add_node("sign", |_: &MessagesState| {
        MessagesState::update().messages(vec![Message::ai("signed").with_id("sig-1")])
    });
    g.add_edge(START, "reply").add_edge("reply", "sign");
    g
}

fn hi() -> weft_graph::MessagesStateUpdate {
    MessagesState::update().messages(vec![Message::human("hi").with_id("h-1")])
}

/// Each `messages` chunk as (message JSON, metadata), with the chunks' namespaces.
async fn messages(
    app: &CompiledGraph<MessagesState>,
    options: RunOptions,
) -> Vec<(Vec<String>, Value, Map<String, Value>)> {
    app.stream_with(hi(), &thread(), &[StreamMode::Messages], options)
        .map(|part| {
            let part = part.unwrap();
            let StreamData::Message { chunk, metadata } = part.data else { panic!("{:?}", part.data) };
            (part.ns, serde_json::to_value(&chunk).unwrap(), metadata)
        })
        .collect()
        .await
}

#[tokio::test]
async fn streamed_tokens_are_ai_message_chunks_closed_by_an_empty_last_chunk() {
    let app = reply_then_sign(FakeChatModel::new(["Hello there, friend"]))
        .compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())))
        .unwrap();
    let seen = messages(&app, RunOptions::default()).await;
    let shown: Vec<(&str, &str, Option<&str>, &str)> = seen
        .iter()
        .map(|(_, m, meta)| {
            (
                m["type"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
                m.get("chunk_position").and_then(Value::as_str),
                meta["langgraph_node"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            ("AIMessageChunk", "Hello", None, "reply"),
            ("AIMessageChunk", " there,", None, "reply"),
            ("AIMessageChunk", " friend", None, "reply"),
            ("AIMessageChunk", "", Some("last"), "reply"),
            ("ai", "signed", None, "sign"),
        ]
    );
    // The closing chunk carries the run's id, which the tokens carry too (the fake model gives none).
    let ids: Vec<&Value> = seen[..4].iter().map(|(_, m, _)| &m["id"]).collect();
    assert!(ids[0].as_str().unwrap().starts_with("lc_run--"));
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    // The state holds the reply as a whole message.
    let state = app.get_state(&thread()).await.unwrap().values;
    let reply = state.messages.iter().find(|m| m.text() == "Hello there, friend").unwrap();
    assert_eq!(serde_json::to_value(reply).unwrap()["type"], "ai");
}

#[tokio::test]
async fn tokens_carry_the_task_namespace_and_written_messages_the_nodes_metadata() {
    let app = reply_then_sign(FakeChatModel::new(["Hello there"]))
        .compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())))
        .unwrap();
    let seen = messages(&app, RunOptions::default()).await;
    let (_, _, token) = &seen[0];
    let ns = token["checkpoint_ns"].as_str().unwrap();
    assert!(ns.starts_with("reply:"), "{ns}");
    assert_eq!(token["langgraph_checkpoint_ns"], ns);
    // A message a node writes carries the node run's metadata, which has no `checkpoint_ns` at the root
    // (LangGraph gives it only to the runs a task starts).
    let (_, signed, meta) = seen.last().unwrap();
    assert_eq!(signed["content"], "signed");
    assert_eq!(meta["thread_id"], "t");
    assert_eq!(meta.get("checkpoint_ns"), None, "{meta:?}");
    assert!(meta["langgraph_checkpoint_ns"].as_str().unwrap().starts_with("sign:"));
}

#[tokio::test]
async fn inside_a_subgraph_tokens_and_messages_carry_the_parent_tasks_namespace() {
    let sub = reply_then_sign(FakeChatModel::new(["a b"])).compile().unwrap();
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("sub", sub);
    g.add_edge(START, "sub");
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let seen = messages(&app, RunOptions { subgraphs: true, ..RunOptions::default() }).await;
    assert_eq!(seen.len(), 4, "{seen:?}");
    for (ns, _, meta) in &seen {
        assert_eq!(ns.len(), 1);
        assert!(ns[0].starts_with("sub:"), "{ns:?}");
        assert_eq!(meta["checkpoint_ns"], ns[0].as_str(), "{meta:?}");
        let task_ns = meta["langgraph_checkpoint_ns"].as_str().unwrap();
        assert!(task_ns.starts_with(&format!("{}|", ns[0])), "{task_ns}");
    }
}

/// A model that only answers whole (no `stream_chunks`).
#[derive(Clone)]
struct Whole;

#[async_trait]
impl ChatModel for Whole {
    fn model_name(&self) -> &str {
        "whole-1"
    }

    fn provider(&self) -> &str {
        "local"
    }

    async fn generate(&self, _: Vec<Message>, _: &CallOptions, _: &RunnableConfig) -> Result<AiMessage> {
        Ok(AiMessage::new("all at once"))
    }
}

weft_runnable_core::impl_chat_model_runnable!(Whole);

#[tokio::test]
async fn a_model_that_does_not_stream_sends_its_reply_as_one_whole_message() {
    let app = reply_then_sign(Whole)
        .compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())))
        .unwrap();
    let seen = messages(&app, RunOptions::default()).await;
    let shown: Vec<(Value, Value)> =
        seen.iter().map(|(_, m, _)| (m["type"].clone(), m["content"].clone())).collect();
    assert_eq!(shown, vec![(json!("ai"), json!("all at once")), (json!("ai"), json!("signed"))]);
}

#[tokio::test]
async fn a_node_gives_the_state_messages_to_a_model_directly() {
    let model = FakeChatModel::new(["pong"]);
    let seen = model.clone();
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("reply", move |s: MessagesState, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(s.messages.into(), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(MessagesState::update().messages(vec![reply.into()]))
        }
    });
    g.add_edge(START, "reply");
    let out = g.compile().unwrap().invoke(hi(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.messages.last().unwrap().text(), "pong");
    let asked = seen.calls();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].messages.iter().map(Message::text).collect::<Vec<_>>(), ["hi"]);
    // Borrowed: the list stays with the state.
    let state = MessagesState { messages: vec![Message::human("a"), Message::ai("b")].into() };
    let prompt: weft_runnable_core::PromptValue = (&state.messages).into();
    assert_eq!(prompt.into_messages().len(), 2);
}

/// A model streaming `words` words at once (its stream never waits), counting the chunks it has handed
/// out.
#[derive(Clone)]
struct Eager {
    words: usize,
    handed: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait]
impl ChatModel for Eager {
    fn model_name(&self) -> &str {
        "eager-1"
    }

    fn provider(&self) -> &str {
        "local"
    }

    async fn generate(&self, _: Vec<Message>, _: &CallOptions, _: &RunnableConfig) -> Result<AiMessage> {
        Ok(AiMessage::new("unused"))
    }

    fn stream_chunks<'a>(
        &'a self,
        _: Vec<Message>,
        _: &CallOptions,
        _: &RunnableConfig,
    ) -> futures::stream::BoxStream<'a, Result<AiMessage>> {
        let handed = Arc::clone(&self.handed);
        futures::stream::iter(0..self.words)
            .map(move |i| {
                handed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut chunk = AiMessage::new(format!(" w{i}"));
                chunk.is_chunk = true;
                Ok(chunk)
            })
            .boxed()
    }
}

weft_runnable_core::impl_chat_model_runnable!(Eager);

#[tokio::test]
async fn a_model_whose_stream_never_waits_does_not_run_ahead_of_the_reader() {
    let handed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let model = Eager { words: 2_000, handed: Arc::clone(&handed) };
    let app = reply_then_sign(model).compile().unwrap();
    let mut stream =
        app.stream_with(hi(), &RunnableConfig::default(), &[StreamMode::Messages], RunOptions::default());
    let (mut read, mut furthest_ahead) = (0usize, 0usize);
    while let Some(part) = stream.next().await {
        let part = part.unwrap();
        if let StreamData::Message { chunk, .. } = part.data {
            if matches!(&*chunk, Message::Ai(m) if m.is_chunk) && !chunk.text().is_empty() {
                read += 1;
                let ahead = handed.load(std::sync::atomic::Ordering::SeqCst) - read;
                furthest_ahead = furthest_ahead.max(ahead);
            }
        }
    }
    assert_eq!(read, 2_000);
    // Without a bound the whole reply would queue before the first was read (1,999 ahead); the stream's
    // queue holds 128 chunks before the model waits for the reader.
    assert!(furthest_ahead <= 128, "the model ran {furthest_ahead} chunks ahead of the reader");
}
