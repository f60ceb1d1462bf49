//! What `/wait` and `/join` answer: the run's last `values` event, or its pause (`__interrupt__`), or its
//! error (`__error__`), as LangGraph's server picks it from the events the run streamed; a thread's
//! values when the run streamed nothing that says.

use serde_json::{Value, json};

use crate::model::{Thread, ThreadStatus};

/// Follows a run's events to its `/wait` body.
#[derive(Debug, Default)]
pub(crate) struct RunResult {
    errored: bool,
    interrupted: Vec<Value>,
    latest: Latest,
    values: Option<Value>,
}

/// The body so far, when no pause wins: none yet, the last `values` event (kept once, in `values`), or
/// another event's.
#[derive(Debug, Default)]
enum Latest {
    #[default]
    Nothing,
    Values,
    Other(Value),
}

fn interrupts_in(data: &Value) -> Option<&Vec<Value>> {
    data.get("__interrupt__").and_then(Value::as_array).filter(|list| !list.is_empty())
}

impl RunResult {
    /// Takes in one published event (subgraph events, named `mode|ns`, are not the run's result). Only a
    /// pause is copied: the last values are kept as given.
    pub(crate) fn absorb(&mut self, name: &str, data: Value) {
        match name {
            "error" => {
                self.latest = Latest::Other(json!({"__error__": data}));
                self.errored = true;
            }
            "values" | "updates" => {
                let paused = interrupts_in(&data).is_some();
                if paused {
                    self.interrupted.push(data.clone());
                }
                if name == "values" {
                    self.values = Some(data);
                    self.latest = Latest::Values;
                } else if paused {
                    self.latest = Latest::Other(data);
                }
            }
            _ => {}
        }
    }

    /// The last `values` event of the run itself.
    pub(crate) fn values(&self) -> Option<&Value> {
        self.values.as_ref()
    }

    /// The body; `fallback` when the events said nothing.
    pub(crate) fn body(self, fallback: impl FnOnce() -> Value) -> Value {
        if !self.errored && !self.interrupted.is_empty() {
            if self.interrupted.len() == 1 {
                return self.interrupted.into_iter().next().unwrap_or(Value::Null);
            }
            let all: Vec<Value> =
                self.interrupted.iter().filter_map(interrupts_in).flatten().cloned().collect();
            return json!({"__interrupt__": all});
        }
        match self.latest {
            Latest::Other(latest) => latest,
            Latest::Values => self.values.unwrap_or_else(fallback),
            Latest::Nothing => fallback(),
        }
    }
}

/// The body from a thread alone: its error, its interrupts, or its values (`{}` when it has none).
pub(crate) fn from_thread(thread: Option<&Thread>) -> Value {
    let Some(thread) = thread else { return json!({}) };
    match thread.status {
        ThreadStatus::Error => return json!({"__error__": thread.error.clone().unwrap_or(Value::Null)}),
        ThreadStatus::Interrupted => {
            let all: Vec<Value> =
                thread.interrupts.values().filter_map(Value::as_array).flatten().cloned().collect();
            if !all.is_empty() {
                return json!({"__interrupt__": all});
            }
        }
        _ => {}
    }
    match &thread.values {
        Some(values) if values.as_object().is_some_and(|m| !m.is_empty()) => values.clone(),
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_values_win_and_a_pause_is_kept() {
        let mut r = RunResult::default();
        r.absorb("values", json!({"n": 1}));
        r.absorb("values|sub:1", json!({"n": 9}));
        r.absorb("values", json!({"n": 2, "__interrupt__": [{"id": "a"}]}));
        r.absorb("values", json!({"n": 3}));
        assert_eq!(r.body(|| json!({})), json!({"n": 2, "__interrupt__": [{"id": "a"}]}));
    }

    #[test]
    fn an_error_wins_and_silence_falls_back() {
        let mut r = RunResult::default();
        r.absorb("values", json!({"n": 1}));
        r.absorb("error", json!({"error": "E", "message": "m"}));
        assert_eq!(r.body(|| json!({})), json!({"__error__": {"error": "E", "message": "m"}}));
        assert_eq!(RunResult::default().body(|| json!({"fallback": true})), json!({"fallback": true}));
    }
}
