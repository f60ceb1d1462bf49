//! Reducers: how a reducer channel folds a write into its value, and the `Overwrite` escape hatch.

use std::fmt;

/// The JSON key that marks a write as an [`Overwrite`]: `{"__overwrite__": value}` (LangGraph's form).
pub const OVERWRITE_KEY: &str = "__overwrite__";

/// A value that replaces a reducer channel's value instead of being folded into it.
///
/// In a typed update it is set with the generated `overwrite_<field>` method; in JSON it is written as
/// `{"__overwrite__": value}`. Writes to the channel before the overwrite in the same step are replaced by
/// it, later writes in that step are ignored, and two overwrites of one channel in one step are an error
/// ([`UpdateError::ConcurrentOverwrite`](crate::UpdateError::ConcurrentOverwrite)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Overwrite<T>(pub T);

impl<T> Overwrite<T> {
    /// The value inside.
    pub fn into_inner(self) -> T {
        self.0
    }
}

/// What a reducer function may return: `()` when it cannot fail, or `Result<(), E>` with an error that
/// displays (its text becomes [`UpdateError::Reducer`](crate::UpdateError::Reducer), naming the key).
///
/// A reducer for `#[state(reducer = path)]` is any `fn(&mut T, T) -> R` with `R: ReducerOutput`.
pub trait ReducerOutput {
    /// The outcome as a result with a message.
    fn into_reducer_result(self) -> Result<(), String>;
}

impl ReducerOutput for () {
    fn into_reducer_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: fmt::Display> ReducerOutput for Result<(), E> {
    fn into_reducer_result(self) -> Result<(), String> {
        self.map_err(|e| e.to_string())
    }
}

/// The `append` reducer: extends the list with the written items (LangGraph's `operator.add` on lists).
///
/// ```
/// let mut log = vec![1, 2];
/// weft_graph::state::append(&mut log, vec![3]);
/// assert_eq!(log, [1, 2, 3]);
/// ```
pub fn append<T>(left: &mut Vec<T>, right: Vec<T>) {
    if left.is_empty() {
        *left = right;
    } else {
        left.extend(right);
    }
}
