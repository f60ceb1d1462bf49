//! `ChatOpenAI` and `OpenAIEmbeddings` against an HTTP mock fed with exact OpenAI bodies and SSE streams:
//! requests as sent, answers as parsed, odd streams, errors and retries.
#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod chat;
mod embeddings;
mod failures;

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_integrations::openai::{ChatOpenAI, OpenAIEmbeddings, OpenAIError};
use weft_runnable_core::{
    AiMessage, CallOptions, ChatModel, ChatModelExt, Embeddings, Merge as _, Message, ModelErrorKind,
    PromptValue, Runnable, RunnableConfig, StructuredOutputMethod, ToolChoice, ToolSpec,
};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const COMPLETIONS: &str = "/v1/chat/completions";

fn model(server: &MockServer) -> ChatOpenAI {
    ChatOpenAI::builder()
        .model("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .api_key("sk-test-key")
        .retry_delay(Duration::from_millis(10), Duration::from_millis(50))
        .build()
        .unwrap()
}

fn completion(message: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-abc", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-test-0613",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21,
                  "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}
    })
}

fn text_reply(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_json(completion(json!({"role": "assistant", "content": text}), "stop"))
}

/// An SSE body of `chunks` (each a JSON chunk), ended by `[DONE]` when `done`.
fn sse(chunks: &[Value], done: bool) -> ResponseTemplate {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-s1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "gpt-test-0613",
           "system_fingerprint": "fp_1", "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
}

fn usage_chunk() -> Value {
    json!({"id": "chatcmpl-s1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "gpt-test-0613",
           "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10,
                                    "prompt_tokens_details": {"cached_tokens": 2}}})
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST")).and(path(COMPLETIONS)).respond_with(response).mount(server).await;
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server.received_requests().await.unwrap().iter().map(|r| r.body_json::<Value>().unwrap()).collect()
}

fn prompt(text: &str) -> PromptValue {
    PromptValue::from(vec![Message::system("You are terse."), Message::human(text)])
}

async fn collect(
    model: &ChatOpenAI,
    input: PromptValue,
) -> (Vec<AiMessage>, Option<weft_runnable_core::Error>) {
    let mut chunks = Vec::new();
    let mut stream = model.stream(input, &RunnableConfig::default());
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => chunks.push(chunk),
            Err(err) => return (chunks, Some(err)),
        }
    }
    (chunks, None)
}

fn merged(chunks: &[AiMessage]) -> AiMessage {
    chunks.iter().cloned().reduce(|a, b| a.merge(b).unwrap()).unwrap().finish()
}

fn openai_error(err: &weft_runnable_core::Error) -> &OpenAIError {
    OpenAIError::from_weft(err).unwrap_or_else(|| panic!("not an openai error: {err:?}"))
}
