//! Chat histories kept in memory, per process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::error::Result;
use crate::history::ChatMessageHistory;
use crate::messages::Message;

/// A chat history in memory.
#[derive(Debug, Default)]
pub struct InMemoryChatMessageHistory {
    messages: Mutex<Vec<Message>>,
}

impl InMemoryChatMessageHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// A history that starts with `messages`.
    pub fn with_messages(messages: Vec<Message>) -> Self {
        Self { messages: Mutex::new(messages) }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Message>> {
        // A panic while holding the lock cannot leave the list half-written (pushes and clears are
        // atomic from the reader's view), so a poisoned lock is still sound to use.
        self.messages.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl ChatMessageHistory for InMemoryChatMessageHistory {
    async fn messages(&self) -> Result<Vec<Message>> {
        Ok(self.lock().clone())
    }

    async fn add_messages(&self, messages: Vec<Message>) -> Result<()> {
        self.lock().extend(messages);
        Ok(())
    }

    async fn clear(&self) -> Result<()> {
        self.lock().clear();
        Ok(())
    }
}

/// In-memory histories by session id, created on first use: the usual `get_session_history` of
/// [`RunnableWithMessageHistory`](crate::RunnableWithMessageHistory) in examples and tests.
///
/// Cloning shares the sessions.
#[derive(Debug, Clone, Default)]
pub struct InMemoryHistoryStore {
    sessions: Arc<Mutex<HashMap<String, Arc<InMemoryChatMessageHistory>>>>,
}

impl InMemoryHistoryStore {
    /// A store with no sessions.
    pub fn new() -> Self {
        Self::default()
    }

    /// The history of `session_id`, created empty if it does not exist yet.
    pub fn get(&self, session_id: &str) -> Arc<InMemoryChatMessageHistory> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(sessions.entry(session_id.to_owned()).or_default())
    }

    /// The ids of the sessions seen so far, sorted.
    pub fn session_ids(&self) -> Vec<String> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ids: Vec<String> = sessions.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// A `get_session_history` function backed by this store.
    pub fn factory(&self) -> impl Fn(&str) -> Arc<dyn ChatMessageHistory> + Send + Sync + 'static {
        let store = self.clone();
        move |session_id| store.get(session_id)
    }
}
