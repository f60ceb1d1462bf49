//! How a chat model's run streams its chunks, as langchain-core 1.7 does: a stream the model leaves open is
//! closed by an empty chunk marked `chunk_position: "last"`; one it closes, or a whole reply, is not.
#![allow(clippy::unwrap_used, missing_docs)]

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use serde_json::json;
use weft_runnable_core::{
    AiMessage, CallOptions, ChatModel, Content, EventRecorder, Message, Result, Runnable, RunnableConfig,
};

/// A model whose stream is the given chunks (its `generate` is their text).
#[derive(Clone)]
struct Chunks(Vec<AiMessage>);

#[async_trait]
impl ChatModel for Chunks {
    fn model_name(&self) -> &str {
        "chunks-1"
    }

    fn provider(&self) -> &str {
        "local"
    }

    async fn generate(&self, _: Vec<Message>, _: &CallOptions, _: &RunnableConfig) -> Result<AiMessage> {
        Ok(AiMessage::new(self.0.iter().map(AiMessage::text).collect::<String>()))
    }

    fn stream_chunks<'a>(
        &'a self,
        _: Vec<Message>,
        _: &CallOptions,
        _: &RunnableConfig,
    ) -> BoxStream<'a, Result<AiMessage>> {
        stream::iter(self.0.clone().into_iter().map(Ok)).boxed()
    }
}

weft_runnable_core::impl_chat_model_runnable!(Chunks);

/// A model that does not stream.
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

async fn streamed<M: Runnable<weft_runnable_core::PromptValue, AiMessage>>(model: &M) -> Vec<AiMessage> {
    model.stream("hi".into(), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await
}

#[tokio::test]
async fn an_open_stream_is_closed_by_an_empty_last_chunk_with_the_run_id() {
    let id = Some("prov-1".to_owned());
    let model = Chunks(vec![
        AiMessage { id: id.clone(), ..AiMessage::chunk("a") },
        AiMessage { id, ..AiMessage::chunk(" b") },
    ]);
    let chunks = streamed(&model).await;
    assert_eq!(chunks.len(), 3);
    let closing = &chunks[2];
    assert!(closing.is_chunk);
    assert_eq!((closing.text(), closing.chunk_position.as_deref()), (String::new(), Some("last")));
    // The run's id, as langchain-core gives it, whatever the model's chunks carry; merging keeps the
    // provider's.
    assert!(closing.id.as_deref().unwrap().starts_with("lc_run--"), "{closing:?}");
    let merged = chunks.into_iter().reduce(|a, b| model.merge_chunks(a, b).unwrap()).unwrap();
    assert_eq!((merged.text(), merged.id.as_deref()), ("a b".to_owned(), Some("prov-1")));
}

#[tokio::test]
async fn after_block_content_the_closing_chunk_holds_an_empty_block_list() {
    let block = json!({"type": "text", "text": "a", "index": 0});
    let model = Chunks(vec![AiMessage { content: Content::Blocks(vec![block]), ..AiMessage::chunk("") }]);
    let chunks = streamed(&model).await;
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[1].content, Content::Blocks(Vec::new()));
}

#[tokio::test]
async fn a_stream_the_model_closes_itself_is_not_closed_again() {
    let last = AiMessage { chunk_position: Some("last".to_owned()), ..AiMessage::chunk(" b") };
    let chunks = streamed(&Chunks(vec![AiMessage::chunk("a"), last])).await;
    let texts: Vec<String> = chunks.iter().map(AiMessage::text).collect();
    assert_eq!(texts, vec!["a", " b"]);
}

#[tokio::test]
async fn a_model_that_does_not_stream_yields_its_whole_reply_unclosed() {
    let chunks = streamed(&Whole).await;
    assert_eq!(chunks.len(), 1);
    assert!(!chunks[0].is_chunk);
    assert_eq!(chunks[0].chunk_position, None);
}

#[tokio::test]
async fn model_events_carry_chunks_typed_as_langchain_types_them() {
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    Chunks(vec![AiMessage::chunk("a")]).invoke("hi".into(), &config).await.unwrap();
    Whole.invoke("hi".into(), &config).await.unwrap();
    let types: Vec<_> = recorder
        .events()
        .iter()
        .filter(|e| e.event == "on_chat_model_stream")
        .map(|e| e.data.chunk.as_ref().unwrap()["type"].clone())
        .collect();
    assert_eq!(types, vec![json!("AIMessageChunk"), json!("AIMessageChunk"), json!("ai")]);
}

#[test]
fn an_ai_chunk_serialises_as_ai_message_chunk_and_reads_back_as_one() {
    let chunk = Message::Ai(AiMessage::chunk("par")).with_id("run-1");
    let value = serde_json::to_value(&chunk).unwrap();
    assert_eq!(value["type"], "AIMessageChunk");
    assert_eq!(value.get("is_chunk"), None);
    let back: Message = serde_json::from_value(value).unwrap();
    assert_eq!(back, chunk);
    let whole = Message::Ai(back.as_ai().unwrap().clone().finish());
    assert_eq!(serde_json::to_value(&whole).unwrap()["type"], "ai");
    assert_eq!(whole.type_name(), "ai");
}
