//! A LangGraph-compatible HTTP server over weft graphs: LangGraph's SDKs and UIs talk to it unchanged.
//!
//! It serves three graphs:
//!
//! - `agent`: LangGraph's prebuilt ReAct agent with two tools; it pauses before booking a table until a
//!   human approves (`Command(resume=[{"type": "approve"}])`);
//! - `review`: drafts a note, asks a human whether to publish it (`interrupt`), then publishes or not;
//! - `chat`: a chat model that streams its reply token by token (`stream_mode="messages-tuple"`).
//!
//! The chat model follows rules instead of calling a provider, so no API key or network is needed.
//! Threads, runs and checkpoints are kept in `weft-server.db` (SQLite) in the working directory; with
//! `--in-memory`, in the process's memory only, as `langgraph dev` keeps them (nothing survives a restart).
//!
//! ```text
//! cargo run --example server --features server                     # serves on http://127.0.0.1:2024 until Ctrl-C
//! cargo run --example server --features server -- --in-memory      # the same without a database, for development
//! WEFT_API_KEY=secret cargo run --example server --features server -- --addr 0.0.0.0:8123   # beyond loopback: a key
//! cargo run --example server --features server -- --check          # serves in memory on a free port, drives each graph, exits
//! ```
//!
//! Then, from Python (`pip install langgraph-sdk`):
//!
//! ```python
//! from langgraph_sdk import get_client
//! client = get_client(url="http://127.0.0.1:2024")
//! async for part in client.runs.stream(None, "chat", input={"messages": [{"role": "user", "content": "hi"}]},
//!                                      stream_mode="messages-tuple"):
//!     print(part.event, part.data)
//! ```

mod check;
mod desk;
mod graphs;

use std::process::ExitCode;

use weft::server::{Server, ServerBuilder, ServerGraph};

const HOW_TO: &str = r#"From Python (pip install langgraph-sdk):

    from langgraph_sdk import get_client
    client = get_client(url="http://ADDR")
    thread = await client.threads.create()
    async for part in client.runs.stream(thread["thread_id"], "agent",
            input={"messages": [{"role": "user", "content": "Is it warm in Lisbon? Book a table."}]},
            stream_mode=["updates", "messages-tuple"]):
        print(part.event, part.data)
    # The run pauses before booking: approve it.
    await client.runs.wait(thread["thread_id"], "agent", command={"resume": [{"type": "approve"}]})
"#;

fn builder() -> Result<ServerBuilder, Box<dyn std::error::Error>> {
    Ok(Server::builder()
        .graph(
            "agent",
            ServerGraph::new(graphs::agent()?).description("Plans evenings out; a human approves bookings"),
        )
        .graph(
            "review",
            ServerGraph::new(graphs::review()?).description("Asks a human before it publishes a draft"),
        )
        .graph("chat", ServerGraph::new(graphs::chat()?).description("Streams its replies token by token")))
}

async fn check() -> Result<(), Box<dyn std::error::Error>> {
    let server = builder()?.in_memory().build().await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve_with_shutdown(listener, async {
        let _ = stopped.await;
    }));
    println!("checking the server on http://{addr}");
    let outcome = check::run(addr).await;
    let _ = stop.send(());
    serving.await??;
    outcome?;
    println!("every check passed");
    Ok(())
}

/// Serves until Ctrl-C: on `weft-server.db`, or with nothing kept past the process when `in_memory`.
async fn serve(addr: &str, in_memory: bool) -> Result<(), Box<dyn std::error::Error>> {
    let kept = if in_memory { "in memory: nothing survives a restart" } else { "in weft-server.db" };
    println!("weft server on http://{addr} (Ctrl-C to stop), {kept}: graphs agent, review, chat");
    println!("{}", HOW_TO.replace("ADDR", addr));
    let mut builder = if in_memory { builder()?.in_memory() } else { builder()?.sqlite("weft-server.db") };
    // Other machines may reach a server beyond loopback: it then asks for this key (`x-api-key`).
    if let Ok(key) = std::env::var("WEFT_API_KEY") {
        builder = builder.api_keys([(key, "user".to_owned())]);
    }
    builder.serve(addr).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--check"] => check().await,
        [] => serve("127.0.0.1:2024", false).await,
        ["--in-memory"] => serve("127.0.0.1:2024", true).await,
        ["--addr", addr] => serve(addr, false).await,
        ["--addr", addr, "--in-memory"] | ["--in-memory", "--addr", addr] => serve(addr, true).await,
        _ => Err("usage: server [--check | [--addr HOST:PORT] [--in-memory]]".into()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("server: {e}");
            ExitCode::FAILURE
        }
    }
}
