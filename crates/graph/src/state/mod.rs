//! State: the channels a graph's nodes read and write, and how writes are folded into them.
//!
//! A state type implements [`State`]: it names its channels (one per field), says which channels a partial
//! update writes, and folds the updates of one superstep into itself, channel by channel, with each
//! channel's semantics (overwrite, reducer, ephemeral, topic, untracked). `#[derive(State)]` writes all of
//! that for a struct.

mod append_log;
mod channel_set;
#[doc(hidden)]
pub mod derive_support;
mod reduce;

pub use append_log::AppendLog;
pub use channel_set::ChannelSet;
pub use reduce::{OVERWRITE_KEY, Overwrite, ReducerOutput, append};

use std::borrow::Cow;

use serde_json::Value;

/// How a channel treats the writes of one superstep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChannelKind {
    /// The last value wins; two writes in one step are an error naming the key (LangGraph's `LastValue`).
    LastValue,
    /// Writes are folded into the value by a reducer, in deterministic task order
    /// (LangGraph's `BinaryOperatorAggregate`).
    Reducer,
    /// The value lives for one step: cleared at the end of a step in which it was not written.
    Ephemeral,
    /// A list of everything written; with `accumulate: false` it is cleared at the end of a step in which it
    /// was not written.
    Topic {
        /// Whether values accumulate across steps.
        accumulate: bool,
    },
    /// Like `LastValue` but never checkpointed.
    Untracked,
}

impl ChannelKind {
    /// Whether the channel's value is saved in checkpoints.
    pub fn is_tracked(self) -> bool {
        !matches!(self, ChannelKind::Untracked)
    }
}

/// A channel of a state: its name and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    /// The channel's name (the field name).
    pub name: Cow<'static, str>,
    /// How it folds writes.
    pub kind: ChannelKind,
}

impl ChannelSpec {
    /// A channel spec.
    pub const fn new(name: &'static str, kind: ChannelKind) -> Self {
        Self { name: Cow::Borrowed(name), kind }
    }
}

/// A write that broke a channel's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    /// A `LastValue` channel received several values in one step.
    #[error(
        "at key '{key}': can receive only one value per step; use a reducer to handle multiple values{}",
        writers_suffix(.writers)
    )]
    ConcurrentUpdate {
        /// The channel.
        key: String,
        /// The nodes that wrote it, when known.
        writers: Vec<String>,
    },
    /// Two `Overwrite` values for one channel in one step.
    #[error("at key '{key}': can receive only one overwrite value per super-step")]
    ConcurrentOverwrite {
        /// The channel.
        key: String,
    },
    /// A reducer rejected a write (for example a remove marker with an unknown id).
    #[error("at key '{key}': {message}")]
    Reducer {
        /// The channel.
        key: String,
        /// What the reducer said.
        message: String,
    },
    /// A value could not be converted to or from its JSON form.
    #[error("at key '{key}': {message}")]
    Serialization {
        /// The channel.
        key: String,
        /// What went wrong, with the path inside the value when known.
        message: String,
    },
    /// A write named a channel the state does not have.
    #[error("unknown channel '{key}'")]
    UnknownChannel {
        /// The channel name.
        key: String,
    },
}

fn writers_suffix(writers: &[String]) -> String {
    if writers.is_empty() { String::new() } else { format!(" (written by {})", writers.join(", ")) }
}

/// The state of a graph: typed channels with per-channel write semantics.
///
/// Implemented by `#[derive(State)]` for structs (one channel per field) and by
/// [`JsonState`](crate::JsonState) for states whose channels are declared at run time. Nodes receive a
/// clone of the state, so big fields should be cheap to clone (weft's [`Messages`](crate::Messages) is a
/// shared, copy-on-write list).
pub trait State: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The partial update nodes return: one optional value per channel.
    type Update: Clone + std::fmt::Debug + Send + Sync + Default + 'static;

    /// The channels, in declaration order. Channel indexes used below refer to this slice.
    fn channels(&self) -> Cow<'_, [ChannelSpec]>;

    /// Adds to `out` the channels that `update` writes.
    fn written(&self, update: &Self::Update, out: &mut ChannelSet);

    /// Prepares an update when a node (or the caller) produces it, before it is saved as a pending write,
    /// streamed or applied. `add_messages` channels give their id-less messages fresh ids here, so a write
    /// replayed from a checkpoint keeps the ids it was first given (LangGraph 1.x assigns ids at write time).
    /// The default does nothing; [`apply`](State::apply) still assigns ids to any message that lacks one.
    fn prepare_update(&self, update: &mut Self::Update) {
        let _ = update;
    }

    /// Folds the updates of one step into the state, in the order given, with each channel's semantics.
    /// Returns the channels whose value changed (a write counts as a change).
    ///
    /// Breaches of the one-value-per-step and one-overwrite-per-step rules are found before anything is
    /// applied; a reducer that fails part-way may leave earlier writes of the step applied, so a caller
    /// that gets an error discards the state (the step is not committed).
    fn apply(&mut self, updates: Vec<Self::Update>) -> Result<ChannelSet, UpdateError>;

    /// [`apply`](State::apply), also recording in `log` the list channels that it only appended to and
    /// how many items it appended (see [`AppendLog`]). The engine uses this to checkpoint such a channel
    /// as its new items instead of its whole value (with
    /// [`channel_tail_to_json`](State::channel_tail_to_json)).
    ///
    /// The default records nothing, so every changed channel is saved whole. `#[derive(State)]` records
    /// `append` and `add_messages` channels.
    fn apply_logged(
        &mut self,
        updates: Vec<Self::Update>,
        log: &mut AppendLog,
    ) -> Result<ChannelSet, UpdateError> {
        let _ = log;
        self.apply(updates)
    }

    /// Ends a step: clears ephemeral channels and non-accumulating topics that `written` does not contain.
    /// Returns the channels that changed.
    fn end_step(&mut self, written: &ChannelSet) -> ChannelSet {
        let _ = written;
        ChannelSet::new()
    }

    /// The JSON value of a channel, for checkpoints and streams; `None` when the channel is empty.
    fn channel_to_json(&self, index: usize) -> Result<Option<Value>, UpdateError>;

    /// The last `count` items of list channel `index` as a JSON array (each item as it appears in
    /// [`channel_to_json`](State::channel_to_json)'s list), or `None` when the channel is not a list
    /// channel or has fewer items. The default is `None`.
    fn channel_tail_to_json(&self, index: usize, count: usize) -> Result<Option<Value>, UpdateError> {
        let _ = (index, count);
        Ok(None)
    }

    /// Sets a channel from its JSON value (restoring a checkpoint); `Null` empties it.
    fn channel_from_json(&mut self, index: usize, value: Value) -> Result<(), UpdateError>;

    /// The writes of an update as `(channel index, JSON value)` pairs, for pending writes and streams.
    fn update_to_json(&self, update: &Self::Update) -> Result<Vec<(usize, Value)>, UpdateError>;

    /// Builds an update from JSON writes (replaying saved pending writes, `update_state`, JSON input).
    ///
    /// A derived state's update holds one value per channel: a channel written twice in `writes` is an
    /// error, so replaying several writes to one channel takes one update per write.
    fn update_from_json(&self, writes: Vec<(usize, Value)>) -> Result<Self::Update, UpdateError>;

    /// The state as stream chunks and snapshots show it: an object of its non-empty channels (channels that
    /// cannot be written as JSON left out). A [`RootState`](crate::root::RootState) shows its bare value.
    fn to_json_value(&self) -> Value {
        let mut map = serde_json::Map::new();
        for (i, spec) in self.channels().iter().enumerate() {
            if let Ok(Some(v)) = self.channel_to_json(i) {
                map.insert(spec.name.to_string(), v);
            }
        }
        Value::Object(map)
    }

    /// Adds to `out` what `update` shows in an `updates` stream chunk: one object of the channels it
    /// writes. A [`RootState`](crate::root::RootState) adds each bare value it writes (a task that wrote
    /// several values then shows a list of them, as in LangGraph).
    fn update_chunks(&self, update: &Self::Update, out: &mut Vec<Value>) -> Result<(), UpdateError> {
        let channels = self.channels();
        let mut map = serde_json::Map::new();
        for (i, v) in self.update_to_json(update)? {
            if let Some(spec) = channels.get(i) {
                map.insert(spec.name.to_string(), v);
            }
        }
        out.push(Value::Object(map));
        Ok(())
    }

    /// The index of the channel named `name`.
    fn channel_index(&self, name: &str) -> Option<usize> {
        self.channels().iter().position(|c| c.name == name)
    }
}

/// The channels at `indexes` of a state as a JSON object (empty channels left out): the input of a router
/// or node whose input type names them.
pub(crate) fn channels_json<S: State>(state: &S, indexes: &[usize]) -> Value {
    let channels = state.channels();
    let mut map = serde_json::Map::with_capacity(indexes.len());
    for &i in indexes {
        if let (Some(spec), Ok(Some(v))) = (channels.get(i), state.channel_to_json(i)) {
            map.insert(spec.name.to_string(), v);
        }
    }
    Value::Object(map)
}

/// A state as a JSON object of its non-empty tracked channels (for events and snapshots); a root-value
/// state as its bare value.
pub(crate) fn state_json<S: State>(state: &S) -> Value {
    state.to_json_value()
}
