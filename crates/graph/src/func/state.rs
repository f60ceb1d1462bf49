//! The state of an entrypoint's graph: its input, its return value and the value it saved for the next run.

use std::borrow::Cow;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::state::derive_support::{channel_json, from_json};
use crate::state::{ChannelKind, ChannelSet, ChannelSpec, State, UpdateError};

/// What an entrypoint's input, return value and saved value must be: plain data that checkpoints hold
/// as JSON. Implemented for every type that fits.
pub trait FuncValue: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static {}

impl<T: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static> FuncValue for T {}

/// The input channel: the run's input is written to it (and saved as the checkpoint's `__start__`); the
/// entrypoint reads it from there, in the step after the input, as LangGraph's functional graphs do.
pub const INPUT_CHANNEL: &str = "__entrypoint_input__";
/// The entrypoint's return value (LangGraph's `__end__` channel of a functional graph).
pub const END_CHANNEL: &str = crate::types::END;
/// The value an entrypoint saved for its thread's next run (LangGraph's `__previous__`).
pub const PREVIOUS_CHANNEL: &str = "__previous__";

static CHANNELS: [ChannelSpec; 3] = [
    ChannelSpec::new(INPUT_CHANNEL, ChannelKind::Ephemeral),
    ChannelSpec::new(END_CHANNEL, ChannelKind::LastValue),
    ChannelSpec::new(PREVIOUS_CHANNEL, ChannelKind::LastValue),
];

/// The state of an entrypoint's graph: `I` the input, `O` the return value, `P` the value saved for the
/// next run of the thread (`previous`; the return value unless the entrypoint returns a
/// [`Final`](crate::func::Final)).
///
/// A run's result, `values` chunks and `get_state` hold this state; [`value`](FuncState::value) is what
/// LangGraph shows there (the last return value, `None` before the first run of the thread ended).
#[derive(Debug, Clone)]
pub struct FuncState<I, O, P = O> {
    input: Option<I>,
    end: Option<O>,
    previous: Option<P>,
}

impl<I, O, P> Default for FuncState<I, O, P> {
    fn default() -> Self {
        Self { input: None, end: None, previous: None }
    }
}

impl<I, O, P> FuncState<I, O, P> {
    /// The entrypoint's last return value on the thread (`None` until a run of it returned).
    pub fn value(&self) -> Option<&O> {
        self.end.as_ref()
    }

    /// Takes the last return value.
    pub fn into_value(self) -> Option<O> {
        self.end
    }

    /// The value saved for the next run (what the entrypoint receives as `previous`).
    pub fn previous(&self) -> Option<&P> {
        self.previous.as_ref()
    }
}

/// A write to a [`FuncState`]: the run's input, or what the entrypoint returned and saved.
#[derive(Debug, Clone)]
pub struct FuncUpdate<I, O, P = O> {
    input: Option<I>,
    end: Option<O>,
    previous: Option<P>,
}

impl<I, O, P> Default for FuncUpdate<I, O, P> {
    fn default() -> Self {
        Self { input: None, end: None, previous: None }
    }
}

impl<I, O, P> FuncUpdate<I, O, P> {
    /// The input of a run.
    pub fn input(input: I) -> Self {
        Self { input: Some(input), end: None, previous: None }
    }

    /// What an entrypoint returned (`value`) and saved for the next run (`save`).
    pub fn returned(value: O, save: P) -> Self {
        Self { input: None, end: Some(value), previous: Some(save) }
    }

    /// The returned value this update writes, if any.
    pub fn value(&self) -> Option<&O> {
        self.end.as_ref()
    }
}

impl<I: FuncValue, O: FuncValue, P: FuncValue> State for FuncState<I, O, P> {
    type Update = FuncUpdate<I, O, P>;

    fn channels(&self) -> Cow<'_, [ChannelSpec]> {
        Cow::Borrowed(&CHANNELS)
    }

    fn written(&self, update: &Self::Update, out: &mut ChannelSet) {
        if update.input.is_some() {
            out.insert(0);
        }
        if update.end.is_some() {
            out.insert(1);
        }
        if update.previous.is_some() {
            out.insert(2);
        }
    }

    fn apply(&mut self, updates: Vec<Self::Update>) -> Result<ChannelSet, UpdateError> {
        let mut counts = [0usize; 3];
        for u in &updates {
            counts[0] += usize::from(u.input.is_some());
            counts[1] += usize::from(u.end.is_some());
            counts[2] += usize::from(u.previous.is_some());
        }
        if let Some(i) = counts.iter().position(|&n| n > 1) {
            return Err(UpdateError::ConcurrentUpdate {
                key: CHANNELS[i].name.to_string(),
                writers: Vec::new(),
            });
        }
        let mut changed = ChannelSet::new();
        for u in updates {
            if let Some(v) = u.input {
                self.input = Some(v);
                changed.insert(0);
            }
            if let Some(v) = u.end {
                self.end = Some(v);
                changed.insert(1);
            }
            if let Some(v) = u.previous {
                self.previous = Some(v);
                changed.insert(2);
            }
        }
        Ok(changed)
    }

    fn end_step(&mut self, written: &ChannelSet) -> ChannelSet {
        let mut changed = ChannelSet::new();
        if !written.contains(0) && self.input.take().is_some() {
            changed.insert(0);
        }
        changed
    }

    fn channel_to_json(&self, index: usize) -> Result<Option<Value>, UpdateError> {
        match index {
            0 => self.input.as_ref().map_or(Ok(None), |v| channel_json(INPUT_CHANNEL, v)),
            1 => self.end.as_ref().map_or(Ok(None), |v| channel_json(END_CHANNEL, v)),
            2 => self.previous.as_ref().map_or(Ok(None), |v| channel_json(PREVIOUS_CHANNEL, v)),
            _ => Ok(None),
        }
    }

    fn channel_from_json(&mut self, index: usize, value: Value) -> Result<(), UpdateError> {
        let null = value.is_null();
        match index {
            0 => self.input = if null { None } else { Some(from_json(INPUT_CHANNEL, value)?) },
            1 => self.end = if null { None } else { Some(from_json(END_CHANNEL, value)?) },
            2 => self.previous = if null { None } else { Some(from_json(PREVIOUS_CHANNEL, value)?) },
            _ => return Err(UpdateError::UnknownChannel { key: format!("#{index}") }),
        }
        Ok(())
    }

    fn update_to_json(&self, update: &Self::Update) -> Result<Vec<(usize, Value)>, UpdateError> {
        let mut out = Vec::new();
        if let Some(v) = &update.input {
            out.push((0, crate::state::derive_support::to_json(INPUT_CHANNEL, v)?));
        }
        if let Some(v) = &update.end {
            out.push((1, crate::state::derive_support::to_json(END_CHANNEL, v)?));
        }
        if let Some(v) = &update.previous {
            out.push((2, crate::state::derive_support::to_json(PREVIOUS_CHANNEL, v)?));
        }
        Ok(out)
    }

    fn update_from_json(&self, writes: Vec<(usize, Value)>) -> Result<Self::Update, UpdateError> {
        let mut update = FuncUpdate::default();
        for (index, value) in writes {
            let key = CHANNELS.get(index).map_or("", |c| &c.name);
            let twice = || UpdateError::ConcurrentUpdate { key: key.to_owned(), writers: Vec::new() };
            match index {
                0 if update.input.is_none() => update.input = Some(from_json(INPUT_CHANNEL, value)?),
                1 if update.end.is_none() => update.end = Some(from_json(END_CHANNEL, value)?),
                2 if update.previous.is_none() => update.previous = Some(from_json(PREVIOUS_CHANNEL, value)?),
                0..=2 => return Err(twice()),
                _ => return Err(UpdateError::UnknownChannel { key: format!("#{index}") }),
            }
        }
        Ok(update)
    }
}
