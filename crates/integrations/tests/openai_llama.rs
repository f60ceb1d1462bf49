//! `ChatOpenAI` against a real model: llama.cpp's llama-server with Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)
//! at temperature 0, started by this test binary on a free loopback port from the paths `cargo xtask ci`
//! exports (`WEFT_LLAMA_SERVER_BIN`, `WEFT_LLAMA_MODEL`, `WEFT_LLAMA_TEMPLATE`; see docs/local-models.md).
//!
//! The assertions are about the protocol (shapes, ids, finish reasons, usage, errors), not about how
//! clever a 0.5B model is. Without the paths the tests fail in CI and are skipped, loudly, elsewhere.
#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod llama_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_integrations::openai::OpenAIError;
use weft_runnable_core::{
    AiMessage, ChatModelExt, Merge as _, Message, PromptValue, Runnable, RunnableConfig,
    StructuredOutputMethod, StructuredTool, Tool as _, ToolChoice, ToolStatus, tools::invoke_tool_message,
};

use llama_common::{Model, Server, server};

/// Every scenario below, run concurrently against one server: the server has several slots and caches
/// the prompts' common prefixes, so this takes a fraction of the time of a server per test (nextest runs
/// each test in a process of its own). Each scenario runs as a task of its own; a failing one is
/// reported with its name and message, and does not stop the others.
///
/// Concurrent requests are decoded in one batch, and batching may change a greedy choice, so no scenario
/// compares the words of two answers (a whole one and a streamed one, say); each answer is checked on its
/// own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_openai_against_llama_server_with_qwen() {
    let Some(server) = server(Model::Qwen, "chat_openai_against_llama_server_with_qwen") else { return };
    macro_rules! scenario {
        ($name:ident) => {
            (stringify!($name), tokio::spawn($name(server)))
        };
    }
    let scenarios = [
        scenario!(plain_chat_answers_with_usage_and_response_metadata),
        scenario!(streamed_chat_yields_tokens_then_the_usage_chunk),
        scenario!(tool_choice_auto_gives_an_openai_tool_call_whole_and_streamed),
        scenario!(tool_choice_required_gives_a_call_and_none_gives_text_whole_and_streamed),
        scenario!(a_named_tool_choice_is_accepted_and_answered_with_that_call_whole_and_streamed),
        scenario!(structured_output_follows_the_json_schema_and_the_function_call),
        scenario!(a_prompt_longer_than_the_context_is_a_400_invalid_request),
        scenario!(a_react_loop_calls_the_tool_and_stops),
    ];
    let total = scenarios.len();
    let mut failures = Vec::new();
    for (name, handle) in scenarios {
        match handle.await {
            Ok(()) => eprintln!("ok     {name}"),
            Err(err) => {
                let message = match err.try_into_panic() {
                    Ok(panic) => panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                        .unwrap_or_default(),
                    Err(err) => err.to_string(),
                };
                eprintln!("FAILED {name}");
                failures.push(format!("{name}: {message}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} scenarios failed; the server's last lines:\n{}\n\n{}",
        failures.len(),
        server.log_tail(),
        failures.join("\n\n")
    );
}

fn prompt(system: &str, user: &str) -> PromptValue {
    PromptValue::from(vec![Message::system(system), Message::human(user)])
}

/// Every chunk of a streamed answer and their merge.
async fn stream_all<R>(model: &R, input: PromptValue) -> (Vec<AiMessage>, AiMessage)
where
    R: Runnable<PromptValue, AiMessage>,
{
    let mut stream = model.stream(input, &RunnableConfig::default());
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk.expect("a streamed chunk"));
    }
    assert!(!chunks.is_empty(), "the stream yielded nothing");
    let whole = chunks.iter().cloned().reduce(|a, b| a.merge(b).unwrap()).unwrap().finish();
    (chunks, whole)
}

fn finish_reason(message: &AiMessage) -> Option<&str> {
    message.response_metadata.get("finish_reason").and_then(Value::as_str)
}

/// Usage is present and adds up.
fn assert_usage(message: &AiMessage) {
    let usage = message.usage_metadata.as_ref().unwrap_or_else(|| panic!("no usage in {message:?}"));
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0, "{usage:?}");
    assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens, "{usage:?}");
}

fn weather_tool() -> StructuredTool {
    StructuredTool::from_fn(
        "get_weather",
        "Gets the current weather in a city.",
        json!({"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}},
               "required": ["city"]}),
        |args: Value, _| async move {
            Ok(format!("18 degrees and sunny in {}", args["city"].as_str().unwrap_or("?")))
        },
    )
}

fn time_tool() -> StructuredTool {
    StructuredTool::from_fn(
        "get_time",
        "Gets the current time in a time zone.",
        json!({"type": "object", "properties": {"timezone": {"type": "string", "description": "An IANA time zone"}},
               "required": ["timezone"]}),
        |_: Value, _| async move { Ok("12:00".to_owned()) },
    )
}

/// The answer is exactly one OpenAI-shaped call of `name` whose arguments hold the string `arg`: an id,
/// parsed arguments, nothing invalid, finish reason `tool_calls`, and no fence or tag left in the text.
fn assert_one_call(reply: &AiMessage, name: &str, arg: &str) -> String {
    assert!(reply.invalid_tool_calls.is_empty(), "invalid tool calls: {reply:?}");
    assert_eq!(reply.tool_calls.len(), 1, "{reply:?}");
    let call = &reply.tool_calls[0];
    assert_eq!(call.name, name, "{reply:?}");
    let value =
        call.args.get(arg).and_then(Value::as_str).unwrap_or_else(|| panic!("no `{arg}` in {call:?}"));
    assert!(!value.trim().is_empty(), "{call:?}");
    assert!(call.id.as_deref().is_some_and(|id| !id.is_empty()), "no id: {call:?}");
    assert_eq!(finish_reason(reply), Some("tool_calls"), "{reply:?}");
    let text = reply.text();
    assert!(!text.contains("```") && !text.contains("tool_call"), "markup left in the text: {text:?}");
    value.to_owned()
}

async fn plain_chat_answers_with_usage_and_response_metadata(server: &'static Server) {
    let model = server.chat(Model::Qwen, 24);
    let reply = model
        .invoke(prompt("You are terse.", "Say hello in one short sentence."), &RunnableConfig::default())
        .await
        .unwrap();
    assert!(!reply.text().trim().is_empty(), "{reply:?}");
    assert!(reply.tool_calls.is_empty() && reply.invalid_tool_calls.is_empty(), "{reply:?}");
    assert!(matches!(finish_reason(&reply), Some("stop" | "length")), "{reply:?}");
    assert!(reply.id.as_deref().is_some_and(|id| !id.is_empty()), "{reply:?}");
    assert!(reply.response_metadata.get("model_name").and_then(Value::as_str).is_some(), "{reply:?}");
    assert_usage(&reply);
    assert!(reply.usage_metadata.as_ref().unwrap().output_tokens <= 24);
}

async fn streamed_chat_yields_tokens_then_the_usage_chunk(server: &'static Server) {
    let model = server.chat(Model::Qwen, 24);
    let input = prompt("You are terse.", "Count from one to five in words.");
    let (chunks, whole) = stream_all(&model, input.clone()).await;
    let with_text = chunks.iter().filter(|chunk| !chunk.text().is_empty()).count();
    assert!(with_text > 1, "the answer came in {with_text} text chunk(s): {chunks:?}");
    assert_eq!(chunks.last().unwrap().chunk_position.as_deref(), Some("last"));
    assert_eq!(chunks.iter().filter(|chunk| chunk.usage_metadata.is_some()).count(), 1, "{chunks:?}");
    assert_usage(&whole);
    assert!(matches!(finish_reason(&whole), Some("stop" | "length")), "{whole:?}");
    assert_eq!(whole.text(), chunks.iter().map(AiMessage::text).collect::<String>());
    assert!(whole.usage_metadata.unwrap().output_tokens <= 24);
}

async fn tool_choice_auto_gives_an_openai_tool_call_whole_and_streamed(server: &'static Server) {
    let model = server.chat(Model::Qwen, 64);
    let bound = model.bind_tools([weather_tool().spec(), time_tool().spec()], Some(ToolChoice::Auto));
    let input = prompt("You are a helpful assistant.", "What is the weather in Paris right now?");
    let reply = bound.invoke(input.clone(), &RunnableConfig::default()).await.unwrap();
    let city = assert_one_call(&reply, "get_weather", "city");
    assert!(city.contains("Paris"), "{reply:?}");

    let (chunks, whole) = stream_all(&bound, input).await;
    assert!(chunks.iter().any(|chunk| !chunk.tool_call_chunks.is_empty()), "no tool-call chunks: {chunks:?}");
    assert!(assert_one_call(&whole, "get_weather", "city").contains("Paris"), "{whole:?}");
    assert_usage(&whole);
}

/// `required` makes the server parse the answer as tool calls (with a grammar that must end in one);
/// `none` leaves the very same answer as text, even when the model writes a call in it.
async fn tool_choice_required_gives_a_call_and_none_gives_text_whole_and_streamed(server: &'static Server) {
    let model = server.chat(Model::Qwen, 64);
    let input = prompt("You are a helpful assistant.", "I am going to Rome next week.");
    let required = model.clone().bind_tools([weather_tool().spec()], Some(ToolChoice::Required));
    let reply = required.invoke(input.clone(), &RunnableConfig::default()).await.unwrap();
    assert_one_call(&reply, "get_weather", "city");
    let (_, whole) = stream_all(&required, input.clone()).await;
    assert_one_call(&whole, "get_weather", "city");

    let none = model.bind_tools([weather_tool().spec()], Some(ToolChoice::None));
    let reply = none.invoke(input.clone(), &RunnableConfig::default()).await.unwrap();
    assert!(reply.tool_calls.is_empty() && reply.invalid_tool_calls.is_empty(), "{reply:?}");
    assert!(!reply.text().trim().is_empty(), "{reply:?}");
    assert!(matches!(finish_reason(&reply), Some("stop" | "length")), "{reply:?}");
    let (chunks, whole) = stream_all(&none, input).await;
    assert!(chunks.iter().all(|chunk| chunk.tool_call_chunks.is_empty()), "{chunks:?}");
    assert!(whole.tool_calls.is_empty(), "{whole:?}");
    assert!(!whole.text().trim().is_empty(), "{whole:?}");
}

/// llama-server accepts only `auto`, `none` and `required` as a tool choice: a named choice (an object)
/// is logged as a parameter of the wrong type and treated as `auto`. So the named choice is sent as
/// OpenAI's object, the server must still answer with a well-formed call, and the question is one the
/// named tool answers; that the server does not force the name is its limitation, not checked here.
async fn a_named_tool_choice_is_accepted_and_answered_with_that_call_whole_and_streamed(
    server: &'static Server,
) {
    let model = server.chat(Model::Qwen, 64);
    let bound = model.bind_tools(
        [weather_tool().spec(), time_tool().spec()],
        Some(ToolChoice::Tool("get_time".to_owned())),
    );
    let input = prompt("You are a helpful assistant.", "What time is it in Tokyo?");
    let reply = bound.invoke(input.clone(), &RunnableConfig::default()).await.unwrap();
    assert_one_call(&reply, "get_time", "timezone");
    let (_, whole) = stream_all(&bound, input).await;
    assert_one_call(&whole, "get_time", "timezone");
}

/// A person mentioned in a text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Person {
    /// The person's name.
    name: String,
    /// Their age in years.
    age: u32,
}

async fn structured_output_follows_the_json_schema_and_the_function_call(server: &'static Server) {
    let model = server.chat(Model::Qwen, 64);
    let input = prompt("Extract the person from the text.", "Ada Lovelace died when she was 36 years old.");
    for method in [StructuredOutputMethod::JsonSchema, StructuredOutputMethod::FunctionCalling] {
        let person = model
            .clone()
            .with_structured_output::<Person>(method)
            .invoke(input.clone(), &RunnableConfig::default())
            .await
            .unwrap_or_else(|err| panic!("{method:?}: {err}"));
        assert!(!person.name.trim().is_empty(), "{method:?}: {person:?}");
    }
}

async fn a_prompt_longer_than_the_context_is_a_400_invalid_request(server: &'static Server) {
    let model = server.chat(Model::Qwen, 8);
    // About 6000 tokens against a context of 4096.
    let long = "alpha beta gamma delta ".repeat(1500);
    let input = prompt("You are terse.", &long);
    let err = model.invoke(input.clone(), &RunnableConfig::default()).await.unwrap_err();
    let openai = OpenAIError::from_weft(&err).unwrap_or_else(|| panic!("not an OpenAI error: {err:?}"));
    assert_eq!(openai.status(), Some(400), "{openai:?}");
    assert!(openai.is_invalid_request(), "{openai:?}");
    assert!(!openai.is_retryable(), "{openai:?}");
    let api = openai.api_error().unwrap();
    assert!(api.message.contains("context"), "{api:?}");
    assert!(api.error_type.is_some(), "{api:?}");

    let mut stream = model.stream(input, &RunnableConfig::default());
    let first = stream.next().await.expect("an item");
    let err = first.expect_err("a streamed request over the context fails");
    assert_eq!(OpenAIError::from_weft(&err).and_then(OpenAIError::status), Some(400), "{err:?}");
}

/// A ReAct loop written with the core traits: the model turn, then every tool call run with
/// `invoke_tool_message` and its result appended, until the model answers without a tool call or a tool
/// that returns directly has run (LangGraph's `return_direct`). The 0.5B model calls the tool again
/// whenever it sees a tool result, so its loop ends through `return_direct`; the test then sends the whole
/// history, tool result included, back once more to check that the server takes it.
async fn a_react_loop_calls_the_tool_and_stops(server: &'static Server) {
    let model = server.chat(Model::Qwen, 48);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let multiply = StructuredTool::from_fn(
        "multiply",
        "Multiplies two integers and returns the product.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "required": ["a", "b"]}),
        move |args: Value, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok((args["a"].as_i64().unwrap_or(0) * args["b"].as_i64().unwrap_or(0)).to_string()) }
        },
    )
    .with_return_direct(true);
    let bound = model.bind_tools([multiply.spec()], Some(ToolChoice::Auto));
    let config = RunnableConfig::default();
    let mut messages = vec![Message::system("You are a calculator."), Message::human("What is 17 times 23?")];
    const MAX_TURNS: usize = 3;
    let mut turns = 0;
    let mut first_usage = None;
    loop {
        turns += 1;
        assert!(turns <= MAX_TURNS, "the loop did not stop within {MAX_TURNS} model turns: {messages:#?}");
        let reply = bound.invoke(PromptValue::from(messages.clone()), &config).await.unwrap();
        assert!(reply.invalid_tool_calls.is_empty(), "{reply:?}");
        first_usage.get_or_insert_with(|| reply.usage_metadata.clone().unwrap());
        messages.push(Message::from(reply.clone()));
        if reply.tool_calls.is_empty() {
            break;
        }
        let mut direct = false;
        for call in &reply.tool_calls {
            assert_eq!(call.name, "multiply", "{reply:?}");
            assert!(call.args["a"].is_i64() && call.args["b"].is_i64(), "{call:?}");
            let result = invoke_tool_message(&multiply, call.clone(), &config).await.unwrap();
            assert_eq!(result.status, ToolStatus::Success);
            assert_eq!(Some(result.tool_call_id.as_str()), call.id.as_deref());
            assert_eq!(result.name.as_deref(), Some("multiply"));
            direct |= multiply.return_direct();
            messages.push(Message::from(result));
        }
        if direct {
            break;
        }
    }
    // The model called the tool, the tool ran once per call, and the loop ended on the tool's result.
    let kinds: Vec<&str> = messages
        .iter()
        .map(|m| match m {
            Message::System(_) => "system",
            Message::Human(_) => "human",
            Message::Ai(_) => "ai",
            Message::Tool(_) => "tool",
            Message::Remove(_) => "remove",
        })
        .collect();
    assert_eq!(kinds, ["system", "human", "ai", "tool"], "{messages:#?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let Message::Ai(ai) = &messages[2] else { unreachable!() };
    assert_eq!(finish_reason(ai), Some("tool_calls"));
    let Message::Tool(tool) = &messages[3] else { unreachable!() };
    let (a, b) = (ai.tool_calls[0].args["a"].as_i64().unwrap(), ai.tool_calls[0].args["b"].as_i64().unwrap());
    assert_eq!(tool.content.text(), (a * b).to_string());

    // The history with the call and its result goes back to the server in OpenAI's shape and is answered.
    let reply = bound.invoke(PromptValue::from(messages.clone()), &config).await.unwrap();
    assert!(reply.invalid_tool_calls.is_empty(), "{reply:?}");
    assert!(matches!(finish_reason(&reply), Some("stop" | "length" | "tool_calls")), "{reply:?}");
    let before = first_usage.unwrap();
    let after = reply.usage_metadata.unwrap();
    assert!(
        after.input_tokens > before.input_tokens + before.output_tokens,
        "the prompt did not grow by the call and its result: {before:?} then {after:?}"
    );
}
