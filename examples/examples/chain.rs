//! Chain: a chain whose model calls a tool, survives a rate limit and falls back when it breaks.
//!
//! `prompt | model | parser` on weft's scripted fake chat model, so no API key or server is needed. The
//! model has the `add` tool bound, is retried when rate limited and falls back to a backup model on any
//! other failure. The first call asks for the tool, the program runs it, the second call answers. Every
//! result is checked: a wrong one panics and the exit status is non-zero.
//!
//! Run it from the repository root: `cargo run --example chain`.

use std::time::Duration;

use serde_json::json;
use weft::fakes::{FakeChatModel, FakeReply};
use weft::prelude::*;
use weft::{ModelError, ModelErrorKind};

/// Adds two integers.
#[tool]
fn add(
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
) -> i64 {
    a + b
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

async fn example() -> weft::Result<()> {
    // The prompt: instructions, the question, then the tool calls made so far (none at first).
    let prompt = ChatPromptTemplate::from_messages([
        ("system", "You are a calculator. Use the tools you are given."),
        ("human", "{question}"),
        ("placeholder", "{scratchpad}"),
    ])?;

    // The main model, scripted: rate limited once, then a call to `add`, then a server failure.
    let primary = FakeChatModel::new([
        FakeReply::rate_limited(),
        FakeReply::tool_call("add", json!({"a": 2, "b": 3}), "call-1"),
        FakeReply::error(ModelError::new("fake", ModelErrorKind::Server, "overloaded")),
    ]);
    // The backup model answers when the main one fails.
    let backup = FakeChatModel::new(["2 + 3 = 5"]);

    // Rate limits are retried after 10 ms, 20 ms, ...; any other failure goes to the backup, which has
    // the same tool bound.
    let on_rate_limit = ExponentialBackoff::new()
        .with_initial_delay(Duration::from_millis(10))
        .without_jitter()
        .retry_if(|err| err.as_model().is_some_and(ModelError::is_rate_limited));
    let model = primary
        .clone()
        .bind_tools([&add], None)
        .with_retry_policy(on_rate_limit)
        .with_fallbacks([backup.clone().bind_tools([&add], None)]);
    let chain = prompt | model;
    let config = RunnableConfig::default();

    // Round 1: the model (on its second attempt) asks for the tool.
    let question = "What is 2 + 3?";
    let request = chain.invoke(json!({ "question": question }), &config).await?;
    let call = request.tool_calls.first().cloned().ok_or_else(|| Error::msg("the model called no tool"))?;
    println!("the model calls {}({})", call.name, call.args);
    assert_eq!((call.name.as_str(), &call.args), ("add", &json!({"a": 2, "b": 3})));
    assert_eq!(primary.calls().len(), 2, "one rate-limited attempt, one retry");
    assert_eq!(primary.calls()[1].options.tools[0].name, "add", "the tool's spec went with the call");

    // Run the tool: the model's arguments are checked against the tool's schema before the call.
    let result = add.invoke(call, &config).await?;
    println!("the tool returns {}", result.content.text());
    assert_eq!((result.content.text().as_str(), result.tool_call_id.as_str()), ("5", "call-1"));

    // Round 2: the tool call and its result go back to the model, whose answer the parser turns into
    // text. The main model fails with a server error, so the backup answers.
    let scratchpad = json!([Message::from(request), Message::from(result)]);
    let answer_chain = chain | StrOutputParser;
    let answer =
        answer_chain.invoke(json!({ "question": question, "scratchpad": scratchpad }), &config).await?;
    println!("the answer: {answer}");
    assert_eq!(answer, "2 + 3 = 5");
    assert_eq!(primary.calls().len(), 3, "a server failure is not retried");
    let seen = &backup.calls()[0].messages;
    let kinds: Vec<&str> = seen.iter().map(Message::type_name).collect();
    assert_eq!(kinds, ["system", "human", "ai", "tool"], "the backup saw the whole exchange");

    println!("chain: all checks passed");
    Ok(())
}
