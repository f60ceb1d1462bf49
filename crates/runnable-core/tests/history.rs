//! Chat message histories and `RunnableWithMessageHistory`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_runnable_core::{
    AiMessage, ChatMessageHistory, ChatPromptTemplate, Error, EventRecorder, InMemoryChatMessageHistory,
    InMemoryHistoryStore, Message, PromptValue, Runnable, RunnableConfig, RunnableGenerator, RunnableLambda,
    RunnableWithMessageHistory,
};

fn session(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("session_id", id)
}

/// Stands in for a chat model: answers with the texts of every message it saw, joined by `|`.
fn echo_model() -> RunnableLambda<PromptValue, AiMessage> {
    RunnableLambda::new(|prompt: PromptValue| {
        let texts: Vec<String> = prompt.into_messages().iter().map(Message::text).collect();
        AiMessage::new(texts.join("|"))
    })
    .named("echo_model")
}

fn chat(store: &InMemoryHistoryStore) -> RunnableWithMessageHistory<AiMessage> {
    let prompt = ChatPromptTemplate::from_messages([
        ("system", "sys"),
        ("placeholder", "{history}"),
        ("human", "{question}"),
    ])
    .unwrap();
    RunnableWithMessageHistory::new(prompt | echo_model(), store.factory())
        .input_messages_key("question")
        .history_messages_key("history")
}

async fn stored(store: &InMemoryHistoryStore, id: &str) -> Vec<Message> {
    store.get(id).messages().await.unwrap()
}

#[tokio::test]
async fn in_memory_history_adds_and_clears() {
    let history = InMemoryChatMessageHistory::with_messages(vec![Message::system("s")]);
    history.add_message(Message::human("a")).await.unwrap();
    history.add_messages(vec![Message::ai("b"), Message::human("c")]).await.unwrap();
    assert_eq!(
        history.messages().await.unwrap(),
        [Message::system("s"), Message::human("a"), Message::ai("b"), Message::human("c")]
    );
    history.clear().await.unwrap();
    assert!(history.messages().await.unwrap().is_empty());
}

#[tokio::test]
async fn history_store_shares_one_history_per_session() {
    let store = InMemoryHistoryStore::new();
    let factory = store.factory();
    factory("a").add_message(Message::human("x")).await.unwrap();
    assert_eq!(stored(&store, "a").await, [Message::human("x")]);
    assert!(stored(&store, "b").await.is_empty());
    assert_eq!(store.session_ids(), ["a", "b"]);
}

#[tokio::test]
async fn history_is_loaded_before_and_saved_after_each_turn() {
    let store = InMemoryHistoryStore::new();
    let chain = chat(&store);
    let first = chain.invoke(json!({"question": "hi"}), &session("s1")).await.unwrap();
    assert_eq!(first.text(), "sys|hi");
    let second = chain.invoke(json!({"question": "again"}), &session("s1")).await.unwrap();
    assert_eq!(second.text(), "sys|hi|sys|hi|again");
    assert_eq!(
        stored(&store, "s1").await,
        [
            Message::human("hi"),
            Message::ai("sys|hi"),
            Message::human("again"),
            Message::ai("sys|hi|sys|hi|again")
        ]
    );
}

#[tokio::test]
async fn sessions_keep_separate_histories() {
    let store = InMemoryHistoryStore::new();
    let chain = chat(&store);
    chain.invoke(json!({"question": "one"}), &session("a")).await.unwrap();
    let other = chain.invoke(json!({"question": "two"}), &session("b")).await.unwrap();
    assert_eq!(other.text(), "sys|two");
    assert_eq!(stored(&store, "a").await.len(), 2);
    assert_eq!(stored(&store, "b").await.len(), 2);
}

#[tokio::test]
async fn missing_session_id_is_an_error_naming_it() {
    let store = InMemoryHistoryStore::new();
    let err = chat(&store).invoke(json!({"question": "hi"}), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, Error::MissingConfigKeys { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "missing keys [\"session_id\"] in config.configurable; expected keys are [\"session_id\"]"
    );
    assert!(store.session_ids().is_empty());
}

#[tokio::test]
async fn non_string_session_id_is_rejected_and_numbers_are_accepted() {
    let store = InMemoryHistoryStore::new();
    let config = RunnableConfig::default().with_configurable("session_id", json!(["x"]));
    let err = chat(&store).invoke(json!({"question": "hi"}), &config).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: config.configurable.session_id should be a string, got [\"x\"]"
    );
    let config = RunnableConfig::default().with_configurable("session_id", 7);
    chat(&store).invoke(json!({"question": "hi"}), &config).await.unwrap();
    assert_eq!(store.session_ids(), ["7"]);
}

#[tokio::test]
async fn without_keys_the_runnable_gets_history_and_input_as_one_list() {
    let store = InMemoryHistoryStore::new();
    store.get("s").add_messages(vec![Message::human("old"), Message::ai("reply")]).await.unwrap();
    let seen = RunnableLambda::new(|input: Value| format!("saw {input}"));
    let chain = RunnableWithMessageHistory::new(seen, store.factory());
    let out = chain.invoke(json!("new"), &session("s")).await.unwrap();
    assert_eq!(
        out,
        format!(
            "saw {}",
            json!([
                {"type": "human", "content": "old"},
                {"type": "ai", "content": "reply", "tool_calls": [], "invalid_tool_calls": []},
                {"type": "human", "content": "new"},
            ])
        )
    );
    // A string output is stored as an AI message, after the input message.
    let history = stored(&store, "s").await;
    assert_eq!(history[2..], [Message::human("new"), Message::ai(out)]);
}

#[tokio::test]
async fn with_only_an_input_key_that_key_gets_history_and_input() {
    let store = InMemoryHistoryStore::new();
    store.get("s").add_message(Message::human("old")).await.unwrap();
    let prompt =
        ChatPromptTemplate::from_messages([("placeholder", "{msgs}"), ("human", "({lang})")]).unwrap();
    let chain =
        RunnableWithMessageHistory::new(prompt | echo_model(), store.factory()).input_messages_key("msgs");
    let out = chain.invoke(json!({"msgs": "new", "lang": "fr"}), &session("s")).await.unwrap();
    assert_eq!(out.text(), "old|new|(fr)");
    assert_eq!(
        stored(&store, "s").await,
        [Message::human("old"), Message::human("new"), Message::ai("old|new|(fr)")]
    );
}

#[tokio::test]
async fn input_messages_may_be_a_message_or_a_list_of_message_likes() {
    let store = InMemoryHistoryStore::new();
    let count = RunnableLambda::new(|input: Value| Message::ai(input.as_array().unwrap().len().to_string()));
    let chain = RunnableWithMessageHistory::new(count, store.factory());
    chain.invoke(json!({"role": "user", "content": "dict"}), &session("s")).await.unwrap();
    chain
        .invoke(json!([["human", "pair"], {"type": "human", "content": "typed"}]), &session("s"))
        .await
        .unwrap();
    // Without an input key, a map's only key (or else `input`) holds the messages.
    chain.invoke(json!({"anything": "single key"}), &session("s")).await.unwrap();
    chain.invoke(json!({"input": "by input", "other": 1}), &session("s")).await.unwrap();
    let texts: Vec<String> = stored(&store, "s").await.iter().map(Message::text).collect();
    assert_eq!(texts, ["dict", "1", "pair", "typed", "4", "single key", "6", "by input", "8"]);
}

#[tokio::test]
async fn input_without_the_messages_key_is_an_error_naming_the_key() {
    let store = InMemoryHistoryStore::new();
    let err = chat(&store).invoke(json!({"q": "hi"}), &session("s")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: input has no key 'question' holding the new messages; keys are [\"q\"] \
         (set input_messages_key)"
    );
    let err = chat(&store).invoke(json!("hi"), &session("s")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: RunnableWithMessageHistory with a messages key expects a JSON object input, got \"hi\""
    );
    assert!(stored(&store, "s").await.is_empty());
}

#[tokio::test]
async fn map_outputs_give_their_messages_by_key() {
    let store = InMemoryHistoryStore::new();
    let answer =
        RunnableLambda::new(|_: Value| json!({"answer": {"type": "ai", "content": "yes"}, "docs": []}));
    let chain =
        RunnableWithMessageHistory::new(answer.clone(), store.factory()).output_messages_key("answer");
    chain.invoke(json!("q1"), &session("keyed")).await.unwrap();
    assert_eq!(stored(&store, "keyed").await, [Message::human("q1"), Message::ai("yes")]);

    let output = RunnableLambda::new(|_: Value| json!({"output": "plain text", "extra": 1}));
    RunnableWithMessageHistory::new(output, store.factory())
        .invoke(json!("q"), &session("out"))
        .await
        .unwrap();
    assert_eq!(stored(&store, "out").await, [Message::human("q"), Message::ai("plain text")]);

    let message = RunnableLambda::new(|_: Value| json!({"role": "assistant", "content": "as message"}));
    RunnableWithMessageHistory::new(message, store.factory())
        .invoke(json!("q"), &session("msg"))
        .await
        .unwrap();
    assert_eq!(stored(&store, "msg").await, [Message::human("q"), Message::ai("as message")]);

    let err = RunnableWithMessageHistory::new(answer, store.factory())
        .invoke(json!("q"), &session("bad"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: output has no key 'output' to read messages from; keys are [\"answer\", \"docs\"] \
         (set output_messages_key)"
    );
    assert!(stored(&store, "bad").await.is_empty());
}

#[tokio::test]
async fn a_failed_run_saves_nothing() {
    let store = InMemoryHistoryStore::new();
    let failing =
        RunnableLambda::try_new(|_: Value| -> weft_runnable_core::Result<String> { Err(Error::msg("boom")) });
    let chain = RunnableWithMessageHistory::new(failing, store.factory());
    let err = chain.invoke(json!("hi"), &session("s")).await.unwrap_err();
    assert_eq!(err.to_string(), "boom");
    assert!(stored(&store, "s").await.is_empty());
}

fn streaming_model() -> RunnableGenerator<Value, String> {
    RunnableGenerator::new(|input: futures::stream::BoxStream<'_, weft_runnable_core::Result<Value>>, _| {
        input
            .flat_map(|messages| {
                let n = messages.map(|m| m.as_array().map_or(0, Vec::len));
                futures::stream::iter(vec![Ok("Hel".to_owned()), n.map(|n| format!("lo {n}"))])
            })
            .boxed()
    })
}

#[tokio::test]
async fn streaming_passes_chunks_and_saves_the_merged_output() {
    let store = InMemoryHistoryStore::new();
    let chain = RunnableWithMessageHistory::new(streaming_model(), store.factory());
    let chunks: Vec<String> = chain.stream(json!("hi"), &session("s")).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, ["Hel", "lo 1"]);
    assert_eq!(stored(&store, "s").await, [Message::human("hi"), Message::ai("Hello 1")]);
    let chunks: Vec<String> = chain.stream(json!("more"), &session("s")).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, ["Hel", "lo 3"]);
    assert_eq!(stored(&store, "s").await.len(), 4);
}

#[tokio::test]
async fn streaming_without_a_session_fails_and_saves_nothing() {
    let store = InMemoryHistoryStore::new();
    let chain = RunnableWithMessageHistory::new(streaming_model(), store.factory());
    let items: Vec<_> = chain.stream(json!("hi"), &RunnableConfig::default()).collect().await;
    assert_eq!(items.len(), 1);
    assert!(matches!(items[0], Err(Error::MissingConfigKeys { .. })));
    assert!(store.session_ids().is_empty());
}

#[tokio::test]
async fn the_wrapped_runnable_runs_as_a_child() {
    let store = InMemoryHistoryStore::new();
    let recorder = EventRecorder::new();
    let config = session("s").with_callbacks(recorder.sink());
    chat(&store).invoke(json!({"question": "hi"}), &config).await.unwrap();
    let starts: Vec<(String, usize)> = recorder
        .events()
        .into_iter()
        .filter(|e| e.event.ends_with("_start"))
        .map(|e| (e.name, e.parent_ids.len()))
        .collect();
    assert_eq!(
        starts,
        [
            ("RunnableWithMessageHistory".to_owned(), 0),
            ("RunnableSequence".to_owned(), 1),
            ("ChatPromptTemplate".to_owned(), 2),
            ("echo_model".to_owned(), 2),
        ]
    );
}

#[tokio::test]
async fn any_history_implementation_can_back_a_session() {
    let shared: Arc<dyn ChatMessageHistory> =
        Arc::new(InMemoryChatMessageHistory::with_messages(vec![Message::human("seed")]));
    let handle = Arc::clone(&shared);
    let chain = RunnableWithMessageHistory::new(
        RunnableLambda::new(|input: Value| input.as_array().unwrap().len().to_string()),
        move |_: &str| Arc::clone(&handle),
    );
    assert_eq!(chain.invoke(json!("x"), &session("any")).await.unwrap(), "2");
    assert_eq!(shared.messages().await.unwrap().len(), 3);
}
