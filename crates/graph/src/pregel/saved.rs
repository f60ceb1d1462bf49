//! The writes saved for the tasks of the step a run resumes.

use std::collections::HashMap;

use serde_json::Value;

use crate::checkpoint::special;
use crate::types::Interrupt;

/// Writes saved for the tasks of the step being resumed.
#[derive(Default)]
pub(crate) struct SavedWrites {
    pub(crate) by_task: HashMap<String, Vec<(String, Value)>>,
}

impl SavedWrites {
    pub(crate) fn finished(&self, task: &str) -> Option<&Vec<(String, Value)>> {
        let writes = self.by_task.get(task)?;
        let failed = writes.iter().any(|(c, _)| c == special::ERROR || c == special::INTERRUPT);
        (!failed && !writes.is_empty()).then_some(writes)
    }

    pub(crate) fn resume_values(&self, task: &str) -> Vec<Value> {
        self.by_task
            .get(task)
            .and_then(|w| w.iter().rev().find(|(c, _)| c == special::RESUME))
            .and_then(|(_, v)| v.as_array().cloned())
            .unwrap_or_default()
    }

    pub(crate) fn interrupts(&self) -> Vec<Interrupt> {
        let mut out = Vec::new();
        for writes in self.by_task.values() {
            for (c, v) in writes {
                if c == special::INTERRUPT {
                    if let Ok(list) = serde_json::from_value::<Vec<Interrupt>>(v.clone()) {
                        out.extend(list);
                    }
                }
            }
        }
        out
    }
}
