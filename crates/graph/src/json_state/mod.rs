//! `JsonState`: a state whose channels are declared at run time, with JSON values (configuration-driven
//! graphs, the server).
//!
//! ```
//! use serde_json::json;
//! use weft_graph::{ChannelKind, JsonState, JsonUpdate, State};
//!
//! let mut state = JsonState::builder()
//!     .channel("count", ChannelKind::LastValue)
//!     .append("log")
//!     .add_messages("messages")
//!     .build();
//! let update = JsonUpdate::new().write("count", json!(1)).write("log", json!(["a"])).write("messages", json!("hi"));
//! state.apply(vec![update]).unwrap();
//! assert_eq!(state.get("count"), Some(&json!(1)));
//! assert_eq!(state.messages("messages").unwrap()[0].text(), "hi");
//! ```

mod apply;
mod ops;
mod update;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

pub use update::JsonUpdate;

use crate::messages::Messages;
use crate::state::{ChannelKind, ChannelSpec};

/// A reducer over JSON values: folds a write into the channel's value; an error names what is wrong.
pub type JsonReducerFn = Arc<dyn Fn(&mut Value, Value) -> Result<(), String> + Send + Sync>;

/// How a channel of a [`JsonState`] treats writes.
#[derive(Clone)]
#[non_exhaustive]
pub enum JsonChannel {
    /// One value per step (two writes in one step are an error).
    LastValue,
    /// Writes folded with a function. The first write to an empty channel becomes its value.
    Reducer(JsonReducerFn),
    /// LangGraph's `operator.add`: numbers add, strings and lists concatenate.
    Add,
    /// A list extended by each write (a list write adds its items, any other value adds itself).
    Append,
    /// A message list merged by [`add_messages`](crate::messages::add_messages); writes are message-likes.
    AddMessages,
    /// A value cleared at the end of a step in which it was not written.
    Ephemeral,
    /// A list of every item written (list writes are flattened).
    Topic {
        /// Whether items accumulate across steps.
        accumulate: bool,
    },
    /// One value per step, never checkpointed.
    Untracked,
}

impl JsonChannel {
    /// A reducer channel folding writes with `f`.
    pub fn reducer<F>(f: F) -> Self
    where
        F: Fn(&mut Value, Value) -> Result<(), String> + Send + Sync + 'static,
    {
        JsonChannel::Reducer(Arc::new(f))
    }

    /// The channel kind it reports in [`State::channels`](crate::State::channels).
    pub fn kind(&self) -> ChannelKind {
        match self {
            JsonChannel::LastValue => ChannelKind::LastValue,
            JsonChannel::Reducer(_) | JsonChannel::Add | JsonChannel::Append | JsonChannel::AddMessages => {
                ChannelKind::Reducer
            }
            JsonChannel::Ephemeral => ChannelKind::Ephemeral,
            JsonChannel::Topic { accumulate } => ChannelKind::Topic { accumulate: *accumulate },
            JsonChannel::Untracked => ChannelKind::Untracked,
        }
    }
}

/// `ChannelKind::Reducer` without a function becomes [`JsonChannel::Add`].
impl From<ChannelKind> for JsonChannel {
    fn from(kind: ChannelKind) -> Self {
        match kind {
            ChannelKind::LastValue => JsonChannel::LastValue,
            ChannelKind::Ephemeral => JsonChannel::Ephemeral,
            ChannelKind::Topic { accumulate } => JsonChannel::Topic { accumulate },
            ChannelKind::Untracked => JsonChannel::Untracked,
            _ => JsonChannel::Add,
        }
    }
}

impl fmt::Debug for JsonChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonChannel::LastValue => f.write_str("LastValue"),
            JsonChannel::Reducer(_) => f.write_str("Reducer(<fn>)"),
            JsonChannel::Add => f.write_str("Add"),
            JsonChannel::Append => f.write_str("Append"),
            JsonChannel::AddMessages => f.write_str("AddMessages"),
            JsonChannel::Ephemeral => f.write_str("Ephemeral"),
            JsonChannel::Topic { accumulate } => {
                f.debug_struct("Topic").field("accumulate", accumulate).finish()
            }
            JsonChannel::Untracked => f.write_str("Untracked"),
        }
    }
}

/// The channels of a JSON state, shared by all its clones.
#[derive(Debug)]
struct Schema {
    specs: Vec<ChannelSpec>,
    channels: Vec<JsonChannel>,
    by_name: HashMap<String, usize>,
}

/// A channel's value.
#[derive(Debug, Clone)]
enum Slot {
    Json(Option<Value>),
    Messages(Messages),
}

/// A state whose channels are declared at run time: a shared schema plus one JSON value per channel
/// (message channels hold a [`Messages`] list, so appending stays cheap). Its update is a [`JsonUpdate`],
/// an ordered list of `(channel, value)` writes.
#[derive(Debug, Clone)]
pub struct JsonState {
    schema: Arc<Schema>,
    values: Vec<Slot>,
}

impl JsonState {
    /// Starts declaring channels.
    pub fn builder() -> JsonStateBuilder {
        JsonStateBuilder::default()
    }

    /// The value of the JSON channel `name`; `None` when it is empty, unknown, or a message channel.
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self.values.get(*self.schema.by_name.get(name)?)? {
            Slot::Json(value) => value.as_ref(),
            Slot::Messages(_) => None,
        }
    }

    /// The list of the message channel `name`.
    pub fn messages(&self, name: &str) -> Option<&Messages> {
        match self.values.get(*self.schema.by_name.get(name)?)? {
            Slot::Messages(messages) => Some(messages),
            Slot::Json(_) => None,
        }
    }

    /// Every non-empty channel as one JSON object (message lists serialized).
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        for (spec, slot) in self.schema.specs.iter().zip(&self.values) {
            let value = match slot {
                Slot::Json(value) => value.clone(),
                Slot::Messages(messages) => serde_json::to_value(messages).ok(),
            };
            if let Some(value) = value {
                map.insert(spec.name.to_string(), value);
            }
        }
        Value::Object(map)
    }
}

/// Declares the channels of a [`JsonState`], in order. Declaring a name twice keeps the first position
/// and the last kind.
#[derive(Debug, Default)]
pub struct JsonStateBuilder {
    channels: Vec<(String, JsonChannel)>,
}

impl JsonStateBuilder {
    /// Adds a channel (`ChannelKind::Reducer` without a function adds numbers and concatenates lists).
    pub fn channel(mut self, name: impl Into<String>, channel: impl Into<JsonChannel>) -> Self {
        let name = name.into();
        let channel = channel.into();
        match self.channels.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = channel,
            None => self.channels.push((name, channel)),
        }
        self
    }

    /// Adds a channel whose writes are folded with `f`.
    pub fn reducer<F>(self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&mut Value, Value) -> Result<(), String> + Send + Sync + 'static,
    {
        self.channel(name, JsonChannel::reducer(f))
    }

    /// Adds a list channel extended by each write.
    pub fn append(self, name: impl Into<String>) -> Self {
        self.channel(name, JsonChannel::Append)
    }

    /// Adds a message channel merged by `add_messages`.
    pub fn add_messages(self, name: impl Into<String>) -> Self {
        self.channel(name, JsonChannel::AddMessages)
    }

    /// The state, every channel empty.
    pub fn build(self) -> JsonState {
        let mut specs = Vec::with_capacity(self.channels.len());
        let mut channels = Vec::with_capacity(self.channels.len());
        let mut by_name = HashMap::with_capacity(self.channels.len());
        let mut values = Vec::with_capacity(self.channels.len());
        for (i, (name, channel)) in self.channels.into_iter().enumerate() {
            specs.push(ChannelSpec { name: Cow::Owned(name.clone()), kind: channel.kind() });
            values.push(match channel {
                JsonChannel::AddMessages => Slot::Messages(Messages::new()),
                _ => Slot::Json(None),
            });
            channels.push(channel);
            by_name.insert(name, i);
        }
        JsonState { schema: Arc::new(Schema { specs, channels, by_name }), values }
    }
}
