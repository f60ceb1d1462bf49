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
//! - `otel`: [`otel::init`], which exports weft's `tracing` spans (graph runs, node tasks, model and tool
//!   calls) over OTLP to any OpenTelemetry backend (Arize Phoenix, Jaeger, Langfuse, ...).
//!
//! Every saver passes weft's checkpointer conformance suite and every store its store conformance suite
//! (`weft_graph::checkpoint::conformance`, `weft_graph::store::conformance`).

#[cfg(feature = "_sql")]
mod sql;

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

#[cfg(feature = "_sql")]
pub use sql::delta::DeltaStorage;
