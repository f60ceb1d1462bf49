//! Chat message histories and [`RunnableWithMessageHistory`], which keeps a conversation per session
//! around a runnable.

mod memory;
mod output;
mod with_history;

use async_trait::async_trait;

use crate::error::Result;
use crate::messages::Message;

pub use memory::{InMemoryChatMessageHistory, InMemoryHistoryStore};
pub use output::ToHistoryMessages;
pub use with_history::RunnableWithMessageHistory;

/// The stored messages of one conversation (LangChain's `BaseChatMessageHistory`).
#[async_trait]
pub trait ChatMessageHistory: Send + Sync {
    /// Every message, oldest first.
    async fn messages(&self) -> Result<Vec<Message>>;

    /// Appends messages, in order.
    async fn add_messages(&self, messages: Vec<Message>) -> Result<()>;

    /// Appends one message.
    async fn add_message(&self, message: Message) -> Result<()> {
        self.add_messages(vec![message]).await
    }

    /// Removes every message.
    async fn clear(&self) -> Result<()>;
}
