//! Message lists in graph state: [`Messages`], the [`add_messages`] reducer, message-like coercion and the
//! ready-made [`MessagesState`].
//!
//! A field `#[state(add_messages)] messages: Messages` takes writes of `Vec<Message>`; from JSON (graph
//! input, `update_state`, replayed writes) it also takes message-likes: role/content maps, `[role, text]`
//! pairs and bare strings (human messages), one or a list.

mod add;
mod coerce;
mod list;
mod state;

pub use add::add_messages;
pub(crate) use add::add_messages_counted;
pub(crate) use coerce::reason;
pub use coerce::{MessageLike, convert_json_to_messages, convert_to_messages, message_from_role};
pub use list::Messages;
pub use state::{MessagesState, MessagesStateUpdate};
pub use weft_runnable_core::{Message, REMOVE_ALL_MESSAGES};
