//! A run streams no further ahead of its reader than a bound: a model faster than the reader waits for it,
//! and a reader that comes late still gets every chunk, in order.
#![allow(clippy::panic)]
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use weft_graph::{MessagesState, Runtime, START, StateGraph, StreamData, StreamMode};
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::{EventSink, Message, Runnable, RunnableConfig};

/// The bound the engine keeps (`QUEUED_CHUNKS`), with room for the chunks one step sends at once.
const BOUND: usize = 128 + 8;

const WORDS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_holds_the_model_and_a_late_one_loses_nothing() {
    let reply: Vec<String> = (0..WORDS).map(|i| format!("w{i}")).collect();
    let model = FakeChatModel::new([reply.join(" ")]);
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("reply", move |s: MessagesState, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(s.messages.into(), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(MessagesState::update().messages(vec![reply.into()]))
        }
    });
    g.add_edge(START, "reply");
    let app = g.compile().unwrap();
    // Counts the tokens the model has produced (every callback sees each as it is made).
    let made = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&made);
    let config = RunnableConfig::default().with_callbacks(EventSink::new(move |event| {
        if event.event == "on_chat_model_stream" {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }));
    let input = MessagesState::update().messages(vec![Message::human("hi").with_id("h-1")]);
    let mut stream = app.stream(input, &config, &[StreamMode::Messages]);
    let first = stream.next().await.unwrap().unwrap();
    // The reader stops: the model is held within the bound, whatever the time given to it (the stream
    // drives the run as it is polled, and the model yields once a token, so it may stop at once).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ahead = made.load(Ordering::Relaxed);
    assert!((1..=BOUND).contains(&ahead), "{ahead} tokens made for a reader that took one");
    // The reader comes back: every token arrives, in order.
    let mut words = vec![first];
    while let Some(part) = stream.next().await {
        words.push(part.unwrap());
    }
    let text: String = words
        .iter()
        .filter_map(|p| match &p.data {
            StreamData::Message { chunk, .. } => match chunk.as_ref() {
                Message::Ai(ai) if ai.is_chunk => Some(ai.text()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(text, reply.join(" "));
    assert_eq!(made.load(Ordering::Relaxed), words.len());
}
