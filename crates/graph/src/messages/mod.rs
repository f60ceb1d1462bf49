//! Message lists in graph state: [`Messages`], the [`add_messages`] reducer, message-like coercion and the
//! ready-made [`MessagesState`].
//!
//! A field `#[state(add_messages)] messages: Messages` takes writes of `Vec<Message>`; from JSON (graph
//! input, `update_state`, replayed writes) it also takes message-likes: role/content maps, `[role, text]`
//! pairs and bare strings (human messages), one or a list.

mod add;
mod list;
mod state;

pub use add::add_messages;
pub(crate) use add::add_messages_counted;
pub use list::Messages;
pub use state::{MessagesState, MessagesStateUpdate};
pub use weft_runnable_core::{Message, MessageLike, REMOVE_ALL_MESSAGES, convert_to_messages, messages_from};

/// The text of a coercion error, without the error kind's prefix.
pub(crate) fn reason(err: weft_runnable_core::Error) -> String {
    match err {
        weft_runnable_core::Error::InvalidInput(message) => message,
        other => other.to_string(),
    }
}
