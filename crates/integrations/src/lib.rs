//! # weft-integrations
//!
//! Implementations of weft's traits for outside services, one cargo feature each:
//!
//! - `sqlite` (on by default): [`sqlite::SqliteSaver`] and [`sqlite::SqliteStore`], the embedded
//!   checkpointer and store.
//! - `postgres`: [`postgres::PostgresSaver`] and [`postgres::PostgresStore`] on a connection pool.
//! - `redis`: [`redis::RedisSaver`] and [`redis::RedisStore`], checkpoints and long-term memory on plain
//!   Redis (no modules).
//! - `openai`: [`openai::ChatOpenAI`] and [`openai::OpenAIEmbeddings`], chat models and embeddings from
//!   OpenAI or any server that speaks its API (vLLM, llama.cpp, Ollama, ...).
//! - `mcp`: [`mcp::MultiServerMcpClient`] and [`mcp::McpSession`], the tools, prompts and resources of
//!   Model Context Protocol servers (stdio or Streamable HTTP) as weft tools and messages; and
//!   [`mcp::McpServer`], weft tools and graphs served over MCP.
//! - `otel`: [`otel::init`], which exports weft's `tracing` spans (graph runs, node tasks, model and tool
//!   calls) over OTLP to any OpenTelemetry backend (Arize Phoenix, Jaeger, Langfuse, ...).
//!
//! Every saver passes weft's checkpointer conformance suite and every store its store conformance suite
//! (`weft_graph::checkpoint::conformance`, `weft_graph::store::conformance`).

#[cfg(feature = "_sql")]
mod sql;

#[cfg(any(feature = "_sql", feature = "redis"))]
mod savers;

/// The checkpoint error of an SQL driver error (SQLite, PostgreSQL), its kind read from the driver's
/// error: [`Unavailable`](weft_graph::checkpoint::CheckpointErrorKind::Unavailable) for a passing failure
/// (a broken connection, a busy or locked database, ...), a backend error otherwise; for code beside a
/// saver that uses its pool.
#[cfg(feature = "_sql")]
pub use sql::checkpoint_error as sql_checkpoint_error;

#[cfg(feature = "sqlite")]
pub mod sqlite;

#[cfg(feature = "postgres")]
pub mod postgres;

#[cfg(feature = "redis")]
pub mod redis;

#[cfg(feature = "openai")]
pub mod openai;

#[cfg(feature = "otel")]
pub mod otel;

#[cfg(feature = "mcp")]
pub mod mcp;

/// rustls needs a process-wide cryptography provider; install ring's unless the program installed one.
#[cfg(any(feature = "openai", feature = "mcp"))]
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Fails only when another thread installed one first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(feature = "_sql")]
pub use sql::delta::DeltaStorage;
