//! Connecting to servers that are not there or not MCP servers: each a clear, typed error, quickly, with
//! what the process said. Needs only `sh`.

#![cfg(feature = "mcp")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use weft_integrations::mcp::{Connection, McpError, McpSession};

#[tokio::test]
async fn a_command_that_is_not_there_is_a_spawn_error_naming_it() {
    let err = McpSession::connect("ghost", &Connection::stdio("/nonexistent/server", ["--flag"]))
        .await
        .unwrap_err();
    let McpError::Spawn { server, command, source } = &err else { panic!("{err:?}") };
    assert_eq!((server.as_str(), command.as_str()), ("ghost", "/nonexistent/server --flag"));
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(err.to_string(), "cannot start mcp server 'ghost' (/nonexistent/server --flag)");
}

#[tokio::test]
async fn an_empty_command_is_a_configuration_error() {
    let err = McpSession::connect("blank", &Connection::stdio(" ", Vec::<String>::new())).await.unwrap_err();
    assert!(matches!(err, McpError::Config(ref m) if m.contains("empty command")), "{err:?}");
}

#[tokio::test]
async fn a_process_that_exits_at_once_fails_the_handshake_with_its_status_and_stderr() {
    let connection = Connection::stdio("sh", ["-c", "echo 'missing API key' >&2; exit 3"]);
    let started = Instant::now();
    let err = McpSession::connect("broken", &connection).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let McpError::Connect { server, message } = &err else { panic!("{err:?}") };
    assert_eq!(server, "broken");
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(message.contains("stderr: missing API key"), "{message}");
}

#[tokio::test]
async fn a_process_that_never_answers_fails_within_the_connect_timeout() {
    let connection = Connection::stdio("sleep", ["30"]).connect_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = McpSession::connect("mute", &connection).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert_eq!(
        err.to_string(),
        "cannot connect to mcp server 'mute': no answer to the handshake within 300ms"
    );
}

#[tokio::test]
async fn invalid_http_settings_are_configuration_errors() {
    let err = McpSession::connect("x", &Connection::http("not a url")).await.unwrap_err();
    assert!(matches!(err, McpError::Config(ref m) if m.contains("invalid url")), "{err:?}");
    let err = McpSession::connect("x", &Connection::http("ftp://h/mcp")).await.unwrap_err();
    assert!(matches!(err, McpError::Config(ref m) if m.contains("is not http(s)")), "{err:?}");
    let err = McpSession::connect("x", &Connection::http("http://127.0.0.1:9/mcp").header("bad header", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Config(ref m) if m.contains("invalid name")), "{err:?}");
}
