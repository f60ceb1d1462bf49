//! OpenAI and OpenAI-compatible servers (feature `openai`): [`ChatOpenAI`] and [`OpenAIEmbeddings`].
//!
//! Both speak OpenAI's HTTP API through async-openai (requests and answers handled as JSON, so the quirks
//! of compatible servers are tolerated), with rustls for TLS. None of async-openai's types appear here.
//!
//! - [`ChatOpenAI`] implements weft's `ChatModel`: whole and streamed answers, tools (`bind_tools`, tool
//!   choice, parallel calls), structured output, usage and response metadata (model, finish reason,
//!   system fingerprint, token counts with cached and reasoning tokens), `reasoning_content`. Streamed
//!   tool-call fragments merge by index; arguments that do not parse become `invalid_tool_calls`.
//!   Its tokens show in a graph's `messages` stream mode and as `on_chat_model_stream` events.
//! - Requests failing with 429, 408, 409, 5xx, a timeout or a broken connection are retried with
//!   exponential backoff, honouring the server's `Retry-After`. An empty or cut stream is an error.
//! - Errors are [`OpenAIError`]s with predicates (`is_rate_limited`, `retry_after`, `status`, ...);
//!   inside weft they travel as `Error::Model` and come back with [`OpenAIError::from_weft`].
//! - The API key never appears in `Debug` output, errors or logs.
//!
//! TLS uses rustls with the ring provider, installed as the process default when the program has not
//! installed one.

mod chat;
mod embeddings;
mod error;
mod request;
mod response;
mod transport;

pub use chat::{ChatOpenAI, ChatOpenAIBuilder};
pub use embeddings::{OpenAIEmbeddings, OpenAIEmbeddingsBuilder};
pub use error::{ApiError, OpenAIError};
