//! The public fakes: scripted chat model, scripted completion model, deterministic embeddings.
#![allow(clippy::unwrap_used, missing_docs)]

use futures::StreamExt as _;
use serde_json::json;
use weft_runnable_core::fakes::{FakeChatModel, FakeEmbeddings, FakeListLlm, FakeReply, TokenSplit};
use weft_runnable_core::{
    AiMessage, CallOptions, Embeddings, EventRecorder, InvalidToolCall, ModelErrorKind, PromptValue,
    Runnable, RunnableConfig, ToolCall, UsageMetadata,
};

fn ask(text: &str) -> PromptValue {
    PromptValue::from(text)
}

#[tokio::test]
async fn fake_chat_model_answers_in_order_and_records_messages() {
    let model = FakeChatModel::new(["first", "second"]);
    let config = RunnableConfig::default();
    assert_eq!(model.invoke(ask("a"), &config).await.unwrap().text(), "first");
    assert_eq!(model.invoke(ask("b"), &config).await.unwrap().text(), "second");
    let asked: Vec<_> = model.calls().iter().map(|c| c.messages[0].text()).collect();
    assert_eq!(asked, vec!["a", "b"]);
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn fake_chat_model_errors_clearly_when_its_script_runs_out() {
    let model = FakeChatModel::new(["only"]);
    let config = RunnableConfig::default();
    model.invoke(ask("a"), &config).await.unwrap();
    let err = model.invoke(ask("b"), &config).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "fake error: FakeChatModel has no scripted reply left for call 2 (it was given 1)"
    );
    model.push_reply("more");
    assert_eq!(model.invoke(ask("c"), &config).await.unwrap().text(), "more");
}

#[tokio::test]
async fn fake_chat_model_fails_on_cue_then_continues() {
    let model = FakeChatModel::new([FakeReply::rate_limited(), FakeReply::text("recovered")]);
    let config = RunnableConfig::default();
    let err = model.invoke(ask("a"), &config).await.unwrap_err();
    let model_error = err.as_model().unwrap();
    assert_eq!(model_error.kind, ModelErrorKind::RateLimited);
    assert!(model_error.is_transient());
    assert_eq!(model.invoke(ask("a"), &config).await.unwrap().text(), "recovered");
}

#[tokio::test]
async fn fake_chat_model_streams_failure_as_an_error_item() {
    let model = FakeChatModel::new([FakeReply::rate_limited()]);
    let items: Vec<_> = model.stream(ask("a"), &RunnableConfig::default()).collect().await;
    assert_eq!(items.len(), 1);
    assert!(items[0].as_ref().unwrap_err().as_model().unwrap().is_rate_limited());
}

#[tokio::test]
async fn fake_chat_model_streams_by_words_chars_or_whole() {
    let config = RunnableConfig::default();
    let texts = |chunks: Vec<weft_runnable_core::Result<AiMessage>>| {
        chunks.into_iter().map(|c| c.unwrap().text()).collect::<Vec<_>>()
    };
    let words = FakeChatModel::new(["  Hello big\nworld "]);
    assert_eq!(
        texts(words.stream(ask("x"), &config).collect().await),
        vec!["  Hello", " big", "\nworld", " ", ""]
    );
    // The last chunk is not marked "last", so the model's run closes the stream with an empty chunk.
    let chars = FakeChatModel::new(["abc"]).with_split(TokenSplit::Chars);
    assert_eq!(texts(chars.stream(ask("x"), &config).collect().await), vec!["a", "b", "c", ""]);
    let whole = FakeChatModel::new(["a b"]).with_split(TokenSplit::Whole);
    assert_eq!(texts(whole.stream(ask("x"), &config).collect().await), vec!["a b", ""]);
}

/// Each split cuts as its doc says (`WordsAndSpaces` as langchain-core's `GenericFakeChatModel`), piece by
/// piece, and the pieces join back to the text.
#[test]
fn token_splits_cut_texts_piece_by_piece() {
    let cases: [(TokenSplit, &str, &[&str]); 11] = [
        (TokenSplit::Words, "  Hello big\nworld ", &["  Hello", " big", "\nworld", " "]),
        (TokenSplit::Words, "a", &["a"]),
        (TokenSplit::Words, "   ", &["   "]),
        (TokenSplit::WordsAndSpaces, "Hello  world", &["Hello", " ", "", " ", "world"]),
        (TokenSplit::WordsAndSpaces, " a", &["", " ", "a"]),
        (TokenSplit::WordsAndSpaces, "a ", &["a", " ", ""]),
        (TokenSplit::WordsAndSpaces, "é\tß", &["é", "\t", "ß"]),
        (TokenSplit::Chars, "aé😀", &["a", "é", "😀"]),
        (TokenSplit::Whole, "a b", &["a b"]),
        (TokenSplit::Whole, "", &[]),
        (TokenSplit::WordsAndSpaces, "", &[]),
    ];
    for (split, text, expected) in cases {
        let pieces = split.split(text);
        assert_eq!(pieces, expected, "{split:?} of {text:?}");
        assert_eq!(pieces.concat(), text);
    }
    assert!(TokenSplit::Words.split("").is_empty() && TokenSplit::Chars.split("").is_empty());
}

#[tokio::test]
async fn fake_chat_model_last_chunk_carries_tool_calls_usage_and_metadata() {
    let mut response_metadata = serde_json::Map::new();
    response_metadata.insert("finish_reason".into(), json!("tool_calls"));
    let scripted = AiMessage {
        id: Some("msg-7".into()),
        usage_metadata: Some(UsageMetadata::new(10, 4)),
        response_metadata,
        invalid_tool_calls: vec![InvalidToolCall {
            name: Some("broken".into()),
            args: Some("not json".into()),
            id: Some("c9".into()),
            error: None,
        }],
        tool_calls: vec![ToolCall {
            name: "search".into(),
            args: json!({"q": "rust"}),
            id: Some("c1".into()),
        }],
        ..AiMessage::new("Looking it up")
    };
    let model = FakeChatModel::new([scripted]);
    let chunks: Vec<AiMessage> =
        model.stream(ask("x"), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks.len(), 4);
    assert!(chunks[..3].iter().all(|c| c.id.as_deref() == Some("msg-7")));
    assert!(chunks[0].tool_call_chunks.is_empty() && chunks[0].usage_metadata.is_none());
    let last = &chunks[2];
    assert_eq!(last.tool_call_chunks.len(), 2);
    assert_eq!(last.tool_calls[0].args, json!({"q": "rust"}));
    assert_eq!(last.usage_metadata, Some(UsageMetadata::new(10, 4)));
    assert_eq!(last.chunk_position, None);
    // The closing chunk: empty, marked "last", with the run's id (the provider's id wins when merging).
    let closing = &chunks[3];
    assert_eq!((closing.text(), closing.chunk_position.as_deref()), (String::new(), Some("last")));
    assert!(closing.id.as_deref().is_some_and(|id| id.starts_with("lc_run--")));

    let merged =
        chunks.into_iter().reduce(|a, b| weft_runnable_core::Merge::merge(a, b).unwrap()).unwrap().finish();
    assert_eq!(merged.text(), "Looking it up");
    assert_eq!(merged.tool_calls[0].id.as_deref(), Some("c1"));
    assert_eq!(merged.invalid_tool_calls[0].args.as_deref(), Some("not json"));
}

#[tokio::test(start_paused = true)]
async fn fake_chat_model_delay_holds_each_reply() {
    let model = FakeChatModel::new(["late"]).with_delay(std::time::Duration::from_secs(5));
    let start = tokio::time::Instant::now();
    model.invoke(ask("x"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(start.elapsed(), std::time::Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn fake_chat_model_with_delay_takes_its_reply_when_called_then_waits() {
    let model = FakeChatModel::new(["A", "B"]).with_delay(std::time::Duration::from_secs(1));
    let config = RunnableConfig::default();
    let mut first = Box::pin(model.invoke(ask("a"), &config));
    assert!(futures::poll!(&mut first).is_pending());
    // The reply is bound to the call before the delay, so a later call cannot overtake it.
    assert_eq!(model.remaining(), 1);
    let second = model.invoke(ask("b"), &config);
    let (first, second) = futures::join!(first, second);
    assert_eq!((first.unwrap().text(), second.unwrap().text()), ("A".to_owned(), "B".to_owned()));
}

#[tokio::test]
async fn fake_list_llm_cuts_replies_at_stop_sequences() {
    let llm = FakeListLlm::new(["Thought: add\nAction: add\nObservation: 3", "plain answer"])
        .with_stop(["\nObservation:"]);
    let config = RunnableConfig::default();
    assert_eq!(llm.invoke(ask("q1"), &config).await.unwrap(), "Thought: add\nAction: add");
    let mut config = RunnableConfig::default();
    config.extensions.insert(CallOptions::new().with_stop(["answer"]));
    assert_eq!(llm.invoke(ask("q2"), &config).await.unwrap(), "plain ");
    assert_eq!(llm.prompts(), vec!["q1", "q2"]);
}

#[tokio::test]
async fn fake_list_llm_runs_emit_llm_events_per_token() {
    let llm = FakeListLlm::new(["one two"]);
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    assert_eq!(llm.invoke(ask("q"), &config).await.unwrap(), "one two");
    let events = recorder.events();
    let kinds: Vec<_> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, vec!["on_llm_start", "on_llm_stream", "on_llm_stream", "on_llm_end"]);
    assert_eq!(events[0].data.input, Some(json!({"prompts": ["q"]})));
    assert_eq!(events[3].data.output, Some(json!("one two")));
    let err = llm.invoke(ask("again"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("FakeListLlm has no scripted reply left for call 2"), "{err}");
}

#[tokio::test]
async fn fake_embeddings_are_deterministic_unit_vectors() {
    let embeddings = FakeEmbeddings::new(16);
    let docs = embeddings.embed_documents(vec!["cat".into(), "dog".into(), "cat".into()]).await.unwrap();
    assert_eq!(docs.len(), 3);
    assert!(docs.iter().all(|v| v.len() == 16));
    assert_eq!(docs[0], docs[2]);
    assert_ne!(docs[0], docs[1]);
    assert_eq!(embeddings.embed_query("cat").await.unwrap(), docs[0]);
    let norm: f32 = docs[1].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    assert_eq!(FakeEmbeddings::new(16).embed("cat"), docs[0]);
}
