//! # weft-server
//!
//! The LangGraph Platform HTTP API (the API `langgraph dev` and LangGraph's Agent Server serve) over weft
//! graphs, so that LangGraph's own clients (the Python `langgraph-sdk`, the JS SDK, UIs built on them) drive
//! weft graphs unchanged: assistants, threads, runs streamed over server-sent events in every stream
//! mode, human in the loop (interrupts, `Command` resumes, breakpoints per run), history and time travel,
//! multitask strategies on a busy thread, a store, crons, and webhooks called when runs end.
//!
//! Everything lives in one process and one SQLite file by default: threads, runs and assistants, the
//! checkpoints (weft-integrations' `SqliteSaver`) and the store (`SqliteStore`). Runs are saved as
//! `pending` before a worker starts them; a run a stopped server left unfinished is picked up again at the
//! next start, from its last checkpoint. With the `scale` feature, many instances share PostgreSQL (the
//! records, a run queue with leases, checkpoints, the store) and Redis (wake-ups, cancels, the runs'
//! event streams): see `docs/server.md`, "Scaling out".
//!
//! ```no_run
//! use serde_json::json;
//! use weft_graph::{JsonState, START, StateGraph};
//! use weft_server::Server;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut graph = StateGraph::with_initial(JsonState::builder().append("items").build());
//! graph.add_node("hello", |_: &JsonState| json!({"items": ["hello"]}));
//! graph.add_edge(START, "hello");
//!
//! // `langgraph_sdk.get_client(url="http://127.0.0.1:2024")` can now run assistant "agent".
//! Server::builder().graph("agent", graph.compile()?).serve("127.0.0.1:2024").await?;
//! # Ok(())
//! # }
//! ```
//!
//! Where weft's server answers differently from LangGraph's, `docs/server.md` says so and why.

mod api;
mod app;
mod auth;
mod builder;
mod conn;
mod crons;
mod error;
mod graphs;
mod metrics;
mod model;
mod retention;
mod runs;
#[cfg(feature = "scale")]
mod scale;
mod storage;
mod store_ttl;
mod studio;
mod webhook;

/// The crate's README, whose snippet must compile: tested as a doc test here.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use auth::{Action, Auth, AuthContext, AuthError, AuthRequest, Filter, Resource, User};
pub use builder::{DEFAULT_RUN_WATCHDOG, Server, ServerBuilder};
pub use error::{ServerError, StorageError};
pub use graphs::{ServerGraph, default_assistant_id};
pub use retention::{ThreadTtlConfig, TtlStrategy};
pub use store_ttl::StoreTtlConfig;
