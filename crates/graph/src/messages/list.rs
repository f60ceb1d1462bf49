//! `Messages`: a shared, copy-on-write message list with an id index.

use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use weft_runnable_core::Message;

/// A message list that is cheap to clone and finds a message by id in O(1).
///
/// It holds the messages in an `Arc<Vec<Message>>` and an id → position index kept in sync with it.
/// Clones share both; the first change to a shared list copies it (copy on write), a change to a list held
/// once is made in place. Appending `k` messages or replacing them by id costs O(k) amortized, whatever
/// the length of the list; removing messages costs O(length). It reads as a slice (`Deref<Target =
/// [Message]>`) and serializes as a plain list.
///
/// Messages without an id are allowed (a list built from a `Vec`, or read from JSON); the
/// [`add_messages`](crate::messages::add_messages) reducer gives them ids the first time it writes to the
/// list, as LangGraph does with the left side.
#[derive(Clone, Default)]
pub struct Messages {
    list: Arc<Vec<Message>>,
    index: Arc<HashMap<String, usize>>,
    missing_ids: usize,
}

impl Messages {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of messages.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The message with id `id` (the last one, if several share it).
    pub fn get_by_id(&self, id: &str) -> Option<&Message> {
        self.index.get(id).and_then(|&i| self.list.get(i))
    }

    /// The position of the message with id `id` (the last one, if several share it).
    pub fn position(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Whether a message has id `id`.
    pub fn contains_id(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }

    /// The messages as a slice.
    pub fn as_slice(&self) -> &[Message] {
        &self.list
    }

    /// Appends a message as it is (a `Vec` push: no id is assigned, an existing id is not replaced; use
    /// [`add_messages`](crate::messages::add_messages) for LangGraph's merge).
    pub fn push(&mut self, message: Message) {
        let position = self.list.len();
        match message.id() {
            Some(id) => {
                Arc::make_mut(&mut self.index).insert(id.to_owned(), position);
            }
            None => self.missing_ids += 1,
        }
        Arc::make_mut(&mut self.list).push(message);
    }

    /// The messages as a `Vec` (without copying when this is the only handle on them).
    pub fn into_vec(self) -> Vec<Message> {
        Arc::unwrap_or_clone(self.list)
    }

    /// Whether two lists share their storage (a clone not changed since).
    pub fn ptr_eq(&self, other: &Messages) -> bool {
        Arc::ptr_eq(&self.list, &other.list)
    }

    /// Gives a fresh UUID v4 string id to every message of `messages` that has none.
    ///
    /// This is the write-time hook: the graph loop calls it (through `State::prepare_update`) on the
    /// messages a node writes to an `add_messages` channel, before the write is saved or applied, so that a
    /// replayed write keeps its ids. The reducer calls it too, for writes that did not pass the hook.
    pub fn assign_ids(messages: &mut [Message]) {
        for message in messages.iter_mut().filter(|m| m.id().is_none()) {
            message.set_id(new_id());
        }
    }

    /// Mutable access to the list and the index (copied first if shared).
    pub(crate) fn parts_mut(&mut self) -> (&mut Vec<Message>, &mut HashMap<String, usize>) {
        (Arc::make_mut(&mut self.list), Arc::make_mut(&mut self.index))
    }

    /// Whether some message has no id (the next merge gives it one).
    pub(crate) fn has_missing_ids(&self) -> bool {
        self.missing_ids > 0
    }

    /// Gives ids to the messages that have none (O(length), once: later calls cost nothing).
    pub(crate) fn ensure_ids(&mut self) {
        if self.missing_ids == 0 {
            return;
        }
        let (list, index) = self.parts_mut();
        for (i, message) in list.iter_mut().enumerate().filter(|(_, m)| m.id().is_none()) {
            let id = new_id();
            index.insert(id.clone(), i);
            message.set_id(id);
        }
        self.missing_ids = 0;
    }

    /// Rebuilds the index after positions changed.
    pub(crate) fn reindex(&mut self) {
        let (index, missing) = build_index(&self.list);
        self.index = Arc::new(index);
        self.missing_ids = missing;
    }
}

/// A fresh UUID v4 string, from the thread-local generator (no system call per id).
fn new_id() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().hyphenated().to_string()
}

fn build_index(list: &[Message]) -> (HashMap<String, usize>, usize) {
    let mut index = HashMap::with_capacity(list.len());
    let mut missing = 0;
    for (i, message) in list.iter().enumerate() {
        match message.id() {
            Some(id) => {
                index.insert(id.to_owned(), i);
            }
            None => missing += 1,
        }
    }
    (index, missing)
}

impl Deref for Messages {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.list
    }
}

impl AsRef<[Message]> for Messages {
    fn as_ref(&self) -> &[Message] {
        &self.list
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.list.iter()).finish()
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.list == other.list
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        *self.list == *other
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.list.as_slice() == other
    }
}

impl From<Vec<Message>> for Messages {
    fn from(list: Vec<Message>) -> Self {
        let (index, missing_ids) = build_index(&list);
        Self { list: Arc::new(list), index: Arc::new(index), missing_ids }
    }
}

impl From<Messages> for Vec<Message> {
    fn from(messages: Messages) -> Self {
        messages.into_vec()
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl Extend<Message> for Messages {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        for message in iter {
            self.push(message);
        }
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

impl IntoIterator for Messages {
    type Item = Message;
    type IntoIter = std::vec::IntoIter<Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

/// A state's messages as a chat model's input: `model.invoke(state.messages.into(), config)`. The list is
/// taken without a copy when no other state holds it.
impl From<Messages> for weft_runnable_core::PromptValue {
    fn from(messages: Messages) -> Self {
        weft_runnable_core::PromptValue::from(messages.into_vec())
    }
}

/// A borrowed state's messages as a chat model's input: `model.invoke((&state.messages).into(), config)`.
impl From<&Messages> for weft_runnable_core::PromptValue {
    fn from(messages: &Messages) -> Self {
        weft_runnable_core::PromptValue::from(messages.list.to_vec())
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.list.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Messages::from)
    }
}
