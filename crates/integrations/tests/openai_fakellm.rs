//! `ChatOpenAI` against fakellm, a third-party OpenAI-compatible server scripted with YAML rules: chat,
//! streaming, tool calls (whole and streamed), a tool loop, structured output and error statuses.
//!
//! Each test starts its own fakellm on a free 127.0.0.1 port from `WEFT_FAKELLM_BIN` (set by
//! `cargo xtask ci`, or `cargo xtask fakellm` prints it). Without it the tests fail in CI (`CI` set) and
//! are skipped loudly elsewhere.
#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_integrations::openai::{ChatOpenAI, OpenAIError};
use weft_runnable_core::tools::invoke_tool_message;
use weft_runnable_core::{
    AiMessage, ChatModelExt, Merge as _, Message, PromptValue, Runnable, RunnableConfig,
    StructuredOutputMethod, StructuredTool, Tool, ToolChoice, ToolSpec,
};

/// Fails in CI, skips loudly elsewhere.
fn unavailable(why: &str) -> Option<FakeLlm> {
    weft_testenv::skip_or_fail(
        "the fakellm server",
        why,
        "run `cargo xtask fakellm` and export the WEFT_FAKELLM_BIN it prints",
    );
    None
}

/// A running fakellm with its rules, stopped (and its files removed) on drop.
struct FakeLlm {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl FakeLlm {
    /// Starts fakellm with `rules` (YAML is a superset of JSON, so the rules are written as JSON).
    fn start(rules: Value) -> Option<Self> {
        let Some(bin) = std::env::var_os("WEFT_FAKELLM_BIN").map(PathBuf::from) else {
            return unavailable("WEFT_FAKELLM_BIN is not set");
        };
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "weft-fakellm-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("fakellm.yaml");
        let document = json!({"version": 1, "defaults": {"fallback": "deterministic_echo"}, "rules": rules});
        std::fs::write(&config, serde_json::to_string_pretty(&document).unwrap()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(&bin)
            .arg("serve")
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--config"])
            .arg(&config)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(err) => {
                let _ = std::fs::remove_dir_all(&dir);
                return unavailable(&format!("cannot start {}: {err}", bin.display()));
            }
        };
        let mut server = FakeLlm { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                return unavailable(&format!("fakellm exited at start with {status}"));
            }
            if Instant::now() > deadline {
                return unavailable("fakellm did not listen within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(server)
    }

    fn model(&self) -> ChatOpenAI {
        ChatOpenAI::builder()
            .model("gpt-4o-mini")
            .base_url(format!("http://127.0.0.1:{}/v1", self.port))
            .api_key("not-used")
            .temperature(0.0)
            .retry_delay(Duration::from_millis(10), Duration::from_millis(50))
            .build()
            .unwrap()
    }

    /// The requests fakellm recorded (newest first), from its stats endpoint.
    async fn recent(&self) -> Vec<Value> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let request = format!(
            "GET /_fakellm/stats HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nconnection: close\r\n\r\n",
            self.port
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        let body = answer.split_once("\r\n\r\n").unwrap().1;
        let stats: Value = serde_json::from_str(body).unwrap();
        stats["recent"].as_array().unwrap().clone()
    }
}

fn add_tool() -> StructuredTool {
    StructuredTool::from_fn(
        "add",
        "Adds two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        |args, _| async move {
            let sum = args["a"].as_i64().unwrap_or_default() + args["b"].as_i64().unwrap_or_default();
            Ok(json!(sum))
        },
    )
}

async fn streamed(model: &impl Runnable<PromptValue, AiMessage>, input: PromptValue) -> (usize, AiMessage) {
    let chunks: Vec<AiMessage> =
        model.stream(input, &RunnableConfig::default()).map(|chunk| chunk.unwrap()).collect().await;
    let count = chunks.len();
    (count, chunks.into_iter().reduce(|a, b| a.merge(b).unwrap()).unwrap().finish())
}

#[tokio::test]
async fn chat_answers_with_the_scripted_text_usage_and_metadata() {
    let Some(server) = FakeLlm::start(json!([
        {"name": "greeting", "when": {"messages_contain": "hello"}, "respond": {"content": "Hi there from fakellm."}}
    ])) else {
        return;
    };
    let input = PromptValue::from(vec![Message::system("Be nice."), Message::human("hello!")]);
    let reply = server.model().invoke(input, &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "Hi there from fakellm.");
    assert!(reply.id.as_deref().unwrap().starts_with("chatcmpl-"), "{reply:?}");
    assert_eq!(reply.response_metadata["finish_reason"], json!("stop"));
    assert_eq!(reply.response_metadata["model_name"], json!("gpt-4o-mini"));
    let usage = reply.usage_metadata.unwrap();
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0, "{usage:?}");
    assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
    let recent = server.recent().await;
    assert_eq!(recent[0]["matched_rule"], json!("greeting"));
    assert_eq!(recent[0]["stream"], json!(false));
}

#[tokio::test]
async fn streaming_yields_word_chunks_that_merge_into_the_text() {
    let Some(server) = FakeLlm::start(json!([
        {"name": "story", "when": {"messages_contain": "story"}, "respond": {"content": "Once upon a time there was a graph."}}
    ])) else {
        return;
    };
    let (count, whole) = streamed(&server.model(), PromptValue::from("tell me a story")).await;
    assert_eq!(whole.text(), "Once upon a time there was a graph.");
    assert!(count >= 9, "one chunk per word at least, got {count}");
    assert_eq!(whole.response_metadata["finish_reason"], json!("stop"));
    assert_eq!(server.recent().await[0]["stream"], json!(true));
}

fn tool_rules() -> Value {
    json!([
        {"name": "call_add", "when": {"tools_include": "add", "turn": 1},
         "respond": {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 40}}]}},
        {"name": "answer", "when": {"turn": 2, "tool_result_contains": "42"},
         "respond": {"content": "2 + 40 = 42"}}
    ])
}

#[tokio::test]
async fn whole_tool_calls_are_parsed() {
    let Some(server) = FakeLlm::start(tool_rules()) else { return };
    let model = server.model().bind_tools([&add_tool()], Some(ToolChoice::Auto));
    let reply = model.invoke(PromptValue::from("what is 2 + 40?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "");
    assert_eq!(reply.tool_calls.len(), 1, "{reply:?}");
    assert_eq!(reply.tool_calls[0].name, "add");
    assert_eq!(reply.tool_calls[0].args, json!({"a": 2, "b": 40}));
    assert!(reply.tool_calls[0].id.as_deref().unwrap().starts_with("call_"));
    assert_eq!(reply.response_metadata["finish_reason"], json!("tool_calls"));
}

#[tokio::test]
async fn streamed_tool_calls_merge_their_argument_pieces() {
    let Some(server) = FakeLlm::start(tool_rules()) else { return };
    let model = server.model().bind_tools([&add_tool()], None);
    let (count, whole) = streamed(&model, PromptValue::from("what is 2 + 40?")).await;
    assert!(count > 3, "the arguments come in pieces: {count} chunks");
    assert_eq!(whole.tool_calls.len(), 1, "{whole:?}");
    assert_eq!(whole.tool_calls[0].args, json!({"a": 2, "b": 40}));
    assert!(whole.invalid_tool_calls.is_empty());
    assert_eq!(whole.response_metadata["finish_reason"], json!("tool_calls"));
}

/// The model asks for a tool, the tool runs, its result goes back, the model answers.
async fn tool_loop(stream: bool) {
    let Some(server) = FakeLlm::start(tool_rules()) else { return };
    let tool = add_tool();
    let model = server.model().bind_tools([ToolSpec::from(&tool)], Some(ToolChoice::Auto));
    let config = RunnableConfig::default();
    let mut messages = vec![Message::system("Use the tools."), Message::human("what is 2 + 40?")];
    for _ in 0..4 {
        let input = PromptValue::from(messages.clone());
        let reply = if stream {
            streamed(&model, input).await.1
        } else {
            model.invoke(input, &config).await.unwrap()
        };
        messages.push(Message::Ai(reply.clone()));
        if reply.tool_calls.is_empty() {
            break;
        }
        for call in reply.tool_calls {
            assert_eq!(call.name, Tool::name(&tool));
            let result = invoke_tool_message(&tool, call, &config).await.unwrap();
            messages.push(Message::Tool(result));
        }
    }
    let kinds: Vec<&str> = messages.iter().map(Message::type_name).collect();
    assert_eq!(kinds, vec!["system", "human", "ai", "tool", "ai"]);
    let result = messages[3].as_tool().unwrap();
    assert_eq!(result.content.text(), "42");
    assert_eq!(Some(result.tool_call_id.as_str()), messages[2].as_ai().unwrap().tool_calls[0].id.as_deref());
    assert_eq!(messages[4].text(), "2 + 40 = 42");
    let rules: Vec<Value> = server.recent().await.iter().rev().map(|r| r["matched_rule"].clone()).collect();
    assert_eq!(rules, vec![json!("call_add"), json!("answer")]);
}

#[tokio::test]
async fn a_tool_loop_runs_to_the_answer() {
    tool_loop(false).await;
}

#[tokio::test]
async fn a_streamed_tool_loop_runs_to_the_answer() {
    tool_loop(true).await;
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// A city's weather.
struct Weather {
    city: String,
    celsius: i32,
}

#[tokio::test]
async fn structured_output_by_function_calling_and_by_json() {
    let Some(server) = FakeLlm::start(json!([
        {"name": "weather_tool", "when": {"tools_include": "Weather"},
         "respond": {"tool_calls": [{"name": "Weather", "arguments": {"city": "Oslo", "celsius": -3}}]}},
        {"name": "weather_json", "when": {"messages_contain": "oslo"}, "respond": {"content": "{\"city\": \"Oslo\", \"celsius\": -3}"}}
    ])) else {
        return;
    };
    let expected = Weather { city: "Oslo".to_owned(), celsius: -3 };
    for method in [
        StructuredOutputMethod::FunctionCalling,
        StructuredOutputMethod::JsonSchema,
        StructuredOutputMethod::JsonMode,
    ] {
        let weather = server
            .model()
            .with_structured_output::<Weather>(method)
            .invoke(PromptValue::from("weather in Oslo?"), &RunnableConfig::default())
            .await
            .unwrap();
        assert_eq!(weather, expected, "{method:?}");
    }
}

#[tokio::test]
async fn error_statuses_become_typed_errors() {
    let Some(server) = FakeLlm::start(json!([
        {"name": "bad", "when": {"messages_contain": "bad request"}, "respond": {"status": 400, "error": "Invalid value for 'messages'"}},
        {"name": "slow_down", "when": {"messages_contain": "rate"}, "respond": {"status": 429, "error": "Rate limit exceeded (mock)"}},
        {"name": "broken", "when": {"messages_contain": "crash"}, "respond": {"status": 503, "error": "Service unavailable (mock)"}}
    ])) else {
        return;
    };
    let model = server.model();
    let config = RunnableConfig::default();

    let err = model.invoke(PromptValue::from("a bad request"), &config).await.unwrap_err();
    let openai = OpenAIError::from_weft(&err).unwrap();
    assert!(openai.is_invalid_request(), "{err}");
    assert_eq!(openai.api_error().unwrap().message, "Invalid value for 'messages'");
    assert_eq!(openai.api_error().unwrap().error_type.as_deref(), Some("mock_error"));

    let err = model.invoke(PromptValue::from("rate me"), &config).await.unwrap_err();
    assert!(OpenAIError::from_weft(&err).unwrap().is_rate_limited(), "{err}");
    let err = model.invoke(PromptValue::from("crash now"), &config).await.unwrap_err();
    assert!(OpenAIError::from_weft(&err).unwrap().is_server_error(), "{err}");

    let rules: Vec<String> =
        server.recent().await.iter().map(|r| r["matched_rule"].as_str().unwrap().to_owned()).collect();
    let count = |name: &str| rules.iter().filter(|r| *r == name).count();
    assert_eq!(
        (count("bad"), count("slow_down"), count("broken")),
        (1, 3, 3),
        "4xx once, 429 and 5xx retried twice"
    );
}
