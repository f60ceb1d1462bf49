//! [`AgentState`]: the state of [`create_agent`](crate::create_agent): LangChain's `AgentState`
//! (`messages`, `structured_response`, `jump_to`) plus the channels middleware and the builder declare.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_graph::state::AppendLog;
use weft_graph::{ChannelSet, ChannelSpec, JsonChannel, JsonState, JsonUpdate, Messages, State, UpdateError};
use weft_runnable_core::Message;

use crate::state::HasMessages;

/// Where a middleware hook sends the agent next (LangChain's `jump_to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JumpTo {
    /// The loop's entry: the first `before_model` hook, or the model.
    Model,
    /// The tools: the pending calls of the last AI message.
    Tools,
    /// The exit: the last `after_agent` hook, or the end.
    End,
}

/// The fixed part: one derived state, so its channels keep the engine's fast paths (a shared message list
/// checkpointed as appended items).
#[derive(weft_graph::State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Core {
    #[state(add_messages)]
    messages: Messages,
    structured_response: Option<Value>,
    #[state(ephemeral)]
    jump_to: Option<JumpTo>,
}

/// How many channels [`Core`] has; the declared channels follow them.
const CORE: usize = 3;
const STRUCTURED_RESPONSE: usize = 1;

/// Who may see a declared channel (LangChain's `OmitFromInput`, `OmitFromOutput`, `PrivateStateAttr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Visibility {
    /// In the input and the output (a plain state key).
    #[default]
    Public,
    /// In the output only (`OmitFromInput`).
    OutputOnly,
    /// In the input only (`OmitFromOutput`).
    InputOnly,
    /// Neither: the middleware's own bookkeeping (`PrivateStateAttr`).
    Private,
}

impl Visibility {
    fn in_output(self) -> bool {
        matches!(self, Self::Public | Self::OutputOnly)
    }
}

/// A channel declared by a middleware or by [`AgentBuilder::state_channel`](crate::AgentBuilder::state_channel).
#[derive(Debug, Clone)]
pub struct StateChannel {
    /// The key.
    pub name: String,
    /// How it folds writes.
    pub channel: JsonChannel,
    /// Who sees it.
    pub visibility: Visibility,
}

impl StateChannel {
    /// A channel seen in the input and the output.
    pub fn new(name: impl Into<String>, channel: JsonChannel) -> Self {
        Self { name: name.into(), channel, visibility: Visibility::Public }
    }

    /// A channel only its middleware reads (LangChain's `PrivateStateAttr`): never in the output.
    pub fn private(name: impl Into<String>, channel: JsonChannel) -> Self {
        Self { name: name.into(), channel, visibility: Visibility::Private }
    }

    /// Sets who sees it.
    pub fn visibility(mut self, visibility: Visibility) -> Self {
        self.visibility = visibility;
        self
    }
}

/// The channels of one agent's state, shared by every copy of it.
#[derive(Debug)]
struct Schema {
    specs: Vec<ChannelSpec>,
    output: Vec<bool>,
}

/// The state of an agent made by [`create_agent`](crate::create_agent), as LangChain's `AgentState`: the
/// conversation (`messages`, merged by id), the `structured_response` of a response format, the ephemeral
/// `jump_to` of middleware hooks, and the channels middleware declare (`thread_model_call_count`,
/// `todos`, ...) or the builder adds, held as JSON.
///
/// A run's output, [`output_json`](Self::output_json), shows the output channels only (`jump_to` and
/// private middleware channels left out, as LangChain's output schema leaves them out of `invoke`);
/// streams and snapshots show every channel, as LangGraph's do.
#[derive(Debug, Clone)]
pub struct AgentState {
    core: Core,
    extra: Option<JsonState>,
    schema: Arc<Schema>,
}

impl Default for AgentState {
    fn default() -> Self {
        Self::with_channels(&[])
    }
}

impl PartialEq for AgentState {
    fn eq(&self, other: &Self) -> bool {
        self.core == other.core && self.to_json_value() == other.to_json_value()
    }
}

impl AgentState {
    /// A state with the fixed channels and `channels` after them (a name declared twice keeps its first
    /// position and its last kind; the fixed names cannot be redeclared).
    pub fn with_channels(channels: &[StateChannel]) -> Self {
        let mut specs = Core::default().channels().into_owned();
        let mut output = vec![true, true, false];
        let mut builder = JsonState::builder();
        let mut names: Vec<&str> = Vec::new();
        for declared in channels {
            if specs[..CORE].iter().any(|s| s.name == declared.name) {
                continue;
            }
            builder = builder.channel(declared.name.clone(), declared.channel.clone());
            match names.iter().position(|n| *n == declared.name) {
                Some(i) => output[CORE + i] = declared.visibility.in_output(),
                None => {
                    names.push(&declared.name);
                    output.push(declared.visibility.in_output());
                }
            }
        }
        let extra = (!names.is_empty()).then(|| builder.build());
        if let Some(extra) = &extra {
            specs.extend(extra.channels().iter().cloned());
        }
        Self { core: Core::default(), extra, schema: Arc::new(Schema { specs, output }) }
    }

    /// An update (the same as [`AgentUpdate::new`]).
    pub fn update() -> AgentUpdate {
        AgentUpdate::default()
    }

    /// The conversation, oldest first.
    pub fn messages(&self) -> &Messages {
        &self.core.messages
    }

    /// The structured response, once the model produced one (`Some(Value::Null)` after a turn that did
    /// not).
    pub fn structured_response(&self) -> Option<&Value> {
        self.core.structured_response.as_ref()
    }

    /// The jump a hook asked for in this step.
    pub fn jump_to(&self) -> Option<JumpTo> {
        self.core.jump_to
    }

    /// The value of a declared channel, if it has one.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.extra.as_ref()?.get(name)
    }

    /// The value of a declared channel read as `T`; `None` when the channel is empty or holds something else.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, name: &str) -> Option<T> {
        self.get(name).and_then(|v| T::deserialize(v).ok())
    }

    /// The output channels as a JSON object: what LangChain's `invoke` returns.
    pub fn output_json(&self) -> Value {
        let mut map = Map::new();
        for (i, spec) in self.schema.specs.iter().enumerate() {
            if self.schema.output.get(i).copied().unwrap_or(false) {
                if let Ok(Some(v)) = self.channel_to_json(i) {
                    map.insert(spec.name.to_string(), v);
                }
            }
        }
        Value::Object(map)
    }

    fn extra_or_err(&self) -> Result<&JsonState, UpdateError> {
        self.extra
            .as_ref()
            .ok_or_else(|| UpdateError::UnknownChannel { key: "<declared channel>".to_owned() })
    }
}

/// A partial update of an [`AgentState`]: writes to the fixed channels and to declared channels by name.
#[derive(Debug, Clone, Default)]
pub struct AgentUpdate {
    core: CoreUpdate,
    extra: JsonUpdate,
}

impl AgentUpdate {
    /// An update that writes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `messages` to the conversation (a message whose id is already there replaces it; a
    /// [`RemoveMessage`](weft_runnable_core::RemoveMessage) removes one, or all with `REMOVE_ALL_MESSAGES`).
    #[must_use]
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        match self.core.messages.as_mut() {
            Some(existing) => existing.extend(messages),
            None => self.core = std::mem::take(&mut self.core).messages(messages),
        }
        self
    }

    /// Replaces the whole conversation.
    #[must_use]
    pub fn overwrite_messages(mut self, messages: Vec<Message>) -> Self {
        self.core = std::mem::take(&mut self.core).overwrite_messages(messages);
        self
    }

    /// Writes the structured response (`Value::Null` clears it, as LangChain does after a turn without
    /// one).
    #[must_use]
    pub fn structured_response(mut self, value: Value) -> Self {
        self.core = std::mem::take(&mut self.core).structured_response(Some(value));
        self
    }

    /// Asks the agent to jump (from a `before_*`/`after_*` hook).
    #[must_use]
    pub fn jump_to(mut self, jump: JumpTo) -> Self {
        self.core = std::mem::take(&mut self.core).jump_to(jump);
        self
    }

    /// Writes `value` to the declared channel `name` (a write to an undeclared key is dropped, as in
    /// LangGraph).
    #[must_use]
    pub fn set(mut self, name: impl Into<String>, value: Value) -> Self {
        self.extra.push(name, value);
        self
    }

    /// The messages this update adds, if any.
    pub fn written_messages(&self) -> Option<&[Message]> {
        self.core.messages.as_deref()
    }

    /// The jump this update asks for, if any.
    pub fn written_jump(&self) -> Option<JumpTo> {
        self.core.jump_to
    }

    /// The structured response this update writes, if any.
    pub fn written_structured_response(&self) -> Option<&Value> {
        self.core.structured_response.as_ref().and_then(Option::as_ref)
    }

    /// The writes to declared channels, in order.
    pub fn declared_writes(&self) -> &[(String, Value)] {
        self.extra.writes()
    }

    /// Whether the update writes nothing.
    pub fn is_empty(&self) -> bool {
        let mut written = ChannelSet::new();
        Core::default().written(&self.core, &mut written);
        written.is_empty() && self.extra.is_empty()
    }

    /// The update as LangGraph's dict of writes, every channel included.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        let core = Core::default();
        let names = core.channels();
        for (i, v) in core.update_to_json(&self.core).unwrap_or_default() {
            map.insert(names[i].name.to_string(), v);
        }
        for (k, v) in self.extra.writes() {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }
}

impl weft_graph::node::IntoNodeOutput<AgentState> for AgentUpdate {
    fn into_node_output(self) -> weft_runnable_core::Result<weft_graph::NodeOutput<AgentState>> {
        Ok(weft_graph::NodeOutput::Update(self))
    }
}

impl weft_graph::compiled::IntoGraphInput<AgentState> for AgentUpdate {
    fn into_graph_input(self) -> weft_graph::GraphInput<AgentState> {
        weft_graph::GraphInput::Update(vec![self])
    }
}

fn shift(set: &ChannelSet, out: &mut ChannelSet) {
    for i in set.iter() {
        out.insert(i + CORE);
    }
}

impl State for AgentState {
    type Update = AgentUpdate;

    fn channels(&self) -> Cow<'_, [ChannelSpec]> {
        Cow::Borrowed(&self.schema.specs)
    }

    fn written(&self, update: &AgentUpdate, out: &mut ChannelSet) {
        self.core.written(&update.core, out);
        if let (Some(extra), false) = (&self.extra, update.extra.is_empty()) {
            let mut set = ChannelSet::new();
            extra.written(&update.extra, &mut set);
            shift(&set, out);
        }
    }

    fn prepare_update(&self, update: &mut AgentUpdate) {
        self.core.prepare_update(&mut update.core);
        if let Some(extra) = &self.extra {
            extra.prepare_update(&mut update.extra);
        }
    }

    fn apply(&mut self, updates: Vec<AgentUpdate>) -> Result<ChannelSet, UpdateError> {
        self.apply_logged(updates, &mut AppendLog::new())
    }

    fn apply_logged(
        &mut self,
        updates: Vec<AgentUpdate>,
        log: &mut AppendLog,
    ) -> Result<ChannelSet, UpdateError> {
        let mut core = Vec::with_capacity(updates.len());
        let mut extra = Vec::new();
        for update in updates {
            core.push(update.core);
            if !update.extra.is_empty() {
                extra.push(update.extra);
            }
        }
        let mut changed = self.core.apply_logged(core, log)?;
        if !extra.is_empty() {
            match &mut self.extra {
                Some(state) => shift(&state.apply(extra)?, &mut changed),
                None => {
                    for (name, _) in extra.iter().flat_map(JsonUpdate::writes) {
                        tracing::warn!(channel = %name, "dropping a write to a channel the agent does not declare");
                    }
                }
            }
        }
        Ok(changed)
    }

    fn end_step(&mut self, written: &ChannelSet) -> ChannelSet {
        let mut changed = self.core.end_step(written);
        if let Some(extra) = &mut self.extra {
            let inner: ChannelSet = written.iter().filter(|i| *i >= CORE).map(|i| i - CORE).collect();
            shift(&extra.end_step(&inner), &mut changed);
        }
        changed
    }

    fn channel_to_json(&self, index: usize) -> Result<Option<Value>, UpdateError> {
        if index == STRUCTURED_RESPONSE {
            // `null` (a turn without a structured response) is a value, not an empty channel.
            return Ok(self.core.structured_response.clone());
        }
        if index < CORE {
            return self.core.channel_to_json(index);
        }
        self.extra_or_err()?.channel_to_json(index - CORE)
    }

    fn channel_tail_to_json(&self, index: usize, count: usize) -> Result<Option<Value>, UpdateError> {
        if index < CORE { self.core.channel_tail_to_json(index, count) } else { Ok(None) }
    }

    fn channel_from_json(&mut self, index: usize, value: Value) -> Result<(), UpdateError> {
        if index == STRUCTURED_RESPONSE {
            // A saved `null` is a structured response cleared by a turn without one, not an empty channel.
            self.core.structured_response = Some(value);
            return Ok(());
        }
        if index < CORE {
            return self.core.channel_from_json(index, value);
        }
        match &mut self.extra {
            Some(extra) => extra.channel_from_json(index - CORE, value),
            None => Err(UpdateError::UnknownChannel { key: index.to_string() }),
        }
    }

    fn update_to_json(&self, update: &AgentUpdate) -> Result<Vec<(usize, Value)>, UpdateError> {
        let mut out = self.core.update_to_json(&update.core)?;
        if let Some(extra) = &self.extra {
            out.extend(extra.update_to_json(&update.extra)?.into_iter().map(|(i, v)| (i + CORE, v)));
        }
        Ok(out)
    }

    fn update_from_json(&self, writes: Vec<(usize, Value)>) -> Result<AgentUpdate, UpdateError> {
        let (core, extra): (Vec<_>, Vec<_>) = writes.into_iter().partition(|(i, _)| *i < CORE);
        let (nulls, core): (Vec<_>, Vec<_>) =
            core.into_iter().partition(|(i, v)| *i == STRUCTURED_RESPONSE && v.is_null());
        let mut update = AgentUpdate { core: self.core.update_from_json(core)?, ..AgentUpdate::default() };
        if !nulls.is_empty() {
            update = update.structured_response(Value::Null);
        }
        if !extra.is_empty() {
            let shifted = extra.into_iter().map(|(i, v)| (i - CORE, v)).collect();
            update.extra = self.extra_or_err()?.update_from_json(shifted)?;
        }
        Ok(update)
    }

    fn channel_index(&self, name: &str) -> Option<usize> {
        self.schema.specs.iter().position(|c| c.name == name)
    }
}

impl HasMessages for AgentState {
    fn messages(&self) -> &[Message] {
        &self.core.messages
    }

    fn messages_update(messages: Vec<Message>) -> AgentUpdate {
        AgentUpdate::new().messages(messages)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use weft_graph::JsonChannel;

    use super::*;

    fn state() -> AgentState {
        AgentState::with_channels(&[
            StateChannel::private("count", JsonChannel::LastValue),
            StateChannel::new("todos", JsonChannel::LastValue),
        ])
    }

    #[test]
    fn declared_channels_follow_the_fixed_ones() {
        let names: Vec<String> = state().channels().iter().map(|c| c.name.to_string()).collect();
        assert_eq!(names, ["messages", "structured_response", "jump_to", "count", "todos"]);
    }

    #[test]
    fn output_leaves_out_jump_to_and_private_channels() {
        let mut s = state();
        let update = AgentUpdate::new()
            .messages(vec![Message::human("hi").with_id("1")])
            .jump_to(JumpTo::End)
            .set("count", json!(1))
            .set("todos", json!([]));
        s.apply(vec![update.clone()]).unwrap();
        let out = s.output_json();
        assert_eq!(out.as_object().unwrap().keys().collect::<Vec<_>>(), ["messages", "todos"]);
        let all = s.to_json_value();
        assert_eq!(all["count"], json!(1));
        assert_eq!(all["jump_to"], json!("end"));
    }

    #[test]
    fn a_saved_null_structured_response_stays_null() {
        let mut s = state();
        s.channel_from_json(STRUCTURED_RESPONSE, Value::Null).unwrap();
        assert_eq!(s.to_json_value()["structured_response"], Value::Null);
        assert!(s.to_json_value().as_object().unwrap().contains_key("structured_response"));
    }

    #[test]
    fn jump_to_is_cleared_after_a_step_without_a_write() {
        let mut s = state();
        let written = s.apply(vec![AgentUpdate::new().jump_to(JumpTo::Tools)]).unwrap();
        assert!(s.end_step(&written).is_empty());
        assert_eq!(s.jump_to(), Some(JumpTo::Tools));
        s.end_step(&ChannelSet::new());
        assert_eq!(s.jump_to(), None);
    }

    #[test]
    fn a_null_structured_response_write_replays_as_null() {
        let mut s = state();
        let json = s.update_to_json(&AgentUpdate::new().structured_response(Value::Null)).unwrap();
        let replayed = s.update_from_json(json).unwrap();
        s.apply(vec![replayed]).unwrap();
        assert_eq!(s.structured_response(), Some(&Value::Null));
    }

    #[test]
    fn writes_round_trip_through_json() {
        let s = state();
        let update = AgentUpdate::new().structured_response(json!({"a": 1})).set("count", json!(2));
        let json = s.update_to_json(&update).unwrap();
        let back = s.update_from_json(json.clone()).unwrap();
        assert_eq!(s.update_to_json(&back).unwrap(), json);
    }

    #[test]
    fn a_write_to_an_undeclared_key_is_dropped() {
        let mut s = AgentState::default();
        let changed = s.apply(vec![AgentUpdate::new().set("nope", json!(1))]).unwrap();
        assert!(changed.is_empty());
    }
}
