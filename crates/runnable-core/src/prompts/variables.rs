//! What prompt templates share: partial (pre-filled) variables and turning an input into variables.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::prompts::fstring::json_excerpt;

type PartialFn = dyn Fn() -> Value + Send + Sync;

/// A pre-filled variable: a fixed value, or a function called at every format (a date, say).
#[derive(Clone)]
enum PartialValue {
    Fixed(Value),
    Computed(Arc<PartialFn>),
}

impl fmt::Debug for PartialValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialValue::Fixed(value) => f.debug_tuple("Fixed").field(value).finish(),
            PartialValue::Computed(_) => f.write_str("Computed(..)"),
        }
    }
}

/// The partial variables of a template, by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Partials(BTreeMap<String, PartialValue>);

impl Partials {
    pub(crate) fn set(&mut self, name: String, value: Value) {
        self.0.insert(name, PartialValue::Fixed(value));
    }

    pub(crate) fn set_fn(&mut self, name: String, f: impl Fn() -> Value + Send + Sync + 'static) {
        self.0.insert(name, PartialValue::Computed(Arc::new(f)));
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }

    /// Adds every partial value that the input does not set itself (the input wins).
    fn fill(&self, values: &mut Map<String, Value>) {
        for (name, partial) in &self.0 {
            if !values.contains_key(name) {
                let value = match partial {
                    PartialValue::Fixed(value) => value.clone(),
                    PartialValue::Computed(f) => f(),
                };
                values.insert(name.clone(), value);
            }
        }
    }
}

/// Turns a template's input into its variables, with partials filled in, and checks that every
/// variable in `needed` has a value.
///
/// `expected` is the template's `input_variables()` (sorted, partials excluded). An input that is not a
/// JSON object is accepted when the template expects exactly one variable: it becomes that variable's
/// value (as in LangChain, so `prompt.invoke(json!("cats"))` works). `null` stands for no variables.
pub(crate) fn resolve(
    template: &'static str,
    input: Value,
    expected: &[String],
    needed: &[String],
    partials: &Partials,
) -> Result<Map<String, Value>> {
    let mut values = match input {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => match expected {
            [only] => Map::from_iter([(only.clone(), other)]),
            _ => {
                return Err(Error::InvalidInput(format!(
                    "expected a JSON object of variables as input to {template}, got {} (a bare value is \
                     accepted only by a template with exactly one variable; this one expects {expected:?})",
                    json_excerpt(&other)
                )));
            }
        },
    };
    let mut received: Vec<String> = values.keys().cloned().collect();
    partials.fill(&mut values);
    let missing: Vec<String> = needed.iter().filter(|name| !values.contains_key(*name)).cloned().collect();
    if missing.is_empty() {
        return Ok(values);
    }
    received.sort();
    Err(Error::MissingVariables { template, missing, expected: expected.to_vec(), received })
}
