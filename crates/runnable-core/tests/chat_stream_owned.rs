//! A chat model's stream may outlive the model value it was called on: `model.stream(..)` on a temporary,
//! or a stream moved into another task.
#![allow(clippy::unwrap_used, missing_docs)]

use futures::StreamExt as _;
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::{AiMessage, ChatModelExt as _, Merge as _, RunnableConfig, ToolSpec};

async fn texts(
    stream: futures::stream::BoxStream<'static, weft_runnable_core::Result<AiMessage>>,
) -> Vec<String> {
    stream.map(|chunk| chunk.unwrap().text()).collect().await
}

#[tokio::test]
async fn a_temporary_models_stream_yields_every_chunk_then_the_closing_one() {
    let stream = FakeChatModel::new(["Hello big world"]).stream("hi", &RunnableConfig::default());
    let texts = texts(stream).await;
    assert_eq!(texts, ["Hello", " big", " world", ""]);
}

#[tokio::test]
async fn a_bound_temporarys_stream_owns_the_bound_options() {
    let model = FakeChatModel::new(["done"]);
    let spec = ToolSpec::new("lookup", "Looks a word up", serde_json::json!({"type": "object"}));
    let stream = model.clone().bind_tools([spec], None).stream("hi", &RunnableConfig::default());
    let merged = stream
        .fold(None::<AiMessage>, |acc, chunk| async move {
            let chunk = chunk.unwrap();
            Some(match acc {
                Some(acc) => acc.merge(chunk).unwrap(),
                None => chunk,
            })
        })
        .await
        .unwrap();
    assert_eq!(merged.text(), "done");
    let calls = model.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].options.tools.len(), 1, "the bound tool reached the model: {calls:?}");
}

#[tokio::test]
async fn the_stream_moves_into_another_task() {
    let stream = FakeChatModel::new(["one two"]).stream("hi", &RunnableConfig::default());
    let texts = tokio::spawn(texts(stream)).await.unwrap();
    assert_eq!(texts.concat(), "one two");
}

#[tokio::test]
async fn a_failing_reply_is_the_streams_one_error() {
    let stream = FakeChatModel::new([weft_runnable_core::fakes::FakeReply::rate_limited()])
        .stream("hi", &RunnableConfig::default());
    let items: Vec<_> = stream.collect().await;
    assert_eq!(items.len(), 1);
    assert!(items[0].as_ref().unwrap_err().to_string().contains("rate limit"), "{items:?}");
}
