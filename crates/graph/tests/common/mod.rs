//! A hand-written `State` for engine tests (independent of the derive macro).
#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_graph::node::{IntoNodeOutput, NodeOutput};
use weft_graph::{ChannelKind, ChannelSet, ChannelSpec, GraphInput, IntoGraphInput, State, UpdateError};

/// `count`: last value; `log`: append reducer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    pub count: i64,
    pub log: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterUpdate {
    pub count: Option<i64>,
    pub log: Option<Vec<String>>,
}

impl CounterUpdate {
    pub fn count(n: i64) -> Self {
        Self { count: Some(n), log: None }
    }
    pub fn log(s: &str) -> Self {
        Self { count: None, log: Some(vec![s.to_owned()]) }
    }
}

const CHANNELS: &[ChannelSpec] =
    &[ChannelSpec::new("count", ChannelKind::LastValue), ChannelSpec::new("log", ChannelKind::Reducer)];

impl State for Counter {
    type Update = CounterUpdate;

    fn channels(&self) -> Cow<'_, [ChannelSpec]> {
        Cow::Borrowed(CHANNELS)
    }

    fn written(&self, u: &CounterUpdate, out: &mut ChannelSet) {
        if u.count.is_some() {
            out.insert(0);
        }
        if u.log.is_some() {
            out.insert(1);
        }
    }

    fn apply(&mut self, updates: Vec<CounterUpdate>) -> Result<ChannelSet, UpdateError> {
        let mut changed = ChannelSet::new();
        let mut counts = Vec::new();
        for u in updates {
            if let Some(c) = u.count {
                counts.push(c);
            }
            if let Some(l) = u.log {
                self.log.extend(l);
                changed.insert(1);
            }
        }
        if counts.len() > 1 {
            return Err(UpdateError::ConcurrentUpdate { key: "count".into(), writers: vec![] });
        }
        if let Some(c) = counts.pop() {
            self.count = c;
            changed.insert(0);
        }
        Ok(changed)
    }

    fn channel_to_json(&self, index: usize) -> Result<Option<Value>, UpdateError> {
        Ok(Some(match index {
            0 => Value::from(self.count),
            _ => serde_json::to_value(&self.log)
                .map_err(|e| UpdateError::Serialization { key: "log".into(), message: e.to_string() })?,
        }))
    }

    fn channel_from_json(&mut self, index: usize, value: Value) -> Result<(), UpdateError> {
        let ser = |e: serde_json::Error| UpdateError::Serialization {
            key: CHANNELS[index].name.to_string(),
            message: e.to_string(),
        };
        match index {
            0 => self.count = serde_json::from_value(value).map_err(ser)?,
            _ => self.log = serde_json::from_value(value).map_err(ser)?,
        }
        Ok(())
    }

    fn update_to_json(&self, u: &CounterUpdate) -> Result<Vec<(usize, Value)>, UpdateError> {
        let mut out = Vec::new();
        if let Some(c) = u.count {
            out.push((0, Value::from(c)));
        }
        if let Some(l) = &u.log {
            out.push((1, serde_json::to_value(l).unwrap_or_default()));
        }
        Ok(out)
    }

    fn update_from_json(&self, writes: Vec<(usize, Value)>) -> Result<CounterUpdate, UpdateError> {
        let mut u = CounterUpdate::default();
        for (i, v) in writes {
            let ser = |e: serde_json::Error| UpdateError::Serialization {
                key: CHANNELS[i].name.to_string(),
                message: e.to_string(),
            };
            match i {
                0 => u.count = Some(serde_json::from_value(v).map_err(ser)?),
                _ => u.log = Some(serde_json::from_value(v).map_err(ser)?),
            }
        }
        Ok(u)
    }
}

impl IntoNodeOutput<Counter> for CounterUpdate {
    fn into_node_output(self) -> weft_runnable_core::Result<NodeOutput<Counter>> {
        Ok(NodeOutput::Update(self))
    }
}

impl IntoGraphInput<Counter> for CounterUpdate {
    fn into_graph_input(self) -> GraphInput<Counter> {
        GraphInput::Update(vec![self])
    }
}
