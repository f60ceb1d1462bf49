//! Fakes for tests (yours too): a scripted chat model, a scripted completion model and deterministic
//! embeddings. They need no network and behave the same on every run.

pub mod chat;
pub mod embeddings;
pub mod llm;
mod script;

pub use chat::{FakeCall, FakeChatModel, GenericFakeChatModel};
pub use embeddings::FakeEmbeddings;
pub use llm::FakeListLlm;
pub use script::{FakeReply, Pieces, TokenSplit};
