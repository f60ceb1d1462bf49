//! `State` for `JsonState`: the channel rules over JSON values.

use std::borrow::Cow;

use serde_json::Value;

use super::{JsonChannel, JsonState, JsonUpdate, Slot, ops};
use crate::messages::{Messages, add_messages, convert_to_messages, reason};
use crate::state::derive_support::{concurrent_overwrite, concurrent_update, split_overwrite, unknown_index};
use crate::state::{ChannelSet, ChannelSpec, State, UpdateError};

impl JsonState {
    fn index(&self, name: &str) -> Result<usize, UpdateError> {
        self.schema
            .by_name
            .get(name)
            .copied()
            .ok_or_else(|| UpdateError::UnknownChannel { key: name.to_owned() })
    }

    fn name(&self, index: usize) -> &str {
        self.schema.specs.get(index).map_or("", |s| &s.name)
    }

    fn messages_of(&self, index: usize, value: Value) -> Result<Vec<crate::messages::Message>, UpdateError> {
        convert_to_messages(value)
            .map_err(|e| UpdateError::Serialization { key: self.name(index).to_owned(), message: reason(e) })
    }

    /// Folds one write into channel `index`. `first` says whether it is the step's first write there.
    fn fold(
        &mut self,
        index: usize,
        value: Value,
        overwrite: bool,
        first: bool,
    ) -> Result<bool, UpdateError> {
        let schema = self.schema.clone();
        let key = self.name(index).to_owned();
        let reducer_error = |message: String| UpdateError::Reducer { key: key.clone(), message };
        let (Some(channel), Some(slot)) = (schema.channels.get(index), self.values.get_mut(index)) else {
            return Err(unknown_index(index));
        };
        match (channel, slot) {
            (JsonChannel::AddMessages, Slot::Messages(_)) => {
                let mut messages = self.messages_of(index, value)?;
                let Some(Slot::Messages(list)) = self.values.get_mut(index) else {
                    return Err(unknown_index(index));
                };
                if overwrite {
                    Messages::assign_ids(&mut messages);
                    *list = Messages::from(messages);
                } else {
                    add_messages(list, messages).map_err(reducer_error)?;
                }
                Ok(true)
            }
            (JsonChannel::Topic { accumulate }, Slot::Json(current)) => {
                let mut changed = false;
                if first && !accumulate {
                    changed = current.take().is_some_and(|v| v.as_array().is_none_or(|a| !a.is_empty()));
                }
                let items = ops::items(value);
                if !items.is_empty() {
                    match current {
                        Some(Value::Array(list)) => list.extend(items),
                        _ => *current = Some(Value::Array(items)),
                    }
                    changed = true;
                }
                Ok(changed)
            }
            (JsonChannel::Reducer(_) | JsonChannel::Add | JsonChannel::Append, Slot::Json(current)) => {
                match current {
                    Some(existing) if !overwrite => match channel {
                        JsonChannel::Reducer(f) => f(existing, value),
                        JsonChannel::Add => ops::add(existing, value),
                        _ => ops::append(existing, value),
                    }
                    .map_err(reducer_error)?,
                    _ => {
                        *current = Some(match (channel, value) {
                            (JsonChannel::Append, Value::Array(items)) => Value::Array(items),
                            (JsonChannel::Append, item) if !overwrite => Value::Array(vec![item]),
                            (_, value) => value,
                        });
                    }
                }
                Ok(true)
            }
            (
                JsonChannel::LastValue | JsonChannel::Untracked | JsonChannel::Ephemeral,
                Slot::Json(current),
            ) => {
                *current = Some(value);
                Ok(true)
            }
            _ => Err(unknown_index(index)),
        }
    }
}

impl State for JsonState {
    type Update = JsonUpdate;

    fn channels(&self) -> Cow<'_, [ChannelSpec]> {
        Cow::Borrowed(&self.schema.specs)
    }

    fn written(&self, update: &JsonUpdate, out: &mut ChannelSet) {
        for (name, _) in update.writes() {
            if let Some(&index) = self.schema.by_name.get(name) {
                out.insert(index);
            }
        }
    }

    /// Gives id-less messages written to message channels their ids (the write is rewritten as a list of
    /// messages); a write that is not message-like is left for `apply` to report.
    fn prepare_update(&self, update: &mut JsonUpdate) {
        for (name, value) in update.writes_mut() {
            let Some(&index) = self.schema.by_name.get(name.as_str()) else { continue };
            if !matches!(self.schema.channels.get(index), Some(JsonChannel::AddMessages)) {
                continue;
            }
            let (overwrite, inner) = split_overwrite(std::mem::take(value));
            let prepared = convert_to_messages(inner.clone()).ok().and_then(|mut messages| {
                Messages::assign_ids(&mut messages);
                serde_json::to_value(messages).ok()
            });
            let prepared = prepared.unwrap_or(inner);
            *value =
                if overwrite { crate::state::derive_support::wrap_overwrite(prepared) } else { prepared };
        }
    }

    fn apply(&mut self, updates: Vec<JsonUpdate>) -> Result<ChannelSet, UpdateError> {
        let count = self.schema.specs.len();
        let mut writes = Vec::new();
        let mut seen = vec![0usize; count];
        let mut overwrites = vec![0usize; count];
        for update in updates {
            for (name, value) in update.into_writes() {
                // As in LangGraph, a write to a key the state does not declare is dropped.
                let Ok(index) = self.index(&name) else {
                    tracing::warn!(channel = %name, "dropping a write to a channel the state does not declare");
                    continue;
                };
                let kind = self.schema.specs.get(index).map(|s| s.kind);
                let reducer = matches!(kind, Some(crate::ChannelKind::Reducer));
                let (overwrite, value) = if reducer { split_overwrite(value) } else { (false, value) };
                if let (Some(n), Some(o)) = (seen.get_mut(index), overwrites.get_mut(index)) {
                    *n += 1;
                    *o += usize::from(overwrite);
                    let single = matches!(
                        kind,
                        Some(
                            crate::ChannelKind::LastValue
                                | crate::ChannelKind::Untracked
                                | crate::ChannelKind::Ephemeral
                        )
                    );
                    if single && *n > 1 {
                        return Err(concurrent_update(&name));
                    }
                    if *o > 1 {
                        return Err(concurrent_overwrite(&name));
                    }
                }
                writes.push((index, overwrite, value));
            }
        }
        let mut changed = ChannelSet::new();
        let mut started = ChannelSet::new();
        let mut overwritten = ChannelSet::new();
        for (index, overwrite, value) in writes {
            if overwritten.contains(index) {
                continue;
            }
            let first = !started.contains(index);
            started.insert(index);
            if self.fold(index, value, overwrite, first)? {
                changed.insert(index);
            }
            if overwrite {
                overwritten.insert(index);
            }
        }
        Ok(changed)
    }

    fn end_step(&mut self, written: &ChannelSet) -> ChannelSet {
        let mut changed = ChannelSet::new();
        for (index, (channel, slot)) in self.schema.channels.iter().zip(self.values.iter_mut()).enumerate() {
            let clears = matches!(channel, JsonChannel::Ephemeral | JsonChannel::Topic { accumulate: false });
            if clears && !written.contains(index) {
                if let Slot::Json(value @ Some(_)) = slot {
                    *value = None;
                    changed.insert(index);
                }
            }
        }
        changed
    }

    fn channel_to_json(&self, index: usize) -> Result<Option<Value>, UpdateError> {
        let (Some(channel), Some(slot)) = (self.schema.channels.get(index), self.values.get(index)) else {
            return Err(unknown_index(index));
        };
        match (channel, slot) {
            (JsonChannel::Untracked, _) => Ok(None),
            (_, Slot::Json(value)) => Ok(value.clone()),
            (_, Slot::Messages(messages)) => serde_json::to_value(messages).map(Some).map_err(|e| {
                UpdateError::Serialization { key: self.name(index).to_owned(), message: e.to_string() }
            }),
        }
    }

    fn channel_from_json(&mut self, index: usize, value: Value) -> Result<(), UpdateError> {
        let restored = match self.values.get(index) {
            None => return Err(unknown_index(index)),
            Some(Slot::Messages(_)) if value.is_null() => Slot::Messages(Messages::new()),
            Some(Slot::Messages(_)) => Slot::Messages(Messages::from(self.messages_of(index, value)?)),
            Some(Slot::Json(_)) => Slot::Json(if value.is_null() { None } else { Some(value) }),
        };
        if let Some(slot) = self.values.get_mut(index) {
            *slot = restored;
        }
        Ok(())
    }

    fn update_to_json(&self, update: &JsonUpdate) -> Result<Vec<(usize, Value)>, UpdateError> {
        // Writes to undeclared keys are dropped (see `apply`), so they are not saved either.
        Ok(update
            .writes()
            .iter()
            .filter_map(|(name, value)| {
                Some((self.schema.by_name.get(name.as_str()).copied()?, value.clone()))
            })
            .collect())
    }

    fn update_from_json(&self, writes: Vec<(usize, Value)>) -> Result<JsonUpdate, UpdateError> {
        writes
            .into_iter()
            .map(|(index, value)| match self.schema.specs.get(index) {
                Some(spec) => Ok((spec.name.to_string(), value)),
                None => Err(unknown_index(index)),
            })
            .collect()
    }

    fn channel_index(&self, name: &str) -> Option<usize> {
        self.schema.by_name.get(name).copied()
    }
}
