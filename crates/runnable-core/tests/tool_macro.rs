//! The `#[tool]` macro: name, description, schema, calls, injected arguments, return and error types.
#![allow(clippy::unwrap_used, missing_docs)]

use serde::Serialize;
use serde_json::json;
use weft_runnable_core::{
    Error, Runnable, RunnableConfig, Tool, ToolCall, ToolContext, ToolOutput, ToolStatus, tool,
};

/// Adds two numbers.
///
/// Use it for sums.
#[tool]
async fn add(
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
) -> i64 {
    a + b
}

/// Greets someone, optionally loudly.
#[tool(name = "greet_person", return_direct)]
fn greet(name: String, loud: Option<bool>) -> String {
    if loud.unwrap_or(false) { format!("HELLO {}", name.to_uppercase()) } else { format!("hello {name}") }
}

#[derive(Debug)]
struct Overdrawn(i64);

impl std::fmt::Display for Overdrawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "account overdrawn by {}", self.0)
    }
}

impl std::error::Error for Overdrawn {}

/// Withdraws money.
#[tool]
fn withdraw(amount: i64) -> Result<i64, Overdrawn> {
    if amount > 100 { Err(Overdrawn(amount - 100)) } else { Ok(100 - amount) }
}

/// Fails with a plain string error.
#[tool]
async fn flaky(attempt: u32) -> Result<String, String> {
    if attempt == 0 { Err("not yet".to_owned()) } else { Ok("done".to_owned()) }
}

/// Fails with weft's own error.
#[tool]
async fn strict(value: i64) -> weft_runnable_core::Result<i64> {
    if value < 0 { Err(Error::InvalidInput("negative value".to_owned())) } else { Ok(value) }
}

#[derive(Serialize)]
struct Weather {
    city: String,
    celsius: i32,
}

/// Looks up the weather.
#[tool]
async fn weather(city: String) -> Weather {
    Weather { city, celsius: 21 }
}

/// Searches documents, keeping the raw hits as the artifact.
#[tool]
fn search(query: String) -> ToolOutput {
    ToolOutput::content_and_artifact(format!("2 hits for {query}"), json!([1, 2]))
}

/// Records a note for the current call.
#[tool]
async fn note(
    text: String,
    #[inject(tool_call_id)] call_id: String,
    #[inject(state = "user")] user: String,
    ctx: &ToolContext,
) -> String {
    let tags = ctx.config().tags.join(",");
    format!("{user} noted '{text}' in {call_id} [{tags}]")
}

/// A state value with no JSON schema of its own (like a list of messages).
#[derive(Debug, serde::Deserialize)]
struct Entry {
    who: String,
}

/// Counts the entries of the caller's state.
#[tool]
fn count_entries(
    /// Whose entries to count.
    who: String,
    #[inject(state = "entries")] entries: Vec<Entry>,
) -> usize {
    entries.iter().filter(|e| e.who == who).count()
}

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { name: name.to_owned(), args, id: Some("call_1".to_owned()) }
}

#[test]
fn tool_macro_takes_name_and_description_from_the_function() {
    assert_eq!(Tool::name(&add), "add");
    assert_eq!(add.description(), "Adds two numbers.\n\nUse it for sums.");
    assert!(!add.return_direct());
    assert_eq!(Tool::name(&greet), "greet_person");
    assert!(greet.return_direct());
}

#[test]
fn tool_macro_schema_lists_parameters_with_their_docs() {
    assert_eq!(
        add.args_schema(),
        &json!({
            "type": "object",
            "properties": {
                "a": {"description": "The first number.", "type": "integer", "format": "int64"},
                "b": {"description": "The second number.", "type": "integer", "format": "int64"},
            },
            "required": ["a", "b"],
        })
    );
    let greet_schema = greet.args_schema();
    assert_eq!(greet_schema["required"], json!(["name"]));
    assert_eq!(greet_schema["properties"]["loud"]["type"], json!(["boolean", "null"]));
}

#[test]
fn tool_macro_keeps_the_function_callable() {
    assert_eq!(greet::run("ann".to_owned(), None), "hello ann");
    assert_eq!(withdraw::run(30).unwrap(), 70);
}

#[tokio::test]
async fn tool_macro_tool_runs_as_runnable() {
    let config = RunnableConfig::default();
    let message = add.invoke(call("add", json!({"a": 2, "b": 40})), &config).await.unwrap();
    assert_eq!(message.content.text(), "42");
    assert_eq!(message.tool_call_id, "call_1");
    assert_eq!(message.name.as_deref(), Some("add"));
    let message =
        greet.invoke(call("greet_person", json!({"name": "bo", "loud": true})), &config).await.unwrap();
    assert_eq!(message.content.text(), "HELLO BO");
    let message = weather.invoke(call("weather", json!({"city": "Oslo"})), &config).await.unwrap();
    assert_eq!(message.content.text(), r#"{"city":"Oslo","celsius":21}"#);
    let message = search.invoke(call("search", json!({"query": "rust"})), &config).await.unwrap();
    assert_eq!(message.content.text(), "2 hits for rust");
    assert_eq!(message.artifact, Some(json!([1, 2])));
}

#[tokio::test]
async fn tool_macro_converts_every_error_type() {
    let config = RunnableConfig::default();
    let err = withdraw.invoke(call("withdraw", json!({"amount": 150})), &config).await.unwrap_err();
    assert_eq!(err.downcast_custom::<Overdrawn>().unwrap().0, 50);
    let err = flaky.invoke(call("flaky", json!({"attempt": 0})), &config).await.unwrap_err();
    assert_eq!(err.to_string(), "not yet");
    let err = strict.invoke(call("strict", json!({"value": -1})), &config).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(ref m) if m == "negative value"), "{err:?}");
}

#[tokio::test]
async fn tool_macro_injected_arguments_are_hidden_and_filled() {
    let schema = note.model_schema();
    assert_eq!(schema["required"], json!(["text"]));
    assert_eq!(schema["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["text"]);
    assert_eq!(note.spec().parameters, *schema);

    let ctx = ToolContext::new(RunnableConfig::default().with_tag("t1")).with_state(json!({"user": "ann"}));
    let out = weft_runnable_core::invoke_tool(&note, call("note", json!({"text": "hi"})), ctx).await.unwrap();
    let weft_runnable_core::ToolCallOutput::Message(message) = out else { panic!("expected a message") };
    assert_eq!(message.content.text(), "ann noted 'hi' in call_1 [t1]");
    assert_eq!(message.status, ToolStatus::Success);
}

#[tokio::test]
async fn tool_macro_injected_arguments_need_no_schema() {
    // The injected argument is listed as any JSON in the full schema, and hidden from the model's.
    assert_eq!(count_entries.args_schema()["required"], json!(["who", "entries"]));
    assert_eq!(count_entries.args_schema()["properties"]["entries"], json!(true));
    assert_eq!(count_entries.model_schema()["required"], json!(["who"]));

    let state = json!({"entries": [{"who": "ann"}, {"who": "bo"}, {"who": "ann"}]});
    let ctx = ToolContext::new(RunnableConfig::default()).with_state(state);
    let out =
        weft_runnable_core::invoke_tool(&count_entries, call("count_entries", json!({"who": "ann"})), ctx);
    let weft_runnable_core::ToolCallOutput::Message(message) = out.await.unwrap() else {
        panic!("expected a message")
    };
    assert_eq!(message.content.text(), "2");

    // A state value of the wrong shape is an error naming the tool, not a panic.
    let ctx = ToolContext::new(RunnableConfig::default()).with_state(json!({"entries": [{"name": "ann"}]}));
    let err =
        weft_runnable_core::invoke_tool(&count_entries, call("count_entries", json!({"who": "ann"})), ctx)
            .await
            .unwrap_err();
    assert!(err.to_string().contains("count_entries"), "{err}");
}

#[tokio::test]
async fn tool_macro_reports_missing_injected_state() {
    let err = note.invoke(call("note", json!({"text": "hi"})), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool 'note' failed: injected argument 'user' needs the state key 'user', which the caller did not provide"
    );
}
