//! `--check`: drives each graph through the HTTP API as LangGraph's SDK would, and checks the answers.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// One request over a fresh connection; returns the status and the body (chunks joined).
async fn request(addr: SocketAddr, method: &str, path: &str, body: &Value) -> Result<(u16, String), String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let body = body.to_string();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(format!("{head}{body}").as_bytes()).await.map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
    let raw = String::from_utf8(raw).map_err(|e| e.to_string())?;
    let (head, mut rest) = raw.split_once("\r\n\r\n").ok_or("no response head")?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or("no status")?;
    if !head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return Ok((status, rest.to_owned()));
    }
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).map_err(|e| e.to_string())?;
        if size == 0 || tail.len() < size {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail.get(size + 2..).unwrap_or_default();
    }
    Ok((status, out))
}

async fn json(addr: SocketAddr, method: &str, path: &str, body: Value) -> Result<Value, String> {
    let (status, text) = request(addr, method, path, &body).await?;
    if status != 200 {
        return Err(format!("{method} {path} answered {status}: {text}"));
    }
    serde_json::from_str(text.trim()).map_err(|e| format!("{method} {path}: not JSON ({e}): {text}"))
}

fn expect(ok: bool, what: &str) -> Result<(), String> {
    if ok { Ok(()) } else { Err(format!("check failed: {what}")) }
}

/// Runs every check against the server at `addr`.
pub(crate) async fn run(addr: SocketAddr) -> Result<(), String> {
    // A chat run streamed with `messages-tuple`: the reply's tokens as they come.
    let body = json!({
        "assistant_id": "chat",
        "input": {"messages": [{"role": "user", "content": "hello server"}]},
        "stream_mode": "messages-tuple",
    });
    let (status, sse) = request(addr, "POST", "/runs/stream", &body).await?;
    expect(status == 200 && sse.starts_with("event: metadata\r\n"), "the stream starts with its metadata")?;
    let tokens: Vec<String> = sse
        .split("\r\n\r\n")
        .filter(|frame| frame.starts_with("event: messages\r\n"))
        .filter_map(|frame| frame.split_once("data: ").map(|(_, data)| data.to_owned()))
        .filter_map(|data| serde_json::from_str::<Value>(&data).ok())
        .filter_map(|pair| pair[0]["content"].as_str().map(str::to_owned))
        .collect();
    println!("chat: {} tokens: {:?}", tokens.len(), tokens.concat());
    expect(
        tokens.len() > 1 && tokens.concat() == "You said: hello server",
        "the chat reply streams token by token",
    )?;

    // The review graph pauses for a human, who answers; the thread then shows the outcome.
    let thread = json(addr, "POST", "/threads", json!({})).await?;
    let tid = thread["thread_id"].as_str().ok_or("no thread id")?.to_owned();
    let paused = json(
        addr,
        "POST",
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "review", "input": {"topic": "SSE"}}),
    )
    .await?;
    println!("review: paused with {}", paused["__interrupt__"][0]["value"]);
    expect(paused["__interrupt__"][0]["value"]["question"] == "Publish this draft?", "the review asks")?;
    let done = json(
        addr,
        "POST",
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "review", "command": {"resume": "yes"}}),
    )
    .await?;
    expect(done["status"] == "published", "the approved draft is published")?;
    let thread = json(addr, "GET", &format!("/threads/{tid}"), json!({})).await?;
    expect(thread["status"] == "idle", "the thread is idle again")?;

    // The agent checks the weather, then waits for a human to approve the booking.
    let tid = json(addr, "POST", "/threads", json!({})).await?["thread_id"]
        .as_str()
        .ok_or("no thread id")?
        .to_owned();
    let question =
        json!({"messages": [{"role": "user", "content": "Is it warm in Porto tonight? Then book a table."}]});
    let paused = json(
        addr,
        "POST",
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "agent", "input": question}),
    )
    .await?;
    let request = &paused["__interrupt__"][0]["value"]["action_requests"][0];
    println!("agent: paused for {}({})", request["name"], request["args"]);
    expect(request["name"] == "book_table", "the booking waits for approval")?;
    let done = json(
        addr,
        "POST",
        &format!("/threads/{tid}/runs/wait"),
        json!({"assistant_id": "agent", "command": {"resume": [{"type": "approve"}]}}),
    )
    .await?;
    let answer =
        done["messages"].as_array().and_then(|m| m.last()).map(|m| m["content"].clone()).unwrap_or_default();
    println!("agent: {answer}");
    expect(
        answer.as_str().is_some_and(|a| a.contains("Porto tonight") && a.contains("Booked a table")),
        "the agent answers",
    )?;
    Ok(())
}
