//! LCEL: `prompt | model | parser`, invoked, batched, streamed token by token, and watched as run events.
//!
//! The model is weft's scripted fake chat model, so no API key or server is needed. The program checks
//! its own results: a wrong one panics and the exit status is non-zero.
//!
//! Run it from the repository root: `cargo run --example lcel`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft::EventSink;
use weft::fakes::FakeChatModel;
use weft::prelude::*;

/// The chain: a chat prompt, a chat model and a parser that keeps the reply's text, run as "capitals".
fn chain(model: FakeChatModel) -> weft::Result<impl Runnable<Value, String>> {
    let prompt = ChatPromptTemplate::from_messages([
        ("system", "You answer in one short sentence."),
        ("human", "What is the capital of {country}?"),
    ])?;
    Ok((prompt | model | StrOutputParser).with_config(RunnableConfig::default().with_run_name("capitals")))
}

/// Counts the chat-model runs in progress and remembers the most seen at once.
fn concurrency_probe() -> (EventSink, Arc<AtomicUsize>) {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let seen = Arc::clone(&peak);
    let sink = EventSink::new(move |event| match event.event.as_str() {
        "on_chat_model_start" => {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
        }
        "on_chat_model_end" => {
            running.fetch_sub(1, Ordering::SeqCst);
        }
        _ => {}
    });
    (sink, seen)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

async fn example() -> weft::Result<()> {
    // One scripted reply per call, in order; each call takes 20 ms, so overlapping calls can be seen.
    let replies =
        ["Paris is the capital of France.", "Rome.", "Oslo.", "Bern.", "Tokyo is the capital.", "Lima."];
    let model = FakeChatModel::new(replies).with_delay(Duration::from_millis(20));
    let chain = chain(model.clone())?;
    let config = RunnableConfig::default();

    // invoke: one input in, the model's answer out as a plain string.
    let answer = chain.invoke(json!({"country": "France"}), &config).await?;
    println!("invoke: {answer:?}");
    assert_eq!(answer, "Paris is the capital of France.");
    // The model saw the formatted prompt.
    assert_eq!(model.calls()[0].messages[1].text(), "What is the capital of France?");

    // batch: three inputs, at most two running at once; the answers keep the input order.
    let (probe, peak) = concurrency_probe();
    let batch_config = config.clone().with_max_concurrency(2).with_callbacks(probe);
    let inputs = ["Italy", "Norway", "Switzerland"].map(|country| json!({ "country": country }));
    let answers = chain.batch(Vec::from(inputs), &batch_config).await?;
    println!("batch: {answers:?}, at most {} model calls at once", peak.load(Ordering::SeqCst));
    assert_eq!(answers, ["Rome.", "Oslo.", "Bern."]);
    assert_eq!(peak.load(Ordering::SeqCst), 2, "max_concurrency 2 allows two calls at once, no more");

    // stream: the parser passes each model token on as soon as it arrives; the model leaves its stream open,
    // so an empty chunk closes it, as langchain-core sends one.
    let mut tokens = Vec::new();
    let mut stream = chain.stream(json!({"country": "Japan"}), &config);
    while let Some(token) = stream.next().await {
        tokens.push(token?);
    }
    drop(stream);
    println!("stream: {tokens:?}");
    assert_eq!(tokens, ["Tokyo", " is", " the", " capital.", ""]);

    // stream_events: every nested run reports its start, its chunks and its end.
    let mut events = Vec::new();
    let mut stream = chain.stream_events(json!({"country": "Peru"}), &config);
    println!("stream_events:");
    while let Some(event) = stream.next().await {
        let event = event?;
        println!("  {:<20} {}", event.event, event.name);
        events.push((event.event, event.name));
    }
    drop(stream);
    // One token ("Lima.") and the closing chunk, so two rounds of stream events; the parser starts when its
    // first chunk comes.
    let expected = [
        ("on_chain_start", "capitals"),
        ("on_prompt_start", "ChatPromptTemplate"),
        ("on_prompt_end", "ChatPromptTemplate"),
        ("on_chat_model_start", "FakeChatModel"),
        ("on_chat_model_stream", "FakeChatModel"),
        ("on_parser_start", "StrOutputParser"),
        ("on_parser_stream", "StrOutputParser"),
        ("on_chain_stream", "capitals"),
        ("on_chat_model_stream", "FakeChatModel"),
        ("on_parser_stream", "StrOutputParser"),
        ("on_chain_stream", "capitals"),
        ("on_chat_model_end", "FakeChatModel"),
        ("on_parser_end", "StrOutputParser"),
        ("on_chain_end", "capitals"),
    ];
    let events: Vec<(&str, &str)> = events.iter().map(|(e, n)| (e.as_str(), n.as_str())).collect();
    assert_eq!(events, expected);

    println!("lcel: all checks passed");
    Ok(())
}
