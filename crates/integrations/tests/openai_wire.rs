//! `ChatOpenAI` and `OpenAIEmbeddings` against an HTTP mock fed with exact OpenAI bodies and SSE streams:
//! requests as sent, answers as parsed, odd streams, errors and retries.
#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

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

#[tokio::test]
async fn invoke_sends_the_settings_and_reads_text_usage_and_metadata() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(header("authorization", "Bearer sk-test-key"))
        .and(header("openai-organization", "org-1"))
        .respond_with(text_reply("Hello there."))
        .mount(&server)
        .await;
    let model = ChatOpenAI::builder()
        .model("gpt-test")
        .base_url(format!("{}/v1/", server.uri()))
        .api_key("sk-test-key")
        .organization("org-1")
        .temperature(0.0)
        .max_tokens(64)
        .seed(7)
        .top_p(0.9)
        .stop(["END"])
        .extra("user", json!("u-1"))
        .build()
        .unwrap();
    let reply = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();

    assert_eq!(reply.text(), "Hello there.");
    assert_eq!(reply.id.as_deref(), Some("chatcmpl-abc"));
    let usage = reply.usage_metadata.clone().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.total_tokens), (9, 12, 21));
    assert_eq!(usage.input_token_details.unwrap()["cache_read"], json!(3));
    assert_eq!(reply.response_metadata["model_name"], json!("gpt-test-0613"));
    assert_eq!(reply.response_metadata["finish_reason"], json!("stop"));
    assert_eq!(reply.response_metadata["system_fingerprint"], json!("fp_44709d6fcb"));

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0],
        json!({
            "model": "gpt-test",
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}],
            "temperature": 0.0, "max_tokens": 64, "seed": 7, "top_p": 0.9, "stop": ["END"], "user": "u-1",
            "stream": false
        })
    );
}

#[tokio::test]
async fn stream_yields_token_chunks_then_the_usage_chunk_with_no_choices() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(json!({"content": "Hel"}), None),
                chunk(json!({"content": "lo"}), None),
                chunk(json!({"content": " world"}), None),
                chunk(json!({}), Some("stop")),
                usage_chunk(),
            ],
            true,
        ),
    )
    .await;
    let model = model(&server);
    let (chunks, err) = collect(&model, prompt("hi")).await;
    assert!(err.is_none(), "{err:?}");
    let texts: Vec<String> = chunks.iter().map(AiMessage::text).collect();
    assert_eq!(texts, vec!["", "Hel", "lo", " world", "", "", ""]);
    assert_eq!(chunks[5].usage_metadata.as_ref().unwrap().input_tokens, 7);
    assert_eq!(chunks.last().unwrap().chunk_position.as_deref(), Some("last"));

    let whole = merged(&chunks);
    assert_eq!(whole.text(), "Hello world");
    assert_eq!(whole.id.as_deref(), Some("chatcmpl-s1"));
    let usage = whole.usage_metadata.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.total_tokens), (7, 3, 10));
    assert_eq!(usage.input_token_details.unwrap()["cache_read"], json!(2));
    assert_eq!(whole.response_metadata["model_name"], json!("gpt-test-0613"), "not repeated per chunk");
    assert_eq!(whole.response_metadata["finish_reason"], json!("stop"));

    let sent = bodies(&server).await;
    assert_eq!(sent[0]["stream"], json!(true));
    assert_eq!(sent[0]["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn stream_usage_can_be_turned_off() {
    let server = MockServer::start().await;
    mount(&server, sse(&[chunk(json!({"content": "ok"}), Some("stop"))], true)).await;
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("{}/v1", server.uri()))
        .stream_usage(false)
        .build()
        .unwrap();
    let (chunks, err) = collect(&model, prompt("hi")).await;
    assert!(err.is_none());
    assert_eq!(merged(&chunks).text(), "ok");
    assert!(bodies(&server).await[0].get("stream_options").is_none());
}

#[tokio::test]
async fn streamed_tool_calls_merge_split_arguments_and_repeated_ids_and_names() {
    let server = MockServer::start().await;
    let call = |index: u32, id: &str, name: &str, args: &str| {
        chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]}),
            None,
        )
    };
    mount(
        &server,
        sse(
            &[
                chunk(json!({"role": "assistant", "content": ""}), None),
                // This server repeats id and name in every fragment, as some compatible servers do.
                call(0, "call_a", "get_weather", ""),
                call(0, "call_a", "get_weather", "{\"city\": "),
                call(0, "call_a", "get_weather", "\"Paris\"}"),
                // The second call gives its id and name once, then only argument pieces.
                call(1, "call_b", "get_time", "{\"tz\""),
                chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": ": \"CET\"}"}}]}), None),
                chunk(json!({}), Some("tool_calls")),
                usage_chunk(),
            ],
            true,
        ),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("weather?")).await;
    assert!(err.is_none(), "{err:?}");
    let whole = merged(&chunks);
    assert_eq!(whole.text(), "");
    let calls: Vec<(&str, &Value, Option<&str>)> =
        whole.tool_calls.iter().map(|c| (c.name.as_str(), &c.args, c.id.as_deref())).collect();
    assert_eq!(
        calls,
        vec![
            ("get_weather", &json!({"city": "Paris"}), Some("call_a")),
            ("get_time", &json!({"tz": "CET"}), Some("call_b"))
        ]
    );
    assert!(whole.invalid_tool_calls.is_empty());
    assert_eq!(whole.response_metadata["finish_reason"], json!("tool_calls"));
}

#[tokio::test]
async fn streamed_arguments_that_never_parse_become_an_invalid_tool_call() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"tool_calls": [{"index": 0, "id": "call_x", "type": "function", "function": {"name": "f", "arguments": "not"}}]}), None),
                chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": " json at all"}}]}), None),
                chunk(json!({}), Some("tool_calls")),
            ],
            true,
        ),
    )
    .await;
    let reply = model(&server)
        .invoke(
            prompt("go"),
            &RunnableConfig::default().with_callbacks(weft_runnable_core::EventRecorder::new().sink()),
        )
        .await
        .unwrap();
    assert!(reply.tool_calls.is_empty(), "{reply:?}");
    assert_eq!(reply.invalid_tool_calls.len(), 1);
    assert_eq!(reply.invalid_tool_calls[0].args.as_deref(), Some("not json at all"));
    assert_eq!(reply.invalid_tool_calls[0].id.as_deref(), Some("call_x"));
}

#[tokio::test]
async fn whole_tool_calls_with_empty_content_and_broken_arguments() {
    let server = MockServer::start().await;
    let message = json!({"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}},
        {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\""}}
    ]});
    mount(&server, ResponseTemplate::new(200).set_body_json(completion(message, "tool_calls"))).await;
    let reply = model(&server).invoke(prompt("add"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].args, json!({"a": 2, "b": 3}));
    assert_eq!(reply.invalid_tool_calls.len(), 1);
    assert_eq!(reply.invalid_tool_calls[0].id.as_deref(), Some("call_2"));
    assert_eq!(reply.invalid_tool_calls[0].args.as_deref(), Some("{\"a\": 2, \"b\""));
}

#[tokio::test]
async fn bound_tools_and_every_tool_choice_are_sent_as_openai_functions() {
    let server = MockServer::start().await;
    mount(&server, text_reply("ok")).await;
    let add = ToolSpec::new(
        "add",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
    );
    let choices = [
        (Some(ToolChoice::Auto), json!("auto")),
        (Some(ToolChoice::Required), json!("required")),
        (Some(ToolChoice::None), json!("none")),
        (Some(ToolChoice::Tool("add".to_owned())), json!({"type": "function", "function": {"name": "add"}})),
        (None, Value::Null),
    ];
    for (choice, _) in &choices {
        let bound = model(&server).bind_tools([add.clone()], choice.clone());
        bound.invoke(prompt("2+3"), &RunnableConfig::default()).await.unwrap();
    }
    let parallel = model(&server).with_options(CallOptions {
        tools: vec![add.clone()],
        parallel_tool_calls: Some(false),
        ..CallOptions::default()
    });
    parallel.invoke(prompt("2+3"), &RunnableConfig::default()).await.unwrap();

    let sent = bodies(&server).await;
    for (body, (_, expected)) in sent.iter().zip(&choices) {
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "add", "description": "Adds two numbers.",
                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}])
        );
        assert_eq!(body.get("tool_choice").cloned().unwrap_or(Value::Null), *expected);
        assert!(body.get("parallel_tool_calls").is_none());
    }
    assert_eq!(sent[5]["parallel_tool_calls"], json!(false));
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// A person.
struct Person {
    name: String,
    age: u32,
}

#[tokio::test]
async fn structured_output_by_strict_json_schema_function_calling_and_json_mode() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(wiremock::matchers::body_partial_json(json!({"tool_choice": {"type": "function"}})))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_p", "type": "function", "function": {"name": "Person", "arguments": "{\"name\": \"Ada\", \"age\": 36}"}}]}),
            "tool_calls",
        )))
        .with_priority(1)
        .mount(&server)
        .await;
    mount(&server, text_reply("{\"name\": \"Ada\", \"age\": 36}")).await;
    let ada = Person { name: "Ada".to_owned(), age: 36 };
    for method in [
        StructuredOutputMethod::JsonSchema,
        StructuredOutputMethod::FunctionCalling,
        StructuredOutputMethod::JsonMode,
    ] {
        let person = model(&server)
            .with_structured_output::<Person>(method)
            .invoke(prompt("who?"), &RunnableConfig::default())
            .await
            .unwrap();
        assert_eq!(person, ada, "{method:?}");
    }
    let sent = bodies(&server).await;
    let schema = &sent[0]["response_format"];
    assert_eq!(schema["type"], json!("json_schema"));
    assert_eq!(schema["json_schema"]["name"], json!("Person"));
    assert_eq!(schema["json_schema"]["strict"], json!(true));
    assert_eq!(schema["json_schema"]["schema"]["additionalProperties"], json!(false));
    assert_eq!(schema["json_schema"]["schema"]["required"], json!(["name", "age"]));
    assert_eq!(sent[1]["tool_choice"], json!({"type": "function", "function": {"name": "Person"}}));
    assert_eq!(sent[1]["parallel_tool_calls"], json!(false));
    assert_eq!(sent[2]["response_format"], json!({"type": "json_object"}));
}

#[tokio::test]
async fn reasoning_content_is_kept_whole_and_streamed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(wiremock::matchers::body_partial_json(json!({"stream": true})))
        .respond_with(sse(
            &[
                chunk(json!({"role": "assistant", "reasoning_content": "Let me "}), None),
                chunk(json!({"reasoning_content": "think."}), None),
                chunk(json!({"content": "42"}), None),
                chunk(json!({}), Some("stop")),
            ],
            true,
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "42", "reasoning_content": "Let me think."}),
            "stop",
        )),
    )
    .await;
    let model = model(&server);
    let whole = model.invoke(prompt("?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(whole.additional_kwargs["reasoning_content"], json!("Let me think."));
    let (chunks, _) = collect(&model, prompt("?")).await;
    let streamed = merged(&chunks);
    assert_eq!(streamed.text(), "42");
    assert_eq!(streamed.additional_kwargs["reasoning_content"], json!("Let me think."));
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_wait_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount(&server, text_reply("finally")).await;
    let started = Instant::now();
    let reply = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "finally");
    assert!(started.elapsed() >= Duration::from_secs(1), "waited only {:?}", started.elapsed());
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn exhausted_rate_limit_retries_give_a_typed_error_a_caller_can_act_on() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "20")
            .set_body_json(json!({"error": {"message": "Rate limit reached for gpt-test", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})),
    )
    .await;
    let model = ChatOpenAI::builder()
        .model("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .max_retries(3)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 4, "the first attempt and three retries");

    let model_error = err.as_model().unwrap();
    assert_eq!(model_error.kind, ModelErrorKind::RateLimited);
    assert_eq!(model_error.status, Some(429));
    assert_eq!(model_error.retry_after, Some(Duration::from_millis(20)));
    assert!(model_error.is_transient());
    let openai = openai_error(&err);
    assert!(openai.is_rate_limited());
    assert_eq!(openai.status(), Some(429));
    assert_eq!(openai.retry_after(), Some(Duration::from_millis(20)));
    assert_eq!(openai.api_error().unwrap().code.as_deref(), Some("rate_limit_exceeded"));
    assert!(err.to_string().contains("Rate limit reached for gpt-test"), "{err}");
}

#[tokio::test]
async fn an_exhausted_quota_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(429).set_body_json(
            json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}),
        ),
    )
    .await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(openai_error(&err).is_rate_limited());
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_500_is_retried_then_reported_as_a_server_error() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(500).set_body_string("upstream exploded")).await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 3, "default: two retries");
    let openai = openai_error(&err);
    assert!(openai.is_server_error() && openai.is_retryable() && !openai.is_invalid_request());
    assert_eq!(openai.status(), Some(500));
    assert_eq!(openai.api_error().unwrap().message, "upstream exploded");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Server);
}

#[tokio::test]
async fn a_503_then_success_recovers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(
            ResponseTemplate::new(503)
                .set_body_json(json!({"error": {"message": "overloaded", "type": "server_error"}})),
        )
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    mount(&server, text_reply("back")).await;
    let reply = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "back");
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_400_error_body_is_read_and_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "Invalid value for 'tool_choice': no function named 'nosuch' was specified in the 'tools' parameter.",
            "type": "invalid_request_error", "param": "tool_choice", "code": null}})),
    )
    .await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let openai = openai_error(&err);
    assert!(openai.is_invalid_request() && !openai.is_retryable());
    let api = openai.api_error().unwrap();
    assert_eq!(api.status, Some(400));
    assert_eq!(api.error_type.as_deref(), Some("invalid_request_error"));
    assert_eq!(api.param.as_deref(), Some("tool_choice"));
    assert!(api.message.starts_with("Invalid value for 'tool_choice'"));
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::InvalidRequest);
    assert_eq!(err.as_model().unwrap().status, Some(400));
}

#[tokio::test]
async fn a_401_is_an_authentication_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(401).set_body_json(
            json!({"error": {"message": "Incorrect API key provided: sk-test-***-key.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
        ),
    )
    .await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(openai_error(&err).is_authentication());
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Authentication);
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_error_status_on_a_streamed_request_is_an_error_item() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(400)
            .set_body_json(json!({"error": {"message": "bad", "type": "invalid_request_error"}})),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert!(chunks.is_empty());
    assert_eq!(openai_error(&err.unwrap()).status(), Some(400));
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_is_an_error_after_the_chunks_that_came() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(json!({"content": "Hal"}), None),
            ],
            false,
        ),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert_eq!(chunks.iter().map(AiMessage::text).collect::<String>(), "Hal");
    let err = err.expect("a cut stream must fail");
    assert!(openai_error(&err).is_incomplete_stream(), "{err}");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::InvalidResponse);

    // Invoked with listeners (so streamed underneath), the cut stream fails the call too.
    let recorder = weft_runnable_core::EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let err = model(&server).invoke(prompt("hi"), &config).await.unwrap_err();
    assert!(openai_error(&err).is_incomplete_stream(), "{err}");
}

#[tokio::test]
async fn an_empty_stream_is_an_error_not_an_empty_answer() {
    let server = MockServer::start().await;
    mount(&server, sse(&[], true)).await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert!(chunks.is_empty());
    assert!(openai_error(&err.unwrap()).is_incomplete_stream());
}

#[tokio::test]
async fn an_error_object_in_the_middle_of_a_stream_ends_it_with_that_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"content": "Hi"}), None),
                json!({"error": {"message": "The server had an error", "type": "server_error"}}),
            ],
            true,
        ),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert_eq!(chunks.len(), 1);
    let err = err.unwrap();
    assert_eq!(openai_error(&err).api_error().unwrap().message, "The server had an error");
}

#[tokio::test]
async fn a_connection_cut_mid_stream_is_a_connection_error() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0_u8; 65536];
        let _ = socket.read(&mut buffer).await.unwrap();
        let event = format!("data: {}\n\n", chunk(json!({"content": "Hel"}), None));
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let body = format!("{:x}\r\n{event}\r\n", event.len());
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(body.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Gone without the closing chunk: the body is cut.
    });
    let model = ChatOpenAI::builder().model("m").base_url(format!("http://{address}/v1")).build().unwrap();
    let (chunks, err) = collect(&model, prompt("hi")).await;
    assert_eq!(chunks.iter().map(AiMessage::text).collect::<String>(), "Hel");
    let err = err.expect("a cut connection must fail");
    let openai = openai_error(&err);
    assert!(openai.is_connection(), "{err}");
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    mount(&server, text_reply("late").set_delay(Duration::from_secs(3))).await;
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("{}/v1", server.uri()))
        .timeout(Duration::from_millis(200))
        .max_retries(0)
        .build()
        .unwrap();
    let started = Instant::now();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(openai_error(&err).is_timeout(), "{err}");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Timeout);
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_a_connection_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(2))
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(openai_error(&err).is_connection(), "{err}");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Connection);
}

#[tokio::test]
async fn an_answer_that_is_not_json_is_an_invalid_response() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_raw("<html>proxy login</html>", "text/html")).await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(openai_error(&err), OpenAIError::InvalidResponse(_)), "{err}");
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors_debug_output_or_logs() {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let secret = "sk-proj-SECRET-0123456789";
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(500).set_body_string("boom")).await;
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("{}/v1", server.uri()))
        .api_key(secret)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(2))
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    let request = &server.received_requests().await.unwrap()[0];
    assert_eq!(request.headers.get("authorization").unwrap().to_str().unwrap(), format!("Bearer {secret}"));

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("openai request failed"), "the retries are logged: {logs}");
    for shown in [format!("{model:?}"), format!("{err}"), format!("{err:?}"), logs] {
        assert!(!shown.contains("SECRET"), "the key leaked: {shown}");
    }
}

#[tokio::test]
async fn tokens_show_in_stream_events_as_on_chat_model_stream() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"content": "A"}), None),
                chunk(json!({"content": "B"}), None),
                chunk(json!({}), Some("stop")),
                usage_chunk(),
            ],
            true,
        ),
    )
    .await;
    let model = model(&server);
    let events: Vec<_> =
        weft_runnable_core::RunnableExt::stream_events(&model, prompt("hi"), &RunnableConfig::default())
            .map(|e| e.unwrap())
            .collect()
            .await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names.first(), Some(&"on_chat_model_start"));
    assert_eq!(names.last(), Some(&"on_chat_model_end"));
    let tokens: String = events
        .iter()
        .filter(|e| e.event == "on_chat_model_stream")
        .map(|e| e.data.chunk.as_ref().unwrap()["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tokens, "AB");
    assert_eq!(events[0].name, "ChatOpenAI");
    assert_eq!(events[0].metadata["ls_provider"], json!("openai"));
    assert_eq!(events[0].metadata["ls_model_name"], json!("gpt-test"));
}

#[tokio::test]
async fn tokens_show_in_the_graph_messages_stream_mode_with_the_node() {
    use weft_graph::{MessagesState, Runtime, START, StateGraph, StreamData, StreamMode};

    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"content": "Hi"}), None),
                chunk(json!({"content": " you"}), None),
                chunk(json!({}), Some("stop")),
            ],
            true,
        ),
    )
    .await;
    let model = model(&server);
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("agent", move |state: MessagesState, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(PromptValue::from(state.messages.to_vec()), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(MessagesState::update().messages(vec![Message::Ai(reply)]))
        }
    });
    graph.add_edge(START, "agent");
    let app = graph.compile().unwrap();
    let input = MessagesState::update().messages(vec![Message::human("hello")]);
    let parts: Vec<_> =
        app.stream(input, &RunnableConfig::default(), &[StreamMode::Messages]).collect().await;
    let mut tokens = String::new();
    for part in parts {
        match part.unwrap().data {
            StreamData::Message { chunk, metadata } => {
                assert_eq!(metadata["langgraph_node"], json!("agent"));
                tokens.push_str(&chunk.text());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(tokens, "Hi you");
    assert_eq!(bodies(&server).await[0]["stream"], json!(true), "the node's model streamed");
}

#[tokio::test]
async fn generate_and_stream_chunks_take_call_options_directly() {
    let server = MockServer::start().await;
    mount(&server, text_reply("ok")).await;
    let model = model(&server);
    let options = CallOptions::default().with_stop(["\n"]).with_extra("logit_bias", json!({"50256": -100}));
    let reply =
        model.generate(vec![Message::human("hi")], &options, &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "ok");
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["stop"], json!(["\n"]));
    assert_eq!(sent[0]["logit_bias"], json!({"50256": -100}));
}

/// Answers an embeddings request with one vector per input: `[length of the text, its position]`.
struct EchoEmbeddings;

impl Respond for EchoEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = request.body_json().unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .rev() // out of order on purpose: the index places them
            .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": [text.as_str().unwrap().len() as f64, i as f64]}))
            .collect();
        ResponseTemplate::new(200).set_body_json(
            json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        )
    }
}

#[tokio::test]
async fn embeddings_are_sent_in_batches_and_come_back_in_order() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/embeddings")).respond_with(EchoEmbeddings).mount(&server).await;
    let embeddings = OpenAIEmbeddings::builder()
        .model("text-embedding-3-small")
        .dimensions(2)
        .batch_size(2)
        .base_url(format!("{}/v1", server.uri()))
        .api_key("k")
        .build()
        .unwrap();
    let texts: Vec<String> = ["a", "bb", "ccc", "dddd", "eeeee"].iter().map(|s| (*s).to_owned()).collect();
    let vectors = embeddings.embed_documents(texts).await.unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0], vec![2.0, 1.0], vec![3.0, 0.0], vec![4.0, 1.0], vec![5.0, 0.0]]);
    let sent = bodies(&server).await;
    let inputs: Vec<&Value> = sent.iter().map(|b| &b["input"]).collect();
    assert_eq!(inputs, vec![&json!(["a", "bb"]), &json!(["ccc", "dddd"]), &json!(["eeeee"])]);
    assert!(sent.iter().all(|b| b["dimensions"] == json!(2) && b["encoding_format"] == json!("float")));
    assert!(sent.iter().all(|b| b["model"] == json!("text-embedding-3-small")));

    assert_eq!(embeddings.embed_query("xyz").await.unwrap(), vec![3.0, 0.0]);
    assert!(embeddings.embed_documents(Vec::new()).await.unwrap().is_empty());
    assert_eq!(server.received_requests().await.unwrap().len(), 4, "no request for no texts");
}

#[tokio::test]
async fn embedding_errors_and_short_answers_are_typed_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [1.0]}]})),
        )
        .mount(&server)
        .await;
    let embeddings =
        OpenAIEmbeddings::builder().model("e").base_url(format!("{}/v1", server.uri())).build().unwrap();
    let err = embeddings.embed_documents(vec!["a".to_owned(), "b".to_owned()]).await.unwrap_err();
    assert!(matches!(openai_error(&err), OpenAIError::InvalidResponse(_)), "{err}");

    let failing = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_json(json!({"error": {"message": "too long", "type": "invalid_request_error"}})),
        )
        .mount(&failing)
        .await;
    let embeddings =
        OpenAIEmbeddings::builder().model("e").base_url(format!("{}/v1", failing.uri())).build().unwrap();
    let err = embeddings.embed_query("x").await.unwrap_err();
    assert!(openai_error(&err).is_invalid_request());
}

#[tokio::test]
async fn structured_output_with_raw_reports_a_reply_that_does_not_parse() {
    let server = MockServer::start().await;
    mount(&server, text_reply("I would rather not say.")).await;
    let result = model(&server)
        .with_structured_output::<Person>(StructuredOutputMethod::JsonSchema)
        .include_raw()
        .invoke(prompt("who?"), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(result.raw.text(), "I would rather not say.");
    assert_eq!(result.parsed, None);
    assert!(result.parsing_error.unwrap().contains("failed to parse Person"));
}
