//! The writes saved for the tasks of the step a run resumes, and what they say about each task.
//!
//! The rules are LangGraph's: a task is finished exactly when it saved an output write (any write that is
//! not a control write; a task that finished without output saves `__no_writes__`); its interrupts are the
//! last ones it raised, and they wait for an answer only while the task is unfinished. A `__resume__` write
//! never finishes a task: it can hold the answer to an earlier question while the task waits on a later one.
//! A failed task whose node's error handler was due saved `__error_source_node__` with its error: a control
//! write too (the task is unfinished, and a snapshot lists it in `next`, as LangGraph's does), which a
//! resumed run reads to run the handler instead of the task.
//! Writes of the null task are input to the step, not task activity.

use std::collections::HashMap;

use serde_json::Value;

use crate::checkpoint::special;
use crate::pregel::spec::{CheckpointNames, GraphSpec};
use crate::pregel::task::{Replay, Task};
use crate::snapshot::PregelTask;
use crate::state::State;
use crate::types::Interrupt;

/// Whether `channel` describes what happened to a task rather than what it produced.
pub(crate) fn is_control(channel: &str) -> bool {
    matches!(channel, special::ERROR | special::ERROR_SOURCE_NODE | special::INTERRUPT | special::RESUME)
}

/// Writes saved for the tasks of the step being resumed, by task id.
#[derive(Default)]
pub(crate) struct SavedWrites {
    pub(crate) by_task: HashMap<String, Vec<(String, Value)>>,
    /// The thread and checkpoint they were saved with (empty when none were read).
    thread_id: String,
    checkpoint_id: String,
}

impl SavedWrites {
    /// Groups the pending writes saved with checkpoint `checkpoint_id` of thread `thread_id` by task (the
    /// null task's left out).
    pub(crate) fn from_pending(
        thread_id: &str,
        checkpoint_id: &str,
        pending: impl IntoIterator<Item = (String, String, Value)>,
    ) -> Self {
        let mut by_task: HashMap<String, Vec<(String, Value)>> = HashMap::new();
        for (task, channel, value) in pending {
            if task != special::NULL_TASK_ID {
                by_task.entry(task).or_default().push((channel, value));
            }
        }
        Self { by_task, thread_id: thread_id.to_owned(), checkpoint_id: checkpoint_id.to_owned() }
    }

    /// Where these writes were saved, for replaying them.
    pub(crate) fn origin(&self) -> Replay<'_> {
        Replay::Checkpoint { thread_id: &self.thread_id, checkpoint_id: &self.checkpoint_id }
    }

    /// The saved writes of `task` if it finished (control writes included; readers skip them).
    pub(crate) fn finished(&self, task: &str) -> Option<&Vec<(String, Value)>> {
        self.by_task.get(task).filter(|writes| writes.iter().any(|(c, _)| !is_control(c)))
    }

    /// When `task` failed and its node's error handler was due (it saved `__error_source_node__`): the
    /// node's name and the error's text.
    pub(crate) fn failure_to_handle(&self, task: &str) -> Option<(String, String)> {
        let writes = self.by_task.get(task)?;
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let node =
            writes.iter().rev().find(|(c, _)| c == special::ERROR_SOURCE_NODE).map(|(_, v)| text(v))?;
        let message = writes.iter().rev().find(|(c, _)| c == special::ERROR).map(|(_, v)| text(v))?;
        Some((node, message))
    }

    /// What `task` wrote to the graph's channels (its control writes and markers left out).
    pub(crate) fn written(&self, task: &str) -> Vec<(String, Value)> {
        let writes = self.by_task.get(task).map(Vec::as_slice).unwrap_or_default();
        writes.iter().filter(|(c, _)| !is_control(c) && c != special::NO_WRITES).cloned().collect()
    }

    /// Whether no task has saved writes (then no task's id need be read to look them up).
    pub(crate) fn is_empty(&self) -> bool {
        self.by_task.is_empty()
    }

    /// The answers `task` has received so far.
    pub(crate) fn resume_values(&self, task: &str) -> Vec<Value> {
        self.by_task
            .get(task)
            .and_then(|w| w.iter().rev().find(|(c, _)| c == special::RESUME))
            .and_then(|(_, v)| v.as_array().cloned())
            .unwrap_or_default()
    }

    /// The interrupts still waiting for an answer: those of unfinished tasks, sorted by id.
    pub(crate) fn pending_interrupts(&self) -> Vec<Interrupt> {
        let mut out: Vec<Interrupt> = self
            .by_task
            .iter()
            .filter(|(task, _)| self.finished(task).is_none())
            .flat_map(|(_, writes)| last_interrupts(writes))
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        // A functional-API task's pause is its caller's too: both saved it.
        out.dedup_by(|a, b| a.id == b.id);
        out
    }
}

/// The interrupts of a task's last `__interrupt__` write.
pub(crate) fn last_interrupts(writes: &[(String, Value)]) -> Vec<Interrupt> {
    writes
        .iter()
        .rev()
        .find(|(c, _)| c == special::INTERRUPT)
        .and_then(|(_, v)| serde_json::from_value::<Vec<Interrupt>>(v.clone()).ok())
        .unwrap_or_default()
}

/// Whether a saved write to `channel` is part of a task's result as a snapshot shows it: a write to a state
/// channel (the first `n_state` of the layout), not the engine's own (`branch:to:*`, barriers,
/// `__pregel_tasks`, control writes); for an entrypoint, its return value (LangGraph's output channel,
/// named `END`: the functional API's `END_CHANNEL`).
pub(crate) fn result_channel<'a, S: State>(
    spec: &GraphSpec<S>,
    names: &'a CheckpointNames,
    n_state: usize,
) -> impl Fn(&str) -> bool + 'a {
    let functional = spec.functional;
    let state_names = &names.channels[..n_state];
    move |c: &str| {
        if functional { c == crate::types::END } else { state_names.iter().any(|n| &**n == c) }
    }
}

impl SavedWrites {
    /// How `task` stands in the checkpoint these writes were saved on, as a snapshot and a `checkpoints`
    /// event list it: its error, the interrupts it raised (with `live`, only those still waiting for an
    /// answer), its result (its writes to the channels `is_result` accepts); no subgraph state.
    pub(crate) fn recorded_task<S: State>(
        &self,
        task: &Task<S>,
        live: bool,
        is_result: impl Fn(&str) -> bool,
    ) -> PregelTask {
        let writes = self.by_task.get(&*task.id);
        let error = writes.and_then(|w| w.iter().find(|(c, _)| c == special::ERROR)).map(|(_, v)| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let output = self.finished(&task.id);
        let interrupts = match output {
            Some(_) if live => Vec::new(),
            _ => last_interrupts(writes.map(Vec::as_slice).unwrap_or_default()),
        };
        let result = output.map(|w| w.iter().filter(|(c, _)| is_result(c)).cloned().collect::<Vec<_>>());
        PregelTask {
            id: task.id.to_string(),
            name: task.name.to_string(),
            path: task.path.to_string(),
            error,
            interrupts,
            result,
            state: None,
        }
    }
}
