//! The `add_messages` reducer, with LangGraph 1.x's rules.

use std::collections::HashSet;

use weft_runnable_core::{Message, REMOVE_ALL_MESSAGES};

use super::Messages;

/// Merges `right` into `left` by id, as LangGraph's `add_messages`:
///
/// - every message without an id gets a fresh UUID v4 string (on both sides);
/// - AI message chunks become whole messages (streamed tool-call fragments and the chunk position are
///   dropped);
/// - if `right` holds a remove-all marker (`Message::remove(REMOVE_ALL_MESSAGES)`), the result is the
///   messages after the last such marker, and `left` is discarded;
/// - otherwise each message of `right`, in order: an id already in the list replaces that message in place;
///   a new id is appended; a remove marker deletes the message with its id (at the end of the batch: a
///   later message with the same id in the same batch cancels the removal); a remove marker whose id is
///   neither in the list nor added earlier in the batch is an error, and then `left` is left unchanged.
///
/// Cost: O(`right.len()`) amortized when `left` is not shared with a clone (O(`left.len()`) once if it
/// is: copy on write), plus O(`left.len()`) when something is removed.
///
/// ```
/// use weft_graph::messages::{Messages, add_messages};
/// use weft_runnable_core::Message;
///
/// let mut list = Messages::from(vec![Message::human("hi").with_id("1")]);
/// add_messages(&mut list, vec![Message::human("hello").with_id("1"), Message::ai("hey")]).unwrap();
/// assert_eq!(list.len(), 2);
/// assert_eq!(list[0].text(), "hello");
/// assert!(list[1].id().is_some());
///
/// let err = add_messages(&mut list, vec![Message::remove("9")]).unwrap_err();
/// assert_eq!(err, "attempting to delete a message with an id that doesn't exist ('9')");
/// ```
pub fn add_messages(left: &mut Messages, right: Vec<Message>) -> Result<(), String> {
    add_messages_counted(left, right).map(drop)
}

/// [`add_messages`], returning `Some(k)` when all it did was append `k` messages at the end of `left`
/// (no message of `left` replaced, removed or given an id), `None` otherwise.
pub(crate) fn add_messages_counted(
    left: &mut Messages,
    mut right: Vec<Message>,
) -> Result<Option<usize>, String> {
    for message in &mut right {
        if let Message::Ai(ai) = message {
            // A chunk becomes a message (LangChain's `message_chunk_to_message`).
            ai.tool_call_chunks.clear();
            ai.chunk_position = None;
            ai.is_chunk = false;
        }
    }
    Messages::assign_ids(&mut right);

    if let Some(last) = right.iter().rposition(is_remove_all) {
        *left = Messages::from(right.split_off(last + 1));
        return Ok(None);
    }
    check_removals(left, &right)?;

    let mut only_appended = !left.has_missing_ids();
    let before = left.len();
    left.ensure_ids();
    let mut removed: HashSet<String> = HashSet::new();
    let (list, index) = left.parts_mut();
    for message in right {
        let Some(id) = message.id() else { continue };
        match index.get(id) {
            Some(&position) => {
                only_appended = false;
                if matches!(message, Message::Remove(_)) {
                    removed.insert(id.to_owned());
                } else {
                    if !removed.is_empty() {
                        removed.remove(id);
                    }
                    if let Some(slot) = list.get_mut(position) {
                        *slot = message;
                    }
                }
            }
            None => {
                index.insert(id.to_owned(), list.len());
                list.push(message);
            }
        }
    }
    if !removed.is_empty() {
        list.retain(|m| m.id().is_none_or(|id| !removed.contains(id)));
        left.reindex();
    }
    Ok(only_appended.then(|| left.len() - before))
}

fn is_remove_all(message: &Message) -> bool {
    matches!(message, Message::Remove(r) if r.id == REMOVE_ALL_MESSAGES)
}

/// Fails, before anything changes, if a remove marker names an id that is neither in `left` nor added
/// earlier in `right`.
fn check_removals(left: &Messages, right: &[Message]) -> Result<(), String> {
    if !right.iter().any(|m| matches!(m, Message::Remove(_))) {
        return Ok(());
    }
    let mut added: HashSet<&str> = HashSet::new();
    for message in right {
        let Some(id) = message.id() else { continue };
        if left.contains_id(id) {
            continue;
        }
        if matches!(message, Message::Remove(_)) {
            if !added.contains(id) {
                return Err(format!("attempting to delete a message with an id that doesn't exist ('{id}')"));
            }
        } else {
            added.insert(id);
        }
    }
    Ok(())
}
