//! `AppendLog`: which list channels an `apply` only appended to, so checkpoints can store just the new
//! items.

/// What one [`State::apply_logged`](crate::State::apply_logged) did to list channels: for each channel it
/// reports, either "k items appended at the end, nothing else changed" or "replaced" (anything else: an
/// overwrite, an item replaced or removed by id, a remove-all). A channel the state changed but did not
/// report counts as replaced.
///
/// ```
/// use weft_graph::state::AppendLog;
///
/// let mut log = AppendLog::new();
/// log.appended(0, 2);
/// log.appended(0, 1);
/// log.replaced(1);
/// log.appended(1, 4);
/// assert_eq!(log.appended_count(0), Some(3));
/// assert_eq!(log.appended_count(1), None);
/// assert_eq!(log.appended_count(2), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendLog {
    /// Channel index and items appended (`None`: replaced).
    entries: Vec<(usize, Option<usize>)>,
}

impl AppendLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `count` items were appended to channel `index` (and nothing else changed in it).
    pub fn appended(&mut self, index: usize, count: usize) {
        match self.entries.iter_mut().find(|(i, _)| *i == index) {
            Some((_, seen)) => *seen = seen.map(|n| n.saturating_add(count)),
            None => self.entries.push((index, Some(count))),
        }
    }

    /// Records that channel `index` changed in some other way than by appending.
    pub fn replaced(&mut self, index: usize) {
        match self.entries.iter_mut().find(|(i, _)| *i == index) {
            Some((_, seen)) => *seen = None,
            None => self.entries.push((index, None)),
        }
    }

    /// How many items were appended to channel `index`, if that is all that was recorded for it; `None`
    /// when it was replaced or not reported.
    pub fn appended_count(&self, index: usize) -> Option<usize> {
        self.entries.iter().find(|(i, _)| *i == index).and_then(|(_, n)| *n)
    }

    /// Forgets everything (keeps the allocation).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
