//! Quick chat-only checks of `ChatOpenAI` against llama-server with SmolLM2-135M-Instruct (no tool
//! support), started by this test binary from `WEFT_LLAMA_SERVER_BIN` and `WEFT_SMOLLM2_MODEL`.
#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod llama_common;

use futures::StreamExt as _;
use serde_json::Value;
use weft_runnable_core::{Merge as _, Message, PromptValue, Runnable, RunnableConfig};

use llama_common::{Model, server};

#[tokio::test]
async fn smollm2_answers_whole_and_streamed_with_usage() {
    let Some(server) = server(Model::SmolLm2, "smollm2_answers_whole_and_streamed_with_usage") else {
        return;
    };
    let model = server.chat(Model::SmolLm2, 16);
    let input = PromptValue::from(vec![Message::human("What is the capital of France?")]);

    let reply = model.invoke(input.clone(), &RunnableConfig::default()).await.unwrap();
    assert!(!reply.text().trim().is_empty(), "{reply:?}");
    let usage = reply.usage_metadata.clone().unwrap();
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0 && usage.output_tokens <= 16, "{usage:?}");
    assert!(matches!(
        reply.response_metadata.get("finish_reason").and_then(Value::as_str),
        Some("stop" | "length")
    ));

    let mut stream = model.stream(input, &RunnableConfig::default());
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk.unwrap());
    }
    assert!(chunks.iter().filter(|chunk| !chunk.text().is_empty()).count() > 1, "{chunks:?}");
    let whole = chunks.into_iter().reduce(|a, b| a.merge(b).unwrap()).unwrap().finish();
    assert!(!whole.text().trim().is_empty(), "{whole:?}");
    let streamed = whole.usage_metadata.unwrap();
    assert!(streamed.output_tokens > 0 && streamed.output_tokens <= 16, "{streamed:?}");
    assert_eq!(streamed.input_tokens, usage.input_tokens, "the same prompt");
}
