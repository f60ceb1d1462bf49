//! `Connection`: how to reach one MCP server (a child process over stdio, or a Streamable HTTP endpoint).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a request (a tool call included) may take by default before it is cancelled.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long connecting (starting the process, the MCP handshake) may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach one MCP server; the same shape as langchain-mcp-adapters' connection dicts, so a JSON
/// configuration such as `{"transport": "stdio", "command": "node", "args": ["server.js"]}` or
/// `{"transport": "streamable_http", "url": "http://127.0.0.1:3001/mcp"}` deserializes into it.
///
/// ```
/// use weft_integrations::mcp::Connection;
///
/// let math = Connection::stdio("python", ["math_server.py"]).env("LOG_LEVEL", "debug");
/// let weather = Connection::http("http://127.0.0.1:8000/mcp").header("Authorization", "Bearer t");
/// let parsed: Connection = serde_json::from_value(serde_json::json!({
///     "transport": "stdio", "command": "python", "args": ["math_server.py"], "env": {"LOG_LEVEL": "debug"}
/// })).unwrap();
/// assert_eq!(parsed, math);
/// # let _ = weather;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Connection {
    /// A server started as a child process, spoken to over its stdin and stdout.
    Stdio(StdioConnection),
    /// A server reached over MCP's Streamable HTTP transport.
    #[serde(alias = "http", alias = "streamable-http")]
    StreamableHttp(HttpConnection),
}

/// A server started as a child process (see [`Connection::stdio`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StdioConnection {
    /// The program.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to the environment it inherits.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working folder (the caller's when absent).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Limits of its requests.
    #[serde(flatten)]
    pub timeouts: Timeouts,
}

/// A server reached over Streamable HTTP (see [`Connection::http`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpConnection {
    /// The endpoint, such as `http://127.0.0.1:3001/mcp`.
    pub url: String,
    /// Headers sent with every request (authentication, for instance).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Limits of its requests.
    #[serde(flatten)]
    pub timeouts: Timeouts,
}

/// How long a server may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeouts {
    /// The limit of one request, tool calls included ([`DEFAULT_TIMEOUT`]); in seconds in JSON
    /// (`"timeout": 30`).
    #[serde(default = "default_timeout", rename = "timeout", with = "secs")]
    pub request: Duration,
    /// The limit of connecting ([`DEFAULT_CONNECT_TIMEOUT`]); `"connect_timeout"` in JSON, in seconds.
    #[serde(default = "default_connect_timeout", rename = "connect_timeout", with = "secs")]
    pub connect: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { request: DEFAULT_TIMEOUT, connect: DEFAULT_CONNECT_TIMEOUT }
    }
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

fn default_connect_timeout() -> Duration {
    DEFAULT_CONNECT_TIMEOUT
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(value.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(secs)
            .map_err(|e| serde::de::Error::custom(format!("timeout {secs}: {e}")))
    }
}

impl Connection {
    /// A server started as `command args...`.
    pub fn stdio(command: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::Stdio(StdioConnection {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
            timeouts: Timeouts::default(),
        })
    }

    /// A server at `url`, over Streamable HTTP.
    pub fn http(url: impl Into<String>) -> Self {
        Self::StreamableHttp(HttpConnection {
            url: url.into(),
            headers: BTreeMap::new(),
            timeouts: Timeouts::default(),
        })
    }

    /// Adds an environment variable (a stdio server; ignored over HTTP).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Self::Stdio(stdio) = &mut self {
            stdio.env.insert(key.into(), value.into());
        }
        self
    }

    /// Sets the working folder (a stdio server; ignored over HTTP).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Self::Stdio(stdio) = &mut self {
            stdio.cwd = Some(dir.into());
        }
        self
    }

    /// Adds a header sent with every request (an HTTP server; ignored over stdio).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Self::StreamableHttp(http) = &mut self {
            http.headers.insert(name.into(), value.into());
        }
        self
    }

    /// Sets how long one request (a tool call included) may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeouts_mut().request = timeout;
        self
    }

    /// Sets how long connecting may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts_mut().connect = timeout;
        self
    }

    /// The limits of this connection.
    pub fn timeouts(&self) -> Timeouts {
        match self {
            Self::Stdio(stdio) => stdio.timeouts,
            Self::StreamableHttp(http) => http.timeouts,
        }
    }

    fn timeouts_mut(&mut self) -> &mut Timeouts {
        match self {
            Self::Stdio(stdio) => &mut stdio.timeouts,
            Self::StreamableHttp(http) => &mut http.timeouts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_connections_parse_with_their_aliases_and_timeouts_in_seconds() {
        for transport in ["streamable_http", "http", "streamable-http"] {
            let parsed: Connection = serde_json::from_value(serde_json::json!({
                "transport": transport, "url": "http://h/mcp", "timeout": 2.5, "headers": {"a": "b"}
            }))
            .unwrap();
            assert_eq!(
                parsed,
                Connection::http("http://h/mcp").header("a", "b").timeout(Duration::from_millis(2500))
            );
            assert_eq!(parsed.timeouts().connect, DEFAULT_CONNECT_TIMEOUT);
        }
    }

    #[test]
    fn bad_configurations_are_errors_that_say_what_is_wrong() {
        let unknown =
            serde_json::from_value::<Connection>(serde_json::json!({"transport": "sse", "url": "u"}));
        assert!(unknown.unwrap_err().to_string().contains("unknown variant `sse`"));
        let missing = serde_json::from_value::<Connection>(serde_json::json!({"transport": "stdio"}));
        assert!(missing.unwrap_err().to_string().contains("missing field `command`"));
        let negative = serde_json::from_value::<Connection>(
            serde_json::json!({"transport": "stdio", "command": "x", "timeout": -1}),
        );
        assert!(negative.unwrap_err().to_string().contains("timeout -1"));
    }
}
