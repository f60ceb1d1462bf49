//! `MessagesState`: a state of one message list.

use crate::messages::Messages;

/// A ready-made state with one channel, `messages`, merged by [`add_messages`](crate::messages::add_messages)
/// (LangGraph's `MessagesState`). Its update type is [`MessagesStateUpdate`]:
/// `MessagesState::update().messages(vec![Message::ai("hi")])`.
///
/// For more channels, declare your own struct with a `#[state(add_messages)] messages: Messages` field.
#[derive(crate::State, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MessagesState {
    /// The conversation.
    #[state(add_messages)]
    pub messages: Messages,
}
