//! `JsonUpdate`: the writes of one node to a `JsonState`, in order.

use serde_json::{Map, Value};
use weft_runnable_core::{Error, Result};

use super::JsonState;
use crate::error::InvalidNodeReturn;
use crate::node::{IntoNodeOutput, NodeOutput};
use crate::state::derive_support::wrap_overwrite;

/// An ordered list of `(channel name, value)` writes to a [`JsonState`]. One channel may be written
/// several times (a reducer folds each write; a last-value channel rejects the second). A value
/// `{"__overwrite__": v}` replaces a reducer channel's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonUpdate {
    writes: Vec<(String, Value)>,
}

impl JsonUpdate {
    /// An update that writes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a write of `value` to `channel`.
    #[must_use]
    pub fn write(mut self, channel: impl Into<String>, value: Value) -> Self {
        self.writes.push((channel.into(), value));
        self
    }

    /// Adds a write that replaces the value of the reducer channel `channel` (an `Overwrite`).
    #[must_use]
    pub fn overwrite(self, channel: impl Into<String>, value: Value) -> Self {
        self.write(channel, wrap_overwrite(value))
    }

    /// Adds a write in place.
    pub fn push(&mut self, channel: impl Into<String>, value: Value) {
        self.writes.push((channel.into(), value));
    }

    /// The writes, in order.
    pub fn writes(&self) -> &[(String, Value)] {
        &self.writes
    }

    /// The writes, mutably (the write-time hook rewrites message values in place).
    pub(crate) fn writes_mut(&mut self) -> &mut [(String, Value)] {
        &mut self.writes
    }

    /// The writes, owned.
    pub fn into_writes(self) -> Vec<(String, Value)> {
        self.writes
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The number of writes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// The writes of a JSON object, in key order; anything else is an error (LangGraph's "expected dict").
    pub fn from_json(value: Value) -> Result<Self> {
        match value {
            Value::Object(map) => Ok(Self::from(map)),
            other => Err(Error::InvalidInput(format!("expected an object of channel writes, got {other}"))),
        }
    }
}

impl From<Map<String, Value>> for JsonUpdate {
    fn from(map: Map<String, Value>) -> Self {
        Self { writes: map.into_iter().collect() }
    }
}

impl From<Vec<(String, Value)>> for JsonUpdate {
    fn from(writes: Vec<(String, Value)>) -> Self {
        Self { writes }
    }
}

impl FromIterator<(String, Value)> for JsonUpdate {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Self { writes: iter.into_iter().collect() }
    }
}

impl IntoNodeOutput<JsonState> for JsonUpdate {
    fn into_node_output(self) -> Result<NodeOutput<JsonState>> {
        Ok(NodeOutput::Update(self))
    }
}

impl IntoNodeOutput<JsonState> for Map<String, Value> {
    fn into_node_output(self) -> Result<NodeOutput<JsonState>> {
        Ok(NodeOutput::Update(JsonUpdate::from(self)))
    }
}

/// An object is an update, `null` writes nothing, anything else is an [`InvalidNodeReturn`] (which the
/// engine raises as [`GraphError::InvalidNodeReturn`](crate::GraphError::InvalidNodeReturn), LangGraph's
/// `InvalidUpdateError`).
impl IntoNodeOutput<JsonState> for Value {
    fn into_node_output(self) -> Result<NodeOutput<JsonState>> {
        match self {
            Value::Null => Ok(NodeOutput::Empty),
            Value::Object(map) => Ok(NodeOutput::Update(JsonUpdate::from(map))),
            // A string reads bare, as Python prints it.
            Value::String(text) => Err(Error::custom(InvalidNodeReturn(text))),
            other => Err(Error::custom(InvalidNodeReturn(other.to_string()))),
        }
    }
}
