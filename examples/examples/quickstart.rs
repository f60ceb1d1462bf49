//! Quickstart: a small chain invoked, batched, streamed and observed as run events.
//!
//! Until the chat-model pieces land, the chain is made of plain functions: `normalize` tidies the text,
//! `tokens` splits it into word chunks the way a model streams tokens, and `capitalize` transforms each
//! chunk as it arrives. Every result is checked; a wrong one ends the program with a non-zero status.
//!
//! Run it from the repository root: `cargo run --example quickstart`.

use std::fmt::Debug;
use std::process::ExitCode;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft::prelude::*;

/// A chain of three steps, named "quickstart" in its run events.
fn chain() -> impl Runnable<String, String> {
    let normalize = RunnableLambda::new(|text: String| text.split_whitespace().collect::<Vec<_>>().join(" "))
        .named("normalize");
    // Splits each incoming chunk into words, keeping the spaces, so that the chunks concatenate back.
    let tokens = RunnableGenerator::new(|input: BoxStream<'_, Result<String>>, _config| {
        input
            .flat_map(|chunk| {
                let words: Vec<Result<String>> = match chunk {
                    Ok(text) => text.split_inclusive(' ').map(|word| Ok(word.to_owned())).collect(),
                    Err(err) => vec![Err(err)],
                };
                futures::stream::iter(words)
            })
            .boxed()
    })
    .named("tokens");
    // Capitalizes every chunk as it passes, without waiting for the whole text.
    let capitalize = RunnableGenerator::new(|input: BoxStream<'_, Result<String>>, _config| {
        input.map(|chunk| chunk.map(|word| capitalize(&word))).boxed()
    })
    .named("capitalize");
    (normalize | tokens | capitalize).with_config(RunnableConfig::default().with_run_name("quickstart"))
}

/// Upper-cases the first letter of every word in `text`. A chunk starts a word: `tokens` splits after
/// spaces. (On `invoke` each step gets its whole input as one chunk; on `stream`, word after word.)
fn capitalize(text: &str) -> String {
    let mut after_space = true;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if after_space {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        after_space = c.is_whitespace();
    }
    out
}

/// Compares what the chain gave with what it should give.
fn check<T: PartialEq + Debug>(what: &str, got: &T, want: &T) -> std::result::Result<(), String> {
    if got == want {
        println!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

async fn run() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let chain = chain();
    let config = RunnableConfig::default();

    println!("invoke:");
    let title = chain.invoke("  hello   weft world ".to_owned(), &config).await?;
    println!("  {title:?}");
    check("invoke gives the capitalized text", &title, &"Hello Weft World".to_owned())?;

    println!("batch (3 inputs, at most 2 at a time):");
    let inputs =
        vec!["rust is fast".to_owned(), "graphs are durable".to_owned(), "  types  help ".to_owned()];
    let titles = chain.batch(inputs, &config.clone().with_max_concurrency(2)).await?;
    println!("  {titles:?}");
    let want = vec!["Rust Is Fast".to_owned(), "Graphs Are Durable".to_owned(), "Types Help".to_owned()];
    check("batch keeps the input order", &titles, &want)?;

    println!("stream:");
    let mut chunks = Vec::new();
    let mut stream = chain.stream("one chunk per word".to_owned(), &config);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        println!("  chunk {chunk:?}");
        chunks.push(chunk);
    }
    drop(stream);
    check(
        "stream yields one chunk per word",
        &chunks,
        &vec!["One ".to_owned(), "Chunk ".to_owned(), "Per ".to_owned(), "Word".to_owned()],
    )?;

    println!("stream_events:");
    let mut events = Vec::new();
    let mut stream = chain.stream_events("hi there".to_owned(), &config);
    while let Some(event) = stream.next().await {
        let event = event?;
        let chunk = event.data.chunk.as_ref().map(ToString::to_string).unwrap_or_default();
        println!("  {:<16} {:<11} {chunk}", event.event, event.name);
        events.push(event);
    }
    drop(stream);
    let first = events.first().map(|e| (e.event.as_str(), e.name.as_str()));
    let last = events.last().map(|e| (e.event.as_str(), e.name.as_str()));
    check("the chain's start comes first", &first, &Some(("on_chain_start", "quickstart")))?;
    check("the chain's end comes last", &last, &Some(("on_chain_end", "quickstart")))?;
    for step in ["normalize", "tokens", "capitalize"] {
        let phases: Vec<&str> = events
            .iter()
            .filter(|e| e.name == step && !e.event.ends_with("_stream"))
            .map(|e| e.event.as_str())
            .collect();
        check(&format!("{step} starts and ends once"), &phases, &vec!["on_chain_start", "on_chain_end"])?;
    }
    let streamed: String = events
        .iter()
        .filter(|e| e.name == "quickstart" && e.event == "on_chain_stream")
        .filter_map(|e| e.data.chunk.as_ref().and_then(|chunk| chunk.as_str()))
        .collect();
    check("the chain's stream events carry its output", &streamed, &"Hi There".to_owned())?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => {
            println!("quickstart: all checks passed");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("quickstart failed: {err}");
            ExitCode::FAILURE
        }
    }
}
