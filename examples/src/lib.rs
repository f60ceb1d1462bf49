//! What weft's examples share: the chat model they run on, how strictly they check it, and embeddings
//! that need no model.
//!
//! Every example takes its models from [`Models::from_env`], the one place that chooses them. On the
//! script (today's only choice) each role of an example answers with replies written next to it, and
//! the example checks its outcome exactly ([`Models::expect_eq`]); on a live model the same example
//! checks only what any model must satisfy (the run ended, the answer is not empty, a route is one of
//! the allowed ones).

mod embeddings;
mod models;
mod trace;

pub use embeddings::WordEmbeddings;
pub use models::{ExampleModel, Models, structured};
pub use trace::{Traces, otel_from_env, report};
