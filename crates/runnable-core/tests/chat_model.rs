//! Chat models as runnables: invoke and stream tracing, tool binding, call options, structured output.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use futures::StreamExt as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
use weft_runnable_core::{
    AiMessage, CallOptions, ChatModel, ChatModelExt, Error, EventRecorder, Message, PromptValue, Runnable,
    RunnableConfig, RunnableExt, RunnableGenerator, RunnableLambda, StructuredOutputMethod, StructuredTool,
    ToolCall, ToolChoice, ToolSpec,
};

fn prompt(text: &str) -> PromptValue {
    PromptValue::Messages(vec![Message::system("be brief"), Message::human(text)])
}

fn add_tool() -> StructuredTool {
    StructuredTool::from_fn(
        "add",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
        |args, _| async move { Ok(json!(args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap())) },
    )
}

#[tokio::test]
async fn invoke_emits_chat_model_stream_events_when_listened() {
    let model = FakeChatModel::new(["Hello big world"]);
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let reply = model.invoke(prompt("hi"), &config).await.unwrap();
    assert_eq!(reply.text(), "Hello big world");
    assert!(reply.tool_call_chunks.is_empty() && reply.chunk_position.is_none(), "{reply:?}");

    let events = recorder.events();
    let kinds: Vec<_> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "on_chat_model_start",
            "on_chat_model_stream",
            "on_chat_model_stream",
            "on_chat_model_stream",
            "on_chat_model_stream",
            "on_chat_model_end"
        ]
    );
    // The model leaves its stream open, so an empty chunk marked "last" closes it, as langchain-core does.
    let tokens: Vec<_> =
        events[1..5].iter().map(|e| e.data.chunk.as_ref().unwrap()["content"].clone()).collect();
    assert_eq!(tokens, vec![json!("Hello"), json!(" big"), json!(" world"), json!("")]);
    assert!(events[1..5].iter().all(|e| e.data.chunk.as_ref().unwrap()["type"] == "AIMessageChunk"));
    assert_eq!(events[4].data.chunk.as_ref().unwrap()["chunk_position"], "last");
    assert_eq!(events[0].name, "FakeChatModel");
    let input = events[0].data.input.as_ref().unwrap();
    assert_eq!(input["messages"][0][1]["content"], json!("hi"));
    assert_eq!(input["messages"][0].as_array().unwrap().len(), 2);
    assert_eq!(events[0].metadata["ls_provider"], json!("fake"));
    assert_eq!(events[0].metadata["ls_model_name"], json!("fake-chat-model"));
    assert_eq!(events[0].metadata["ls_model_type"], json!("chat"));
    assert_eq!(events[5].data.output.as_ref().unwrap()["content"], json!("Hello big world"));
    let run_id = events[0].run_id;
    assert_eq!(reply.id, Some(format!("lc_run--{run_id}")));
}

#[tokio::test]
async fn invoke_without_listeners_returns_the_reply_with_a_run_id() {
    let scripted = AiMessage {
        tool_calls: vec![ToolCall { name: "add".into(), args: json!({"a": 1}), id: Some("c1".into()) }],
        ..AiMessage::new("thinking")
    };
    let model = FakeChatModel::new([scripted.clone()]);
    let reply = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();
    assert!(reply.id.as_deref().unwrap().starts_with("lc_run--"));
    assert_eq!(AiMessage { id: None, ..reply }, scripted);
}

#[tokio::test]
async fn invoke_while_listened_merges_streamed_tool_calls() {
    let scripted = AiMessage {
        id: Some("msg-1".into()),
        tool_calls: vec![
            ToolCall { name: "add".into(), args: json!({"a": 1, "b": 2}), id: Some("c1".into()) },
            ToolCall { name: "add".into(), args: json!({"a": 3, "b": 4}), id: Some("c2".into()) },
        ],
        ..AiMessage::new("let me add")
    };
    let model = FakeChatModel::new([scripted.clone()]);
    let config = RunnableConfig::default().with_callbacks(EventRecorder::new().sink());
    let reply = model.invoke(prompt("hi"), &config).await.unwrap();
    assert_eq!(reply, scripted);
}

#[tokio::test]
async fn stream_yields_chunks_that_merge_into_the_reply() {
    let model = FakeChatModel::new(["one two"]);
    let chunks: Vec<AiMessage> =
        model.stream(prompt("hi"), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    let texts: Vec<_> = chunks.iter().map(AiMessage::text).collect();
    assert_eq!(texts, vec!["one", " two", ""]);
    assert!(chunks.iter().all(|c| c.is_chunk));
    assert_eq!(chunks[1].chunk_position, None);
    assert_eq!(chunks[2].chunk_position.as_deref(), Some("last"));
    assert_eq!(chunks[2].id, chunks[0].id);
    let merged = chunks.into_iter().reduce(|a, b| model.merge_chunks(a, b).unwrap()).unwrap();
    assert_eq!(merged.text(), "one two");
    assert!(merged.is_chunk);
    assert!(!merged.finish().is_chunk);
}

#[tokio::test]
async fn model_pipes_between_steps_and_streams_token_by_token_through_them() {
    let model = FakeChatModel::new(["a b c"]);
    let to_text = RunnableGenerator::new(
        |chunks: futures::stream::BoxStream<'_, weft_runnable_core::Result<AiMessage>>, _| {
            chunks.map(|c| c.map(|m| m.text())).boxed()
        },
    )
    .named("to_text");
    let chain = (RunnableLambda::new(|q: String| PromptValue::from(q)).named("prompt") | model | to_text)
        .with_config(RunnableConfig::default().with_run_name("mychain"));
    let out: Vec<String> =
        chain.stream("q".to_owned(), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    assert_eq!(out, vec!["a", " b", " c", ""]);
}

#[tokio::test]
async fn model_stream_events_interleave_with_downstream_steps_per_token() {
    let model = FakeChatModel::new(["a b"]);
    let to_text = RunnableGenerator::new(
        |chunks: futures::stream::BoxStream<'_, weft_runnable_core::Result<AiMessage>>, _| {
            chunks.map(|c| c.map(|m| m.text())).boxed()
        },
    )
    .named("to_text");
    let chain = (RunnableLambda::new(|q: String| PromptValue::from(q)).named("prompt") | model | to_text)
        .with_config(RunnableConfig::default().with_run_name("mychain"));
    let events: Vec<(String, String)> = chain
        .stream_events("q".to_owned(), &RunnableConfig::default())
        .map(|e| {
            let e = e.unwrap();
            (e.event, e.name)
        })
        .collect()
        .await;
    let expected: Vec<(String, String)> = [
        ("on_chain_start", "mychain"),
        ("on_chain_start", "prompt"),
        ("on_chain_end", "prompt"),
        ("on_chat_model_start", "FakeChatModel"),
        ("on_chat_model_stream", "FakeChatModel"),
        ("on_chain_start", "to_text"),
        ("on_chain_stream", "to_text"),
        ("on_chain_stream", "mychain"),
        ("on_chat_model_stream", "FakeChatModel"),
        ("on_chain_stream", "to_text"),
        ("on_chain_stream", "mychain"),
        // The empty chunk that closes the model's stream.
        ("on_chat_model_stream", "FakeChatModel"),
        ("on_chain_stream", "to_text"),
        ("on_chain_stream", "mychain"),
        ("on_chat_model_end", "FakeChatModel"),
        ("on_chain_end", "to_text"),
        ("on_chain_end", "mychain"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(events, expected);
}

#[tokio::test]
async fn bind_tools_passes_specs_and_tool_choice_to_the_model() {
    let model = FakeChatModel::new(["ok", "ok"]);
    let raw = ToolSpec::new("lookup", "Looks things up.", json!({"type": "object", "properties": {}}));
    let bound =
        model.clone().bind_tools([ToolSpec::from(&add_tool()), raw.clone()], Some(ToolChoice::from("any")));
    assert_eq!(Runnable::name(&bound), "FakeChatModel");
    bound.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();
    let calls = model.calls();
    let options = &calls[0].options;
    let names: Vec<_> = options.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["add", "lookup"]);
    assert_eq!(options.tools[0].description, "Adds two numbers.");
    assert_eq!(options.tool_choice, Some(ToolChoice::Required));
    assert_eq!(calls[0].messages, prompt("hi").into_messages());

    let streamed: Vec<_> = bound.stream(prompt("again"), &RunnableConfig::default()).collect().await;
    assert_eq!(streamed.len(), 2, "the token and the closing chunk");
    assert_eq!(model.calls()[1].options.tools.len(), 2);
}

#[tokio::test]
async fn call_options_in_the_config_are_laid_over_bound_options() {
    let model = FakeChatModel::new(["ok"]);
    let bound = model
        .clone()
        .with_options(CallOptions::new().with_stop(["\n"]).with_extra("temperature", json!(0.5)))
        .bind_tools([&add_tool()], None);
    let mut config = RunnableConfig::default();
    config.extensions.insert(CallOptions::new().with_stop(["Observation:"]).with_extra("seed", json!(7)));
    bound.invoke(prompt("hi"), &config).await.unwrap();
    let options = &model.calls()[0].options;
    assert_eq!(options.stop, Some(vec!["Observation:".to_owned()]));
    assert_eq!(options.extra.get("temperature"), Some(&json!(0.5)));
    assert_eq!(options.extra.get("seed"), Some(&json!(7)));
    assert_eq!(options.tools.len(), 1);
}

#[test]
fn call_options_read_langchain_keyword_arguments() {
    let mut options = CallOptions::new();
    let kwargs = json!({
        "stop": "END",
        "tools": [{"type": "function", "function": {"name": "f", "description": "F.", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "parallel_tool_calls": false,
        "temperature": 0.2,
    });
    options.merge_kwargs(kwargs.as_object().unwrap()).unwrap();
    assert_eq!(options.stop, Some(vec!["END".to_owned()]));
    assert_eq!(options.tools[0].name, "f");
    assert_eq!(options.tool_choice, Some(ToolChoice::Tool("f".to_owned())));
    assert_eq!(options.parallel_tool_calls, Some(false));
    assert_eq!(options.extra["temperature"], json!(0.2));
    assert_eq!(
        ToolChoice::Tool("f".into()).to_openai(),
        json!({"type": "function", "function": {"name": "f"}})
    );

    let err = options.merge_kwargs(json!({"stop": 3}).as_object().unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: bound option 'stop' must be a string or a list of strings, got 3"
    );
}

/// A person mentioned in the text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Person {
    /// The person's name.
    name: String,
    age: u32,
}

#[tokio::test]
async fn structured_output_by_function_calling_binds_one_tool_and_parses_its_args() {
    let model = FakeChatModel::new([FakeReply::tool_call("Person", json!({"name": "Ada", "age": 36}), "c1")]);
    let structured = model.clone().with_structured_output::<Person>(StructuredOutputMethod::FunctionCalling);
    let person = structured.invoke(prompt("who?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(person, Person { name: "Ada".into(), age: 36 });
    let options = &model.calls()[0].options;
    assert_eq!(options.tools[0].name, "Person");
    assert_eq!(options.tools[0].description, "A person mentioned in the text.");
    assert_eq!(options.tools[0].parameters["required"], json!(["name", "age"]));
    assert_eq!(options.tool_choice, Some(ToolChoice::Tool("Person".into())));
    assert_eq!(options.parallel_tool_calls, Some(false));
}

#[tokio::test]
async fn structured_output_by_json_schema_sets_response_format_and_parses_text() {
    let model = FakeChatModel::new(["```json\n{\"name\": \"Bo\", \"age\": 4}\n```"]);
    let structured = model.clone().with_structured_output::<Person>(StructuredOutputMethod::JsonSchema);
    let person = structured.invoke(prompt("who?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(person, Person { name: "Bo".into(), age: 4 });
    let format = model.calls()[0].options.response_format.clone().unwrap();
    assert_eq!(format["type"], json!("json_schema"));
    assert_eq!(format["json_schema"]["name"], json!("Person"));
    assert_eq!(format["json_schema"]["schema"]["properties"]["age"]["type"], json!("integer"));

    let model = FakeChatModel::new([r#"{"name": "Cy", "age": 5}"#]);
    let structured = model.clone().with_structured_output::<Person>(StructuredOutputMethod::JsonMode);
    assert_eq!(structured.invoke(prompt("x"), &RunnableConfig::default()).await.unwrap().name, "Cy");
    assert_eq!(model.calls()[0].options.response_format, Some(json!({"type": "json_object"})));
}

#[tokio::test]
async fn structured_output_parse_failure_is_an_output_parser_error() {
    let model = FakeChatModel::new(["no tool call here"]);
    let structured = model.with_structured_output::<Person>(StructuredOutputMethod::FunctionCalling);
    let err = structured.invoke(prompt("who?"), &RunnableConfig::default()).await.unwrap_err();
    let parser_error = err.as_output_parser().unwrap();
    assert_eq!(parser_error.error, "the model's reply has no call of tool 'Person'");
    assert_eq!(parser_error.llm_output.as_deref(), Some("no tool call here"));
}

#[tokio::test]
async fn structured_output_include_raw_reports_parsing_error_with_raw_reply() {
    let model = FakeChatModel::new([
        FakeReply::tool_call("Person", json!({"name": "Ada"}), "c1"),
        FakeReply::tool_call("Person", json!({"name": "Ada", "age": 36}), "c2"),
    ]);
    let structured =
        model.with_structured_output::<Person>(StructuredOutputMethod::FunctionCalling).include_raw();
    let out = structured.invoke(prompt("who?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.parsed, None);
    assert_eq!(out.raw.tool_calls[0].id.as_deref(), Some("c1"));
    let error = out.parsing_error.unwrap();
    assert!(error.starts_with("failed to parse Person from tool call arguments"), "{error}");
    assert!(error.contains("missing field `age`"), "{error}");

    let out = structured.invoke(prompt("who?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.parsed, Some(Person { name: "Ada".into(), age: 36 }));
    assert_eq!(out.parsing_error, None);
}

#[tokio::test]
async fn structured_output_include_raw_still_raises_model_errors() {
    let model = FakeChatModel::new([FakeReply::rate_limited()]);
    let structured = model.with_structured_output::<Person>(StructuredOutputMethod::JsonMode).include_raw();
    let err = structured.invoke(prompt("who?"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.as_model().unwrap().is_rate_limited());
}

#[tokio::test]
async fn shared_dyn_chat_model_is_a_runnable() {
    let model: Arc<dyn ChatModel> = Arc::new(FakeChatModel::new(["shared"]));
    assert_eq!(Runnable::name(&model), "FakeChatModel");
    let reply = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "shared");
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, Error::Model(_)));
}
